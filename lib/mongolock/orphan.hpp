// Releasing the locks of a run whose mongolock died: the guardian (process.hpp) stops the job and then
// executes `mongolock __release-orphaned FD`, which reads the request that run prepared and deletes each
// lock by _id and token, so the next run anywhere does not wait for the lease to expire (issue #17), and
// records the run in the history (outcome lease-lost: `history` and `check` must not show the name idle
// although its job ran; issue 26 item 12).
#pragma once

#include <mongolock/lock_store.hpp>
#include <mongolock/log.hpp>
#include <mongolock/mongo_store.hpp>
#include <mongolock/run_store.hpp>

#include <string>
#include <vector>

namespace mongolock {

struct OrphanRequest {
  StoreConfig store;             // where the locks are (the URI with its secrets: the request stays in a memfd)
  std::vector<LockRecord> locks; // program, _id and token of each (the rest is not encoded)
  int holder_pid = 0;            // mongolock's pid, for the message
  std::int64_t holder_start = 0; // its start time (liveness.hpp): its holder file is removed
  // The run's history records as prepared at the start (one per name; empty with --no-history): _id, name,
  // process, pid_ns, host, user, command, started_at, waited, lock, fence, outcome and exit_code are encoded (the
  // rest is not); release_orphaned() sets ended_at and duration when it records them.
  std::vector<RunRecord> runs;
};

// The request as text: length-prefixed fields ("5:hello,"), so any byte in the URI or a name survives.
// The runs are kept within the 64 KiB that release_orphaned() reads: each command cut to its program
// when they would not fit, left out when even then.
[[nodiscard]] std::string encode_orphan_request(const OrphanRequest& request);

// The inverse of encode_orphan_request(). Throws Error (64) naming what is malformed.
[[nodiscard]] OrphanRequest decode_orphan_request(std::string_view text);

// The hidden command: reads the request from file descriptor `fd_text` (at most 64 KiB), releases each
// lock by _id and token (findAndModify remove; a wake-up event when waiters are marked), then records the
// request's runs (record_runs(): ended now, server clock; no purge), each call bounded by the request's
// timeouts capped at 5 s, and says so on `log` in one line. Returns 0 when every lock was released or
// already gone, 69 when the server failed (the locks then expire on their own), 64 for a malformed request.
int release_orphaned(std::string_view fd_text, const Log& log);

} // namespace mongolock
