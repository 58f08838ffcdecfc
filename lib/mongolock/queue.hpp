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
// waiter stopped between its last check and its insert can still take the lock out of turn, and so can
// one stopped for stale_after() just after it moved up among the first in line with a far waiter's long
// lease (those behind then skip its ticket as a dead waiter's: at_head()).
// The queue is fairness only. Mutual exclusion still comes from the unique index on the lock documents
// alone; two waiters that both believe they are head at once (a stale read) only race for the insert.
// Acquirers without --wait do not look at the queue and may take a free lock at the moment of a handover.
#pragma once

#include <mongolock/lock_store.hpp>
#include <mongolock/log.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mongolock {

// Timing of the queue: the ticket leases, and how often a waiter looks. What a waiter costs the server
// matters: on FerretDB v1 every find or update of the queue costs about 3 ms of its CPU, and a tailable
// cursor waiting for an event re-runs its query every 10 ms (4 to 9 % of a core per cursor).
// - The first `followers` in line follow the wake-up events while the line moves; per `push_check` one
//   getMore, one find (the head: of the lock; the next in line: of the queue, after a wait without an
//   event; otherwise every `push_recheck`), and a ticket renewal every 1.5 s (ticket_lease 4 s).
// - Once the line has not moved for `follow_idle` (a long job holds the lock), the head closes its cursor
//   and looks at the lock every `idle_poll` instead; the others hold no cursor either and look at the
//   queue every 2 x `idle_poll` per place behind the head (at most far_max); when the line moves again
//   the first in line follow the events again.
// - The waiters farther back hold no cursor: they read the queue every far_interval() (sooner the closer
//   they are and the faster the line moves) and
//   renew their tickets every 9 s with far_ticket_lease (24 s), and to the short lease as soon as they
//   move up among the first `followers`: so a ticket that keeps its long lease there is a dead waiter's,
//   and those behind skip it after WaitQueue::stale_after() (9.5 s) rather than the rest of its lease.
// In a line that stands still a waiter sends about 0.3 commands a second, the head about 1.7.
// Without push (--no-push) the first `followers` poll every `poll` instead.
struct QueueTiming {
  Millis ticket_lease{4000};      // a ticket not renewed for this long is dead (server clock); renewed every 1.5 s
  Millis far_ticket_lease{24000}; // ... the lease of a waiter behind the followers (renewed every 9 s)
  Millis poll{750};               // without push, the first in line check the queue (or, the head, the lock) this often
  Millis purge_after{2000};       // a dead ticket is deleted this long after its expiry
  // With push wake-ups (a tailable cursor on the events): each wait for an event lasts up to
  // `push_check` (one getMore). After a wait without an event the head checks the lock and the next in
  // line the queue (FerretDB v1 may lose an event at the end of a wait); others re-read the queue every
  // `push_recheck` and when the first ticket ahead expires (a dead waiter sends no event).
  Millis push_check{1500};
  Millis push_recheck{3000};
  int followers = 3;         // this many first in line follow the events while the line moves
  Millis follow_idle{10000}; // ... while the line moved within this long (else they look every idle_poll)
  Millis idle_poll{1000};    // ... else the head looks at the lock this often
  Millis far_step{250};      // farther back: read the queue every far_step per place behind the followers
  Millis far_max{6000};      // ... at most this long apart (and this often once the line stood still
                             //     for follow_idle)

  // How long past its last renewal (server clock) a far waiter's ticket counts as dead wherever it is in
  // line: a live far waiter renews every 3/8 of far_ticket_lease (9 s), plus push_check (its step) and
  // 2 x (purge_after / 2) (the renewal's answer limit, and slack) = 12.5 s.
  [[nodiscard]] Millis renewal_overdue() const { return far_ticket_lease * 3 / 8 + push_check + purge_after; }
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

  // Joins the back of the queue of every name in `names` with one seq, as waiter `process` ("host:pid");
  // with `front` (run --replace), the front instead: a seq below every ticket of these names and every
  // LockRecord::replace_seq of their holders (negative: is_replace()), so the newest replacing run is
  // first in line and passes a replacing run that holds. A rejoin keeps the side; at the front, when a newer
  // replacing run joined meanwhile, it inserts no ticket and is superseded() at once. With `keep` (at the back
  // only: a waiter whose tickets lapsed while the server could not be reached, unreachable()), tries that seq
  // first, its old place in line, and takes a new one at the back only when it is taken (the unique index on
  // name+seq decides; red team 7, F4: the waiters of one outage keep their order). Throws Error (69) on server
  // errors (tickets inserted so far are deleted again).
  void join(const std::vector<std::string>& names, const std::string& process, bool front = false,
            std::optional<std::int64_t> keep = std::nullopt);

