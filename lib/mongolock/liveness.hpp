// Whether the holder of a lock is provably dead, for an instant takeover on the same host (issue #17).
// A lock taken by `run` records where its holder runs (LockRecord::boot_id, pid_ns, pid_start); the run
// also keeps an flock(2) on a holder file for as long as mongolock or its guardian lives. A holder on
// this host, this boot and this PID namespace whose process is gone (or whose pid now belongs to a
// process started later) and whose holder file is no longer locked has stopped for good: mongolock and
// its guardian are gone, and the guardian kills the job before it exits. Both may have been killed at
// once, so the job itself must be proven gone too: its cgroup (recorded in the holder file) empty and its
// process group without a running member. Without a cgroup that cannot be proven (issue 26).
#pragma once

#include <mongolock/cgroup.hpp>
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

// This process's identity. Never throws. Read once per process (pid) when every field could be read.
[[nodiscard]] ProcessIdentity own_process_identity();

// Where process `pid` of this PID namespace runs, to record as a holder's place (lock_store.hpp HolderPlace;
// acquire's caller is its parent, issue 26 item 7): this boot's id, mongolock's own PID namespace
// (/proc/self/ns/pid: the parent's whenever it is a process here) and the process's start. Every field is
// set (red team of the holder identity, X1 and X2): one that cannot be read is k_unknown_place /
// k_unknown_start (the PID namespace when /proc is not this namespace's, proc_is_own(); the start when
// /proc/PID/stat is hidden, hidepid); `pid` 0 (a caller outside this PID namespace: docker exec, nsenter,
// PID 1 itself) records no start, so that every such caller of the same namespace and boot matches. Never
// throws.
[[nodiscard]] HolderPlace process_place(pid_t pid);

// The start time of process `pid` (field 22 of /proc/PID/stat), nullopt when there is no such process
// (or it cannot be read).
[[nodiscard]] std::optional<std::int64_t> process_start(pid_t pid);

// The holder file of the run whose mongolock is process `pid` started at `start`:
// /dev/shm/mongolock-run-PID-START.lock.
[[nodiscard]] std::string holder_file_path(pid_t pid, std::int64_t start);

// A mongolock `run` among this process's ancestors: its pid and start (field 22 of /proc/PID/stat).
struct RunAncestor {
  pid_t pid = 0;
  std::int64_t start = 0;
};

// The mongolock runs this process runs inside: its ancestors (parent pids in /proc, nearest first, up to
// 128) that have a holder file (holder_file_path; it exists while the run's mongolock or its guardian
// lives). A run is the subreaper of its command, so a daemonized part of the job stays its descendant. An
// ancestor whose stat cannot be read ends the walk. Never throws.
[[nodiscard]] std::vector<RunAncestor> enclosing_runs();

// Whether `lock` is held by one of `runs` (enclosing_runs()): taken by `run` (its command recorded), on
// host `host`, this boot and PID namespace, with that pid (its `process` "<host>:<pid>") and start. False
// when anything of that is missing or differs. Red team 6, F2: the environment `run` gives its command is
// lost through env -i, su - or a nested run; descent is not.
[[nodiscard]] bool held_by_enclosing_run(const LockRecord& lock, const std::vector<RunAncestor>& runs,
                                         std::string_view host);

// The runs whose job cgroup this process is in: the pid and start in each "mongolock-job-PID-START-N-NONCE"
// component of its cgroup2 path (/proc/self/cgroup's "0::" line; process.cpp names the job's group so),
// nearest first. A cgroup stays the same through a new PID, mount, UTS or user namespace, env -i, su and
// a private /dev/shm, which hide a run from enclosing_runs() (red team 7, F1); a new cgroup namespace
// (unshare -C) hides it too, and a run without a job cgroup (no writable cgroup2) leaves none. Empty when
// there is none or /proc/self/cgroup cannot be read. `complete`, when given, is set false when the search
// through a cgroup namespace stopped at its bound (hidden_cgroup_named()): an empty result is then no proof
// that this process is outside every run's job. Never throws.
[[nodiscard]] std::vector<RunAncestor> enclosing_job_cgroups(bool* complete = nullptr);

// Whether `lock` was taken by `run` (its command recorded) on this boot, or the boot of either is unknown:
// a lock whose job cgroup could be this process's (a cgroup belongs to one kernel). Never throws.
[[nodiscard]] bool run_lock_of_this_boot(const LockRecord& lock);

// Whether `lock` is held by one of the runs of `groups` (enclosing_job_cgroups()): taken by `run`, this
// boot (the boot id: the same kernel, whatever the namespaces), with that pid and start. No host or PID
// namespace test: a UTS or PID namespace between the run and this process changes those, not the cgroup.
[[nodiscard]] bool held_by_enclosing_job_cgroup(const LockRecord& lock, const std::vector<RunAncestor>& groups);

// Removes the stale holder files in /dev/shm (issue 26): those whose process is gone (not merely hidden by
// hidepid), whose lock nobody holds, and which either never recorded a job (a run killed while it waited)
// or was written more than 24 hours ago and whose job's cgroup, if any, is empty (removed too). Others are
// the evidence an instant takeover reads (and removes itself): kept. Files of other users stay where /dev/shm's sticky
// bit forbids it. Returns how many were removed; never throws.
int sweep_holder_files();

