// The queue of waiters of `--wait`: fairness (first come, first served) among those who wait.
//
// A waiter holds one ticket per lock name in "<collection>_queue", all with one sequence number (seq),
// allocated like fencing tokens: the highest seq of any ticket plus one, inserted under the unique index
// on (name, seq), and on a duplicate key the next one (never $inc, which is not atomic on FerretDB v1).
// A ticket has a short lease that the waiter renews while it waits; a dead waiter's ticket expires and
// is skipped, and is deleted later by whoever reads the queue. Only the head of a name's queue (its live
// ticket with the lowest seq) may take the lock; a waiter of several names takes them only when it is the
// head on every one. Because a waiter's tickets share one seq, a waiter only ever waits for waiters with a
// lower seq: no cycle (no deadlock), and the waiter with the lowest live seq is head everywhere (no
// starvation among waiters).
//
// The queue's rule, only the head takes the lock, holds while a waiter's calls are answered within
// answer_limit() (1 s): a ticket renewal answered later does not count (the waiter rejoins at the back),
// and a woken head tries without renewing only while its ticket is certainly live (ticket_live()). A
// waiter stopped between its last check and its insert can still take the lock out of turn.
// The queue is fairness only. Mutual exclusion still comes from the unique index on the lock documents
// alone; two waiters that both believe they are head at once (a stale read) only race for the insert.
// Acquirers without --wait do not look at the queue and may take a free lock at the moment of a handover.
#pragma once

#include <mongolock/lock_store.hpp>
#include <mongolock/log.hpp>

#include <map>
#include <string>
#include <vector>

namespace mongolock {

// Timing of the queue: the ticket lease, how often it is renewed and how often a waiter checks.
// Only the first `followers` in line follow the wake-up events (a tailable cursor, which FerretDB v1
// re-runs every 10 ms while a getMore waits: about 2 % of a core each); they send, per `push_check`, one
// getMore, one find (the head: of the lock; the next in line: of the queue; others only every
// `push_recheck`) and a ticket renewal per `renew_every`. The waiters farther back hold no cursor: they
// renew their tickets every `far_renew_every` and read the queue every far_interval() (sooner the
// closer they are, and sooner while the line moves), so an idle waiter far back sends about 0.6 commands
// a second. Without push (--no-push) the first `followers` poll every `poll` instead.
struct QueueTiming {
  Millis ticket_lease{4000}; // a ticket not renewed for this long is dead (server clock)
  Millis renew_every{1500};  // the first in line renew their tickets this often (well within the lease)
  Millis poll{750};          // without push, the first in line check the queue (or, the head, the lock) this often
  Millis purge_after{2000};  // a dead ticket is deleted this long after its expiry
  // With push wake-ups (a tailable cursor on the events): each wait for an event lasts up to
  // `push_check` (one getMore). After a wait without an event the head checks the lock and the next in
  // line the queue (FerretDB v1 may lose an event at the end of a wait); others re-read the queue every
  // `push_recheck` and when the first ticket ahead expires (a dead waiter sends no event).
  Millis push_check{1500};
  Millis push_recheck{3000};
  int followers = 2;            // this many first in line follow the events (the head and the next)
  Millis far_step{400};         // farther back: read the queue every far_step per place behind the followers
  Millis far_max{5000};         // ... at most this long apart
  Millis far_renew_every{2500}; // ... and renew the tickets this often (answered within answer_limit():
                                // before ticket_lease - answer_limit() = 3 s have passed)
};

// How long a waiter at `position` (> timing.followers) waits before it reads the queue again: far_step
// per place behind the followers, at most far_max; when the line moved since the previous read (it was
// `before` places back `elapsed` ago), at most half the time the line took per place so far times the
// places left, so that it follows the events before its turn comes (at least 50 ms, or far_step when shorter). Pure.
[[nodiscard]] Millis far_interval(const QueueTiming& timing, int position, int before, Millis elapsed);

// One waiter's tickets on one or several names. Leaving (destruction) deletes them: a --wait that times
// out or is interrupted by a signal leaves no ticket behind; a killed waiter's tickets expire.
class WaitQueue {
public:
  WaitQueue(LockStore& store, const Log& log, QueueTiming timing = {}) : m_store(store), m_log(log), m_timing(timing) {}
  ~WaitQueue() { leave(); }
  WaitQueue(const WaitQueue&) = delete;
  WaitQueue& operator=(const WaitQueue&) = delete;