  // The server could not be reached by this waiter's last calls (Waiter::pause_after): when keep_alive() then finds
  // the tickets lost, it joins again with their old seq (join()'s `keep`) instead of at the back. A renewal that
  // succeeds clears it.
  void unreachable() { m_unreachable = true; }

  // True when the last join took the old seq back (join()'s `keep`): waiters behind it may believe they are
  // first, so the Waiter tells them to read the queue again (a k_replace_event, as a replacing run does).
  [[nodiscard]] bool back_in_place() const { return m_back_in_place; }

  // True for the ticket of a replacing run (run --replace): its seq is negative (join()'s `front`).
  [[nodiscard]] static bool is_replace(const TicketRecord& ticket) { return ticket.seq < 0; }

  // A replacing run (joined at the front) that a newer replacing run has passed: a live ticket is ahead of
  // it on some name (as of the last at_head()). Always false for a waiter that joined at the back.
  [[nodiscard]] bool superseded() const { return m_front && (m_passed || !head()); }

  // The seq of this waiter's tickets (one for all its names); nullopt when it has none.
  [[nodiscard]] std::optional<std::int64_t> seq() const {
    return m_tickets.empty() ? std::nullopt : std::optional(m_tickets.front().seq);
  }

  // Renews the tickets to a lease of `lease` (ticket_lease near the head, far_ticket_lease farther back)
  // once renewal_due() has come (one update per name), each call cut when the tickets' lease runs out, at least
  // answer_limit() after it was sent (call_bound()): on a silent connection the next step tries again on a new one
  // while the wait lasts (red team 7, F4: renewals hung 10 s, the socket timeout, and every ticket lapsed).
  // When a ticket was lost (expired while this process stalled, or
  // deleted), or its renewal was answered more than answer_limit() after it was sent (it may have raced a delete of the
  // ticket as dead), rejoins at the back of the queue and returns false; so it does when it has no ticket because
  // its last join failed (a transient error it waited through). Throws Error (69) on server errors.
  bool keep_alive(Millis lease);

  // When (local time) the tickets are due for renewal: 3/8 of the lease they were last given after it
  // was sent (1.5 s of ticket_lease, 9 s of far_ticket_lease).
  [[nodiscard]] LocalTime renewal_due() const;

  // True while this waiter's tickets are certainly live on the server: the last renewal (or the join) was
  // sent less than its lease - answer_limit() ago. A woken head tries without renewing only then; a
  // ticket that may have expired could already be skipped by the waiter behind it.
  [[nodiscard]] bool ticket_live() const;

  // How long a ticket among the first `followers` may keep a far waiter's long lease before the waiters
  // behind it skip it as dead: far_max (the longest a live far waiter takes to see that it moved up) +
  // push_check (its next step, which renews) + 2 x answer_limit() (the renewal's answer, and slack) = 9.5 s.
  [[nodiscard]] Millis stale_after() const { return m_timing.far_max + m_timing.push_check + 2 * answer_limit(); }

  // Half of purge_after: a dead ticket is deleted only purge_after past its expiry (server clock), so a
  // renewal answered within this, with client clock estimates within it of each other, cannot have raced
  // that delete (the two filters, expires_at > sent and expires_at <= now - purge_after, cannot both
  // match the same ticket).
  [[nodiscard]] Millis answer_limit() const { return m_timing.purge_after / 2; }

  // QueueTiming::renewal_overdue() of this queue's timing (12.5 s by default).
  [[nodiscard]] Millis renewal_overdue() const { return m_timing.renewal_overdue(); }

  // Reads the queue of every joined name (one find) and remembers the live tickets ahead of this waiter;
  // true when there are none on any name (head()). Deletes dead tickets found ahead of it (expired
  // `purge_after` ago). Skips (without deleting) a ticket with a far waiter's long lease that is dead: it
  // has kept that lease, unrenewed, among the first `followers` in line for stale_after() of this waiter's
  // reads (a live one renews to the short lease once it moves up), or it is renewal_overdue() past its last
  // renewal. A skipped ticket takes no place in line: the one behind it moves up. But for the first read after a
  // join (the Waiter's start, which pauses after no error), the read is cut once the tickets' lease has less than
  // answer_limit() left (call_bound()), so that the renewal still has its chance. Throws Error (69).
  [[nodiscard]] bool at_head();

