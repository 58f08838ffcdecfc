// Who holds a lock: the holder identity "host:pid" stored as `process`.
#pragma once

#include <mongolock/lock_store.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace mongolock {

// This machine's host name (gethostname(2)); "unknown-host" if it cannot be read.
[[nodiscard]] std::string host_name();

// The holder identity "<host>:<pid>" for process `pid` on this host.
[[nodiscard]] std::string holder_identity(pid_t pid);

// The PID namespace every Linux system starts with ("pid:[4026531836]": the kernel's PROC_PID_INIT_INO):
// a host's processes outside containers.
inline constexpr std::string_view k_initial_pid_ns = "pid:[4026531836]";

// The holder as people read it (status, list, history, refusals; issue 26 item 7): `process` ("host:pid"),
// and when `pid_ns` (LockRecord::pid_ns, RunRecord::pid_ns) names a PID namespace other than the viewer's
// own (the initial one too: red team X4), its inode after it: "vm:1 (pid ns 4026532301)", so that
// containers and the host that share a host name and pid can be told apart; "(pid ns unknown)" for a
// namespace acquire could not read. `process` alone when pid_ns is empty (not recorded) or the viewer's (a
// whole CI job in one container reads as before).
[[nodiscard]] std::string holder_label(std::string_view process, std::string_view pid_ns);

// acquire's notes of its own orphans (issue 27 item 4): an acquire whose insert may have been applied
// although its reply was lost, and whose clean-up failed too, exits 69 without knowing whether it holds the
// name. It leaves a note of that insert's _id and token for its caller (process `caller` started at
// `caller_start`: the shell that runs acquire), /dev/shm/mongolock-orphan-EUID-NSINODE-PID-START-HASH (NSINODE:
// the caller's PID namespace; HASH: of the lock's program), mode 0600. The same caller's next acquire takes such a
// document over only when its note names it: a document of the same identity without a note is an earlier acquire that
// succeeded (a lock is not reentrant: 75). Notes of callers of this PID namespace that no longer run are removed by
// these functions, only when /proc is this namespace's (red team X3s); none without it. Best effort, never throws:
// without a note the retry says who holds the name (75), as before.
void note_own_orphan(pid_t caller, std::int64_t caller_start, const LockRecord& lock);

// True when this user's note for `caller` (started at `caller_start`) names lock document `lock` (its
// program, _id and token): a regular file of this user, one link, mode 0600.
[[nodiscard]] bool noted_own_orphan(pid_t caller, std::int64_t caller_start, const LockRecord& lock);

// The login name of the effective user (getpwuid(3)), or the numeric uid when it has no name. Looked up once a
// process for the euid of the first call (looked up again should the euid differ later).
[[nodiscard]] std::string user_name();

} // namespace mongolock
