// The lock protocol on top of a LockStore: acquire, release, renew and inspect locks.
//
// Acquire inserts a document whose `program` is unique (unique index "program_1"). On a duplicate key it
// purges the name's expired document (expires_at <= now - takeover grace, server clock) and, only if
// exactly one was purged, inserts once more. Every acquisition has its own _id, and every later
// conditional write names that _id or the token, so a write can only touch the acquisition it targets,
// even on servers whose conditional writes read then write (FerretDB v1).
#pragma once

#include <mongolock/lock_store.hpp>
#include <mongolock/log.hpp>
#include <mongolock/queue.hpp>

#include <functional>
#include <memory>
#include <optional>

namespace mongolock {

struct AcquireRequest {
  std::string name;            // lock name, already validated
  std::string process;         // holder identity "host:pid"
  std::string user;            // the holder's user name, informational
  Millis ttl{0};               // lease length
  Millis takeover_grace{2000}; // purge expired locks only this long after expires_at
  std::string command;         // run: the command's name (never its arguments); "" otherwise
  Millis min_hold{0};          // --min-hold: a release before acquired_at + min_hold keeps the lock until then
  int slots = 1;               // --slots N: up to N holders share the name, one document per slot
  bool fence = false;          // --fence: allocate a fencing token for the acquisition
  bool waiters = false;        // mark the lock document `waiters` (taken from the queue: its release wakes the queue)
  std::string ticket;          // taken from the queue: this waiter's ticket of the name (LockRecord::ticket)
  std::optional<std::int64_t> replace_seq; // run --replace, taken from the queue: its ticket's seq (LockRecord)
  // run: where the holder runs, recorded in the document (LockRecord::boot_id, pid_ns, pid_start), and
  // the test for an instant takeover of a live-looking lock whose holder is provably dead on this host
  // (liveness.hpp: holder_provably_dead(); its second argument: the lock is about to be taken over, so
  // the dead holder's leftovers may be removed); unset: a lock is taken over only once expired + grace.
  std::string boot_id;
  std::string pid_ns;
  std::optional<std::int64_t> pid_start;
  std::function<bool(const LockRecord&, bool taking_over)> holder_dead;
  // The caller's own orphan (issue 27 item 4): an insert that may have been applied although it failed
  // (its reply was lost) and whose clean-up failed too. `orphaned` is told of it (acquire keeps a note
  // for the same caller's next acquire: identity.hpp); `own_orphan` says whether a document found holding
  // the name is one it was told of (by _id and token). Such a document that also names this request's
  // full identity (process, boot_id, pid_ns, pid_start) is deleted by _id and token and the name taken
  // anew, instead of "held by" this very caller (75). Within one Locker, orphans are remembered without them.
  std::function<void(const LockRecord&)> orphaned;
  std::function<bool(const LockRecord&)> own_orphan;
};

// How long to keep trying while a name is held (--wait). A waiter joins the queue of waiters
// (queue.hpp) and takes the lock when it is first in line and the lock is free, checking every
// queue.poll.
struct WaitPolicy {
  std::optional<Millis> wait; // nullopt: try once, without the queue; Millis::max(): forever
  QueueTiming queue{};        // ticket lease, renewal and poll intervals
  bool push = true;           // follow wake-up events (tailable cursor); false: poll only (--no-push)
  bool replace = false;       // run --replace: join the queue at the front (WaitQueue::join); a newer
                              // replacing run ahead ends the wait (AcquireOutcome::superseded)
};

// Pauses for `d` between attempts; returns false when waiting should stop (a signal arrived).
using Sleeper = std::function<bool(Millis)>;

// The result of acquiring one or several names.
struct AcquireOutcome {
  std::vector<LockRecord> locks;   // every lock taken, in request order; empty when not acquired
  std::string held;                // not acquired: the name that was held
  std::vector<LockRecord> holders; // not acquired: the live documents of `held` read by the last attempt (its
                                   // slots' holders, for the message; empty when it was not read)
  bool interrupted = false;        // not acquired: the sleeper stopped the wait
  bool superseded = false;         // not acquired: a newer run --replace joined the queue ahead (WaitPolicy::replace)
  // Taken from the queue: the waiter's tickets and its cursor on the wake-up events, deleted and closed
  // by leave_queue() or on destruction (run leaves once its command has started: not in the handover).
  std::unique_ptr<WaitQueue> queue;
  std::unique_ptr<EventFeed> feed;
  void leave_queue() {
    feed.reset();
    queue.reset();
  }
};

struct ReleaseOutcome {
  enum Kind { released, min_hold, not_holder } kind = not_holder;
  ServerTime hold_until{}; // min_hold: the lock stays until then
  std::string found;       // not_holder, by holder alone: the _id of the acquisition found and acted on ("" if none)
};

// How long a run must have held its lock for its release to append a wake-up event although the lock is
// not marked `waiters` (issue 30: a short job's holder never renews, so it never reads the queue and never
// marks the lock; the release then woke nobody and the queue noticed by polling, about 1.35 s). A run's lock
// released sooner wakes nobody, so that a one-shot `run` sends no event insert; a waiter first in line behind
// a young unmarked run lock looks again once this has passed (Locker::busy_name), so it waits at most this
// long for a release without an event. Server clock, milliseconds.
inline constexpr Millis k_wake_window{150};

// True when releasing `lock` at `released_at` (server clock, the latest it can read) must append a wake-up
// event: it is marked `waiters` (taken from the queue, or its holder saw waiters: Locker::mark_if_waited), or
// it is a run's lock (LockRecord::command set) held k_wake_window or longer. Sends nothing.
[[nodiscard]] bool wakes_waiters(const LockRecord& lock, ServerTime released_at);

class Locker {
public:
  Locker(LockStore& store, const Log& log) : m_store(store), m_log(log) {}

