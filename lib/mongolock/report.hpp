// Presenting locks: the text and JSON forms of `status` and `list`. JSON field names are stable and
// documented in mongolock(1) (JSON OUTPUT).
#pragma once

#include <mongolock/lock_store.hpp>
#include <mongolock/queue.hpp>

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

// "held", "expired" or "released" (within its minimum hold).
[[nodiscard]] std::string lock_state(const LockView& view);

// True while the lock keeps others out: unexpired, released or not.
[[nodiscard]] bool is_live(const LockView& view);

// Whether process `holder` ("host:pid") is alive, when it runs on this host; nullopt for other hosts or a
// holder identity that is not host:pid.
[[nodiscard]] std::optional<bool> holder_alive_here(const std::string& holder);

// `status NAME`: "key: value" lines, one block per document (plain lock or slot), or "state: free"; then,
// when `waiters` (live tickets of NAME, in line order, as of `now`) is not empty, "waiters: N" and one line
// per waiter: "  1. host:pid, waiting since TIME (for DUR)". Every stored string is escaped with printable():
// the server's documents may carry control bytes or invalid UTF-8 that another client wrote.
[[nodiscard]] std::string status_text(const std::string& name, const std::vector<LockView>& locks,
                                      const std::vector<QueuedWaiter>& waiters = {}, ServerTime now = {});
// `status NAME --json`: {"name", "state": "held"|"free", "locks": [lock objects], "waiters": [waiter
// objects]}, a waiter object being {"position", "waiter" (host:pid), "waiting_since", "ticket_expires_at"}.
[[nodiscard]] std::string status_json(const std::string& name, const std::vector<LockView>& locks,
                                      const std::vector<QueuedWaiter>& waiters = {});

// `list`: a table NAME HOLDER ACQUIRED EXPIRES ALIVE, or "no locks held"; then, when there are waiters, a
// second table WAITING FOR, POS, WAITER, SINCE in line order. Escaped as status_text() is.
[[nodiscard]] std::string list_text(const std::vector<LockView>& locks, const std::vector<QueuedWaiter>& waiters = {},
                                    ServerTime now = {});
// `list --json`: a JSON array of lock objects; each has "waiters": the waiter objects of its name. In both
// JSON outputs, invalid UTF-8 stored on the server becomes U+FFFD (JSON strings are Unicode).
[[nodiscard]] std::string list_json(const std::vector<LockView>& locks, const std::vector<QueuedWaiter>& waiters = {});

} // namespace mongolock
