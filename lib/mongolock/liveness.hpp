// Whether the holder of a lock is provably dead, for an instant takeover on the same host (issue #17).
// A lock taken by `run` records where its holder runs (LockRecord::boot_id, pid_ns, pid_start); the run
// also keeps an flock(2) on a holder file for as long as mongolock or its guardian lives. A holder on
// this host, this boot and this PID namespace whose process is gone (or whose pid now belongs to a
// process started later) and whose holder file is no longer locked has stopped for good: mongolock and
// its guardian are gone, and the guardian kills the job before it exits; the job's process group, which
// the guardian records in the holder file, must be empty too (both may have been killed at once).
#pragma once

#include <mongolock/lock_store.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace mongolock {

// Where a process runs: the kernel's boot id (/proc/sys/kernel/random/boot_id), its PID namespace
// (readlink /proc/self/ns/pid, e.g. "pid:[4026531836]") and its start time (field 22 of /proc/PID/stat,
// clock ticks after boot). Empty / 0 where unreadable.
struct ProcessIdentity {
  std::string boot_id;
  std::string pid_ns;
  std::int64_t pid_start = 0;
  [[nodiscard]] bool complete() const { return !boot_id.empty() && !pid_ns.empty() && pid_start > 0; }
};

// This process's identity. Never throws.
[[nodiscard]] ProcessIdentity own_process_identity();

// The start time of process `pid` (field 22 of /proc/PID/stat), nullopt when there is no such process
// (or it cannot be read).
[[nodiscard]] std::optional<std::int64_t> process_start(pid_t pid);

// The holder file of the run whose mongolock is process `pid` started at `start`:
// /dev/shm/mongolock-run-PID-START.lock.
[[nodiscard]] std::string holder_file_path(pid_t pid, std::int64_t start);

// The run's holder file: created (mode 0644) and locked with flock(LOCK_EX) by the constructor; the
// descriptor is close-on-exec, so the guardian (a fork) holds the lock too but the job does not.
// Unlinked and closed on destruction. When the file cannot be made or locked, holds nothing (locked()
// false): the lock then simply cannot be taken over early.
class HolderFile {
public:
  explicit HolderFile(const ProcessIdentity& self);
  ~HolderFile();
  HolderFile(const HolderFile&) = delete;
  HolderFile& operator=(const HolderFile&) = delete;
  [[nodiscard]] bool locked() const { return m_fd >= 0; }
  // The locked descriptor (-1 when not locked); the guardian writes the job's process group id there
  // (ChildSpec::holder_fd).
  [[nodiscard]] int fd() const { return m_fd; }

private:
  int m_fd = -1;
  std::string m_path;
};

// True only when `lock` was taken by a run (pid_start recorded) on host `host` in the boot and PID
// namespace of `here`, its pid runs no process started at pid_start any more, its holder file exists and
// is not locked (nobody holds it: mongolock and its guardian are gone), and the job's process group
// recorded in the file has no member left (kill(-pgid, 0) fails with ESRCH: when mongolock and its
// guardian were both killed with SIGKILL, the job's own children may live on). Anything else (another
// host, a lock taken by `acquire`, a missing or locked file, a group with members or that cannot be
// checked, unreadable /proc) is false. With `remove_file` (the caller takes the lock over now), removes the
// stale holder file when true (best effort).
[[nodiscard]] bool holder_provably_dead(const LockRecord& lock, const ProcessIdentity& here, std::string_view host,
                                        bool remove_file = true);

} // namespace mongolock