  // One acquisition attempt on each slot in turn (slot_program()). With `ensure_index`, first creates the unique index
  // (createIndexes). Per slot: insert; on duplicate key, read the document and, only when it expired more than the
  // takeover grace ago, delete it by its _id (findAndModify, still only while expired that long) and insert again.
  // With --fence, then allocates a fencing token and stores it. Returns the new lock, or nullopt when every slot is
  // held; then `seen` (when given) holds the live documents read (for messages: no second read). Server commands
  // for a free plain lock: insert (+ createIndexes); when held by a live holder: insert + find per slot, one
  // write; an expired one: insert, find, findAndModify, insert. Throws Error (exit 69) on server errors; when an
  // insert failed in a way that may still have written it, first tries to delete that exact acquisition.
  [[nodiscard]] std::optional<LockRecord> try_acquire(const AcquireRequest& request, bool ensure_index = true,
                                                      std::vector<LockRecord>* seen = nullptr);

  // Acquires every request (callers sort the names, so that all take them in one order) or none: when a
  // name is held, releases those taken so far. Without policy.wait that is one attempt. With it: when
  // nobody waits for any of the names, one attempt first, as without it; then the caller joins the queue
  // of every name (queue.hpp) and, within policy.wait, tries again whenever it is first in line on every
  // name and every name has a free slot (an unexpired document counts as taken until it is expired
  // takeover_grace long): at once when a wake-up event says a lock of its names was released, when the
  // busy lock may be taken over (its expiry + grace, no event), and after every wait without an event.
  // A wake-up event that names the ticket of a waiter ahead tells that it has left the line, so the next
  // in line tries at once without reading the queue. The tickets are deleted on every way out: when not
  // taken (timed out, interrupted, Error) before returning, when taken with outcome.queue.
  // On an Error, releases those taken so far and rethrows.
  // The waiting is a Waiter (waiter.hpp, a state machine); only the first in line follow the events.
  [[nodiscard]] AcquireOutcome acquire_all(const std::vector<AcquireRequest>& requests, const WaitPolicy& policy,
                                           const Sleeper& sleep);

  // Releases the one document `which` selects: deletes it (findAndModify remove; when the document wakes
  // waiters (wakes_waiters()), then appends a wake-up event, whose failure is only logged), or, during its minimum
  // hold (and while its lease lasts), marks it released and lets it expire at hold_until (two more commands, and
  // the event when it wakes waiters, so that the head learns the earlier expiry). Never touches a document `which` does
  // not select. By holder alone (which.process/place, no _id or token), first finds the name's document and then acts
  // only on that acquisition, by its _id: a copy of the release that lands late never deletes the holder's next
  // acquisition (one more command: find, then delete). By _id or token: the delete first, and a find only when it
  // matched nothing (a run's own release: one command).
  [[nodiscard]] ReleaseOutcome release(const LockSelector& which);