// sweep_holder_files() at most once a minute per user on a host (what HolderFile's constructor calls; issue
// 30: every run swept, ~1 ms of listing and lstat with a day's evidence of killed runs): the mtime of
// /dev/shm/mongolock-sweep-EUID.stamp (a regular file of this user) says when a sweep last began; set to now
// before sweeping. Returns -1 when not due (nothing looked at), else how many files were removed. A stamp
// that is not this user's regular file does not put the sweep off. Never throws.
int sweep_holder_files_when_due();

// What a guardian's `__release-orphaned` leaves of run `pid` started at `start` whose mongolock died
// (orphan.cpp; the guardian has killed and reaped the whole job first): removes its holder file and, when
// the file names the job's cgroup (a mongolock-job-* group, liveness's evidence rules), that group once
// "populated 0" (waiting up to 200 ms for the kernel to say so; a group with processes stays: rmdir refuses
// it). Before, such groups were left behind, one per killed run (red team of issue 26, X12c). Never throws.
void remove_dead_run_leftovers(pid_t pid, std::int64_t start);

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

// Whether the holder of `lock` provably ended on this host, for an instant takeover (issue 26: act on
// proof, not inference). True only when `lock` was taken by a run (command and pid_start recorded) on host `host` in
// the boot and PID namespace of `here`, /proc is this namespace's (proc_is_own()), its pid runs no process started at
// pid_start any more (and is not merely hidden from /proc), its holder file exists and is not locked (mongolock and its
// guardian are gone), and nothing of its job runs, by proof: the job ran in its own cgroup (recorded in the holder
// file, cgroup.hpp) and that group is empty or removed, and the job's process group has no member left (kill(-pgid, 0)
// fails with ESRCH; EPERM is a member), or only zombies whose every thread is a zombie too (a leader that called
// pthread_exit() runs on in its other threads), seen in a /proc without hidepid. Anything else is false; `why_not` then
// says why in one line for -v
// ("not taking lock 'x' over at once: ...; waiting for its lease as another host would"), empty where the
// question does not arise (another host or container, a lock taken by `acquire`, a holder that runs).
// With `remove_file` (the caller takes the lock over now), removes the stale holder file and the job's
// empty cgroup when true (best effort).
struct HolderVerdict {
  bool dead = false;
  std::string why_not;
};
[[nodiscard]] HolderVerdict holder_verdict(const LockRecord& lock, const ProcessIdentity& here, std::string_view host,
                                           bool remove_file = true);

// What a holder file says (process.cpp record_job_group()): the job's process group and, when the job ran in
// its own cgroup, that group's directory.
struct HolderEvidence {
  pid_t pgid = 0; // 0: the guardian never forked a job (an empty file)
  std::string cgroup;
};

// What holder_verdict() reads on this host, one question at a time and in its order: evidence in, verdict
// out. The overload above asks the system (/proc, /dev/shm, cgroupfs); the simulator (tests/sim) answers
// from a simulated host whose evidence may be hidden, to check that only proof leads to a takeover (issue 28).
class LivenessProbe {
public:
  virtual ~LivenessProbe() = default;
  // /proc is this PID namespace's (process.hpp proc_is_own()).
  [[nodiscard]] virtual bool proc_is_own() = 0;
  // The start of process `pid` as /proc shows it (process_start()); nullopt when /proc shows none.
  [[nodiscard]] virtual std::optional<std::int64_t> process_start(pid_t pid) = 0;
  // A process `pid` exists, shown in /proc or not: kill(pid, 0) succeeds or fails with EPERM.
  [[nodiscard]] virtual bool pid_exists(pid_t pid) = 0;
  // Holder file `path` opened for evidence (only a regular file of root or this user that only its owner
  // may write): unusable (missing or untrustworthy: `why` says which), locked (its mongolock or guardian
  // holds its flock), or unlocked with what it says (nullopt: malformed). The probe may keep it open (and
  // share-locked) until it is destroyed.
  struct HolderFileView {
    enum class State { unusable, locked, unlocked } state = State::unusable;
    std::string why;                        // unusable: why, in one phrase
    std::optional<HolderEvidence> evidence; // unlocked: its contents; nullopt when malformed
  };
  [[nodiscard]] virtual HolderFileView holder_file(const std::string& path) = 0;
  // cgroup.hpp cgroup_state() of the job's group `dir`.
  [[nodiscard]] virtual CgroupState cgroup_state(const std::string& dir) = 0;
  // errno of kill(-pgid, 0): 0 when the group has a member, ESRCH when none, EPERM when a member may not
  // be signalled by this user.
  [[nodiscard]] virtual int signal_group(pid_t pgid) = 0;
  // Why group `pgid`, which has members, may still run something (a member that is not a zombie, a zombie
  // with a live thread, members it cannot all see: hidepid, an unreadable /proc entry); empty when every
  // member is a zombie with no live thread.
  [[nodiscard]] virtual std::string group_still_runs(pid_t pgid) = 0;
  // The holder is dead and its lock is being taken over: removes holder file `path` and the job's empty
  // cgroup `cgroup` ("" for none). Best effort, never throws.
  virtual void remove_leftovers(const std::string& path, const std::string& cgroup) = 0;
};

// holder_verdict() above, with the evidence read through `probe`: the same rules and messages.
[[nodiscard]] HolderVerdict holder_verdict(const LockRecord& lock, const ProcessIdentity& here, std::string_view host,
                                           LivenessProbe& probe, bool remove_file = true);

// holder_verdict(...).dead.
[[nodiscard]] bool holder_provably_dead(const LockRecord& lock, const ProcessIdentity& here, std::string_view host,
                                        bool remove_file = true);

} // namespace mongolock