  // Ticket `ticket` of lock `name` has left the line (a wake-up event: the lock it was taken with was
  // released): forgets it. True when it was one of those ahead of this waiter. No server command.
  bool passed(const std::string& name, const std::string& ticket);

  // True when no ticket is known ahead of this waiter on any name (as of the last at_head(), less those
  // passed() since). New tickets always join behind, so once true it stays true.
  [[nodiscard]] bool head() const;

  // This waiter's place in line (as head()): 1 at the head; on several names, the farthest back.
  [[nodiscard]] int position() const;

  // When (server time, UTC) the first ticket known ahead of this waiter expires unless it is renewed, or,
  // for a ticket with a far waiter's long lease, is renewal_overdue() past its last renewal (at_head() then
  // skips it as dead); ServerTime::max() at the head. Every waiter, near or far, reads the queue again then,
  // so a dead waiter ahead holds up the queue no longer than its ticket lease (near) or renewal_overdue()
  // after its last renewal (far), plus one read.
  [[nodiscard]] ServerTime next_expiry() const;

  // The _id of this waiter's ticket of lock `name` ("" when it has none): recorded in the lock taken
  // from the queue (LockRecord::ticket).
  [[nodiscard]] std::string ticket_of(const std::string& name) const;

  // Deletes this waiter's tickets (one delete per name); failures are logged, never thrown.
  void leave() noexcept;

  [[nodiscard]] const QueueTiming& timing() const { return m_timing; }

  // The time limit of a ticket renewal (what is left of the tickets' lease) or of a queue read (`renewal` false:
  // that less answer_limit()), at least answer_limit(); LockStore::reconnect()'s CallLimits::total.
  [[nodiscard]] Millis call_bound(bool renewal) const;

private:
  // join()'s insert of one ticket per name with `seq` (`sent`: when, for the lease); false on a duplicate key (the
  // ones inserted are deleted again). Inserts nothing, and returns true, when superseded (m_passed).
  bool insert_tickets(const std::vector<std::string>& names, const std::string& process, std::int64_t seq,
                      LocalTime& sent);
  // Runs `call` with the store's calls cut at call_bound(renewal), and lifts the limit again after it.
  template <typename Call> auto bounded(bool renewal, const Call& call);
  LockStore& m_store;
  const Log& m_log;
  QueueTiming m_timing;
  std::vector<std::string> m_names;
  std::string m_process;
  std::vector<TicketRecord> m_tickets;
  LocalTime m_renewed{};
  Millis m_lease{0}; // the lease the tickets were last given (join: ticket_lease)
  // Per name: the live tickets ahead of this waiter (_id -> expires_at), as read and since passed.
  std::map<std::string, std::map<std::string, ServerTime>> m_ahead;
  // Tickets ahead that had a far waiter's long lease when read, with that expiry, and since when (local
  // time) this waiter has seen them so among the first `followers` in line (at_head()).
  struct StaleWatch {
    std::optional<LocalTime> front_since;
    ServerTime expires_at;
  };
  std::map<std::string, StaleWatch> m_stale;
  // True when at_head() skips `ticket` (at `place` in line, the skipped ones not counted) as a dead far
  // waiter's; records it in `watched`.
  [[nodiscard]] bool skip_as_dead(const TicketRecord& ticket, ServerTime now, LocalTime local, int place,
                                  std::map<std::string, StaleWatch>& watched) const;
  bool m_read = false;                    // at_head() ran since joining
  bool m_front = false;                   // joined at the front (run --replace)
  bool m_passed = false;                  // at the front, rejoined after a newer replacing run had joined: superseded()
  bool m_unreachable = false;             // unreachable() since the last renewal that succeeded
  std::optional<std::int64_t> m_last_seq; // the seq of the last join that inserted tickets
  bool m_back_in_place = false;           // back_in_place()
};

// The live tickets of `tickets` (expires_at > now), in line order, numbered 1.. per name: for status/list.
struct QueuedWaiter {
  int position = 0; // 1: next in line
  TicketRecord ticket;
};
[[nodiscard]] std::vector<QueuedWaiter> live_waiters(const std::vector<TicketRecord>& tickets, ServerTime now);

} // namespace mongolock