  // Extends the unexpired, unreleased lock that `which` selects to now + ttl (server clock, the latest it
  // can read), setting `waiters` too with `mark_waiters`. renewed_at is stamped from the earliest the
  // server's clock can read (never in its future, whatever the handshake's delay: red team 4, F3), and only
  // a document last renewed before that stamp matches; one renewed at or after it by the same acquisition
  // (its heartbeat) is renewed once more, above that stamp (one find, one more findAndModify). Returns the
  // new expiry, or nullopt when `which` selects no live lock (the retry above a stamp checks "live" at the
  // retry, not at the start: red team 7, F3). Throws Error (66 by token, else 65) when the renewal was
  // written after the lease had ended (its new expiry not after the server's latest time once answered:
  // red team 7, F2), and Error (69) on server errors. A run's lock (run_ttl_ms) matches only when `ttl` is at
  // least the run's own TTL (red team 8, F1): a shorter one returns nullopt.
  [[nodiscard]] std::optional<ServerTime> renew(const LockSelector& which, Millis ttl, bool mark_waiters = false);

  // Heartbeat renewal of `lock` to (the latest server time at `sent`) + ttl, where `sent` is the local
  // monotonic time the renewal is sent; with lock.mark_next it also sets `waiters`. Only a document whose
  // renewed_at is older than this renewal's matches, so a late copy of an older renewal can never move
  // the expiry back (on servers whose updates are atomic). Updates lock.expires_at/renewed_at/ttl/sent
  // on success. Returns false when the lease is gone (no unexpired document with this _id and token). A
  // renewal that matched nothing because another renewal of this acquisition (`renew --token`) stamped
  // renewed_at at or after its stamp reads the document and, while it is live and unreleased, renews once
  // more above that stamp (lock.stamp_sent only grows; red team 4, F3). Throws Error (69) on server errors.
  [[nodiscard]] bool renew(LockRecord& lock, Millis ttl, LocalTime sent);

  // The documents of lock `name`: its plain lock and its semaphore slots, expired or not.
  [[nodiscard]] std::vector<LockRecord> holders(std::string_view name);

  // "held by web1:4242 (user alice) since 2026-...Z, expires in 25s" for messages.
  [[nodiscard]] std::string describe_holder(const LockRecord& lock);

  [[nodiscard]] LockStore& store() { return m_store; }

  // The holder's side of push wake-ups: for each of `locks` (held by this process) not yet marked
  // `waiters`, reads the queue of its name (one find for all of them) and, when a live ticket waits, sets
  // lock.mark_next, so that the lock's next renewal also sets `waiters` (in the same update: a holder
  // never sends a second update of its document that could interleave with a renewal) and its release
  // then appends the wake-up event. Returns the number of locks to be marked. Sends no write. Waiters never
  // write a lock document (on FerretDB v1 their update could roll back this holder's renewal). Throws
  // Error (69) when the server fails; nothing depends on it but how soon a waiter is woken.
  int mark_if_waited(std::vector<LockRecord>& locks);

  // With `replaced` (from now on) every release by this Locker appends a k_replace_event (lock_store.hpp) as its
  // wake-up event, in place of the event naming its ticket, and whether or not it would wake waiters (wakes_waiters()):
  // for a run stopped for a replacing run (run --replace). The replacing run joined at the queue's front; a waiter
  // woken by an ordinary event tries at once, and one that missed the replacing run's announcement (an event lost) took
  // the lock ahead of it (session 10's CI). Woken by this event, every waiter reads the queue first.
  void wake_as_replaced(bool replaced = true) { m_replaced = replaced; }