  // True when any of `names` has a live ticket (one find). Throws Error (69) on server errors.
  [[nodiscard]] bool anyone_waiting(const std::vector<std::string>& names);

  // Joins the back of the queue of every name in `names` with one seq, as waiter `process` ("host:pid").
  // Throws Error (69) on server errors (tickets inserted so far are deleted again).
  void join(const std::vector<std::string>& names, const std::string& process);

  // Renews the tickets when `every` has passed since the last renewal (one update per name). When a
  // ticket was lost (expired while this process stalled, or deleted), or its renewal was answered more
  // than answer_limit() after it was sent (it may have raced a delete of the ticket as dead), rejoins at
  // the back of the queue and returns false. Throws Error (69) on server errors.
  bool keep_alive(Millis every);

  // When (local time) the tickets are due for renewal at cadence `every` (keep_alive()).
  [[nodiscard]] LocalTime renewal_due(Millis every) const { return m_renewed + every; }

  // True while this waiter's tickets are certainly live on the server: the last renewal (or the join) was
  // sent less than ticket_lease - answer_limit() ago. A woken head tries without renewing only then; a
  // ticket that may have expired could already be skipped by the waiter behind it.
  [[nodiscard]] bool ticket_live() const;

  // Half of purge_after: a dead ticket is deleted only purge_after past its expiry (server clock), so a
  // renewal answered within this, with client clock estimates within it of each other, cannot have raced
  // that delete (the two filters, expires_at > sent and expires_at <= now - purge_after, cannot both
  // match the same ticket).
  [[nodiscard]] Millis answer_limit() const { return m_timing.purge_after / 2; }

  // Reads the queue of every joined name (one find) and remembers the live tickets ahead of this waiter;
  // true when there are none on any name (head()). Deletes dead tickets found ahead of it (expired
  // `purge_after` ago). Throws Error (69).
  [[nodiscard]] bool at_head();

  // Ticket `ticket` of lock `name` has left the line (a wake-up event: the lock it was taken with was
  // released): forgets it. True when it was one of those ahead of this waiter. No server command.
  bool passed(const std::string& name, const std::string& ticket);

  // True when no ticket is known ahead of this waiter on any name (as of the last at_head(), less those
  // passed() since). New tickets always join behind, so once true it stays true.
  [[nodiscard]] bool head() const;

  // This waiter's place in line (as head()): 1 at the head; on several names, the farthest back.
  [[nodiscard]] int position() const;

  // When (server time, UTC) the first ticket known ahead of this waiter expires unless it is renewed;
  // ServerTime::max() at the head. The waiter reads the queue again then, so a dead waiter ahead holds up
  // the queue no longer than its ticket lease plus one check.
  [[nodiscard]] ServerTime next_expiry() const;

  // The _id of this waiter's ticket of lock `name` ("" when it has none): recorded in the lock taken
  // from the queue (LockRecord::ticket).
  [[nodiscard]] std::string ticket_of(const std::string& name) const;

  // Deletes this waiter's tickets (one delete per name); failures are logged, never thrown.
  void leave() noexcept;

  [[nodiscard]] const QueueTiming& timing() const { return m_timing; }

private:
  LockStore& m_store;
  const Log& m_log;
  QueueTiming m_timing;
  std::vector<std::string> m_names;
  std::string m_process;
  std::vector<TicketRecord> m_tickets;
  LocalTime m_renewed{};
  // Per name: the live tickets ahead of this waiter (_id -> expires_at), as read and since passed.
  std::map<std::string, std::map<std::string, ServerTime>> m_ahead;
  bool m_read = false; // at_head() ran since joining
};

// The live tickets of `tickets` (expires_at > now), in line order, numbered 1.. per name: for status/list.
struct QueuedWaiter {
  int position = 0; // 1: next in line
  TicketRecord ticket;
};
[[nodiscard]] std::vector<QueuedWaiter> live_waiters(const std::vector<TicketRecord>& tickets, ServerTime now);

} // namespace mongolock
