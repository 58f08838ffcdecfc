// Presenting locks: the text and JSON forms of `status` and `list`. JSON field names are stable and
// documented in mongolock(1) (JSON OUTPUT).
#pragma once

#include <mongolock/check.hpp>
#include <mongolock/history.hpp>
#include <mongolock/lock_store.hpp>
#include <mongolock/queue.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mongolock {

// A lock document as seen at server time `now`.
struct LockView {
  LockRecord lock;
  ServerTime now{};
  std::optional<bool> holder_alive; // only for holders on this host: does their pid still exist?
};

// "held", "expired", "released" (within its minimum hold) or "malformed" (LockRecord::malformed: a
// document the protocol cannot expire).
[[nodiscard]] std::string lock_state(const LockView& view);

// True while the lock keeps others out: unexpired (released or not), or malformed (never expires).
[[nodiscard]] bool is_live(const LockView& view);

// Whether process `holder` ("host:pid") is alive, when it runs on this host; nullopt for other hosts or a
// holder identity that is not host:pid. With `start` (LockRecord::pid_start), a process of that pid that
// started at another time is not the holder (false), where this namespace's /proc shows its start.
[[nodiscard]] std::optional<bool> holder_alive_here(const std::string& holder,
                                                    std::optional<std::int64_t> start = std::nullopt);

// `status NAME`: "key: value" lines, one block per document (plain lock or slot), or "state: free"; then,
// when `waiters` (live tickets of NAME, in line order, as of `now`) is not empty, "waiters: N" and one line
// per waiter: "  1. host:pid, waiting since TIME (for DUR)". Every stored string is escaped with printable():
// the server's documents may carry control bytes or invalid UTF-8 that another client wrote.
// Then, when `last_run` is given, "last run: OUTCOME on HOST:PID, ended TIME (AGO), took DUR, exit N".
[[nodiscard]] std::string status_text(const std::string& name, const std::vector<LockView>& locks,
                                      const std::vector<QueuedWaiter>& waiters = {}, ServerTime now = {},
                                      const std::optional<RunRecord>& last_run = std::nullopt);
// `status NAME --json`: {"name", "state": "held"|"free", "locks": [lock objects], "waiters": [waiter
// objects], "last_run": run object or null}, a waiter object being {"position", "waiter" (host:pid),
// "waiting_since", "ticket_expires_at"}, a run object as history_json() writes it.
[[nodiscard]] std::string status_json(const std::string& name, const std::vector<LockView>& locks,
                                      const std::vector<QueuedWaiter>& waiters = {},
                                      const std::optional<RunRecord>& last_run = std::nullopt);

// The last run of each lock name (history.hpp), for `list`.
using LastRuns = std::map<std::string, RunRecord>;

// `list`: a table NAME HOLDER ACQUIRED EXPIRES ALIVE LAST RUN ("ok 3h ago", "-" when none is recorded), or
// "no locks held"; then, when there are waiters, a second table WAITING FOR, POS, WAITER, SINCE in line
// order. Escaped as status_text() is.
[[nodiscard]] std::string list_text(const std::vector<LockView>& locks, const std::vector<QueuedWaiter>& waiters = {},
                                    ServerTime now = {}, const LastRuns& last_runs = {});
// `list --json`: a JSON array of lock objects; each has "waiters": the waiter objects of its name, and
// "last_run": its name's last run object or null. In every JSON output, invalid UTF-8 stored on the server
// becomes U+FFFD (JSON strings are Unicode).
[[nodiscard]] std::string list_json(const std::vector<LockView>& locks, const std::vector<QueuedWaiter>& waiters = {},
                                    const LastRuns& last_runs = {});

// `history`: newest first, one line a row (history.hpp: fold_history(), one_row_each()) under the header
// STARTED (UTC), NAME, HOST:PID, DURATION, OUTCOME, EXIT, NOTE (held by whom, the signal, the wait, the
// skipped attempts folded in: "skipped on 198 hosts (a, b, …)"); then the summary line "N runs: N ok, N
// failed, N skipped; duration median DUR, max DUR" (folded skips counted). "no runs recorded" (for `name`,
// when given) when empty.
[[nodiscard]] std::string history_text(const std::vector<HistoryRow>& rows, const std::optional<std::string>& name,
                                       ServerTime now);
// `history --json`: {"runs": [run objects], "summary": {"runs", "ok", "failures", "skipped", "not_due",
// "median_duration_ms", "max_duration_ms"}}; a run object: {"name", "process", "host", "user", "command"
// (array), "started_at", "ended_at", "duration_ms", "waited_ms", "outcome", "exit_code", "signal",
// "held_by", "fence", "skips": {"count", "hosts", "host_names"}} (absent values null; skips: the attempts
// folded into the row, or as the run counted them when it ended for status, list and check).
// `check --json`: {"state": "OK"|..., "exit_code", "max_age_ms", "names": [{"name", "state", "age_ms" (of
// the last success, null when none), "last_success": run object or null, "last_run": run object or null,
// "text"}]}.
[[nodiscard]] std::string check_json(const std::vector<NameCheck>& checks, const CheckPolicy& policy);
// `check --json` when the server cannot be read: {"state": "UNKNOWN", "exit_code": 3, "error": WHY}.
[[nodiscard]] std::string check_unknown_json(const std::string& why);

[[nodiscard]] std::string history_json(const std::vector<HistoryRow>& rows);

} // namespace mongolock