  // Deletes the one document `which` selects (findAndModify remove); when it wakes waiters (wakes_waiters():
  // marked `waiters`, or a run's lock held k_wake_window or longer), then appends a wake-up event naming its
  // ticket (a failure of that is only logged). True when one was
  // deleted. Release and break use it. Throws Error (69) when the delete fails.
  bool remove_and_wake(const LockSelector& which);

private:
  friend class Waiter; // waiter.hpp: acquire_all's state machine makes the attempts and reads
  // One heartbeat renewal as sent (renew(LockRecord&...)'s step): whether it matched, and its filter.
  struct RenewalSent {
    bool matched = false;
    LockSelector which;
  };
  RenewalSent renew_once(LockRecord& lock, Millis ttl, LocalTime sent);
  // renew(which...)'s last step: throws Error (66 with which.token, else 65) when `expires`, the expiry just
  // written, is not after the server's time now (ServerClock::latest): the renewal reached the server after
  // the lease had ended (a slow call, a lost reply sent again), and another host may hold the lock (red team
  // 7, F2; FerretDB refuses the server-time condition that would have refused it there).
  void refuse_if_ended(const LockSelector& which, ServerTime expires);
  void release_quietly(const LockRecord& lock);
  // release()'s parts: whether `current` is the holder `which` names by process and place (place_matches()), and
  // the release of the found acquisition `current` that `which` selects (deleted, or marked released within its
  // minimum hold, which ends for sure before `now`, the server's earliest clock).
  static bool holds(const LockSelector& which, const LockRecord& current);
  ReleaseOutcome release_found(const LockSelector& which, const LockRecord& current, ServerTime now);
  // try_acquire's parts: the document to insert (a new token), and the fencing token once inserted.
  static LockRecord new_lock(const AcquireRequest& request);
  void assign_fence(const std::string& name, LockRecord& lock);
  // A busy slot's document `current`: deleted when it expired more than the takeover grace ago (by _id and
  // "still expired that long", on the server's earliest clock) or, with request.holder_dead, when its holder
  // is provably dead on this host (by _id, token and hold_until <= now: a --min-hold outlives its holder).
  // Returns the deleted document; nullopt when it stays
  // (live, or renewed or taken over meanwhile). Throws Error (69) on server errors.
  std::optional<LockRecord> purge_stale(const AcquireRequest& request, const LockRecord& current);
  // A busy slot's document `current`: this caller's own orphan taken over (take_own_orphan()), else, after
  // the warning that the caller's own identity holds it (once per Locker), purge_stale(). Returns the
  // deleted document; nullopt when it stays. Throws Error (69) on server errors.
  std::optional<LockRecord> free_held(const AcquireRequest& request, const LockRecord& current);
  // True when `current` is this caller's own orphan: its full identity (process, boot, PID namespace and
  // start, all recorded and equal) and an _id and token this Locker or request.own_orphan knows as an
  // insert whose reply was lost and whose clean-up failed. Sends nothing.
  bool own_orphan(const AcquireRequest& request, const LockRecord& current) const;
  // Deletes own orphan `current` by _id and token (findAndModify remove); returns it, nullopt when it was
  // gone already. Throws Error (69) on server errors.
  std::optional<LockRecord> take_own_orphan(const LockRecord& current);
  // True when `current` expired more than the takeover grace ago (server's earliest clock).
  bool expired_past_grace(const LockRecord& current, const AcquireRequest& request);
  // One all-or-none attempt on every request; true when all were taken (outcome.locks), else sets
  // outcome.held and leaves outcome.locks empty.
  bool attempt_all(const std::vector<AcquireRequest>& requests, bool ensure_index, AcquireOutcome& outcome);
  // The first request whose name has no free slot (one find per name): its name ("" when every one has
  // one) and when (server time) its first taken slot may be taken over (expires_at + takeover grace; no
  // event tells of it). Reads only: a waiter never writes the holder's document.
  struct Busy {
    std::string name;
    ServerTime takeover_at = ServerTime::max(); // when to look again without an event: a busy slot's expiry +
                                                // grace, or the end of a young run lock's k_wake_window
    std::optional<std::int64_t> replace_seq;    // the lowest LockRecord::replace_seq among its live holders
  };
  Busy busy_name(const std::vector<AcquireRequest>& requests);

  LockStore& m_store;
  const Log& m_log;
  bool m_replaced = false;           // wake_as_replaced()
  bool m_own_warned = false;         // the warning that the caller's own identity holds a name was given
  std::vector<LockRecord> m_orphans; // inserts whose reply was lost and whose clean-up failed (own_orphan())
};

// The `program` value of slot `slot` of lock `name`: NAME itself for slot 1 (so a plain lock is slot 1 of
// every semaphore of that name, and the two exclude each other there), "NAME#K" for K >= 2 (names may
// not contain '#').
[[nodiscard]] std::string slot_program(std::string_view name, int slot);

// "'a', 'b'" for messages: the locks' programs, at most 8, then "and N more" (text.hpp: quoted_list()).
[[nodiscard]] std::string quoted_programs(const std::vector<LockRecord>& locks);

} // namespace mongolock
