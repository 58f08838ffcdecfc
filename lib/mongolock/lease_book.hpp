// The heartbeat's lease decisions for the locks of one run, on this host's clock (LocalTime), without
// threads, a store or a clock of its own: when the lease counts as lost, when to renew next, and what a
// renewal's outcome does to that. Supervisor's heartbeat feeds it; unit tests drive it directly.
#pragma once

#include <mongolock/clock.hpp>
#include <mongolock/lease.hpp>

#include <cstddef>
#include <optional>
#include <vector>

namespace mongolock {

// One lock's lease as the holder counts it. A lease counts as held until renew_deadline after its basis:
// the send time of its last confirmed renewal (or insert), or an earlier renewal whose outcome is unknown.
// Rule (ARCHITECTURE.md, "Who writes a lock document"): a renewal whose outcome is unknown (an error or
// timeout: the server may have applied it, or may still be working on it) pins the lease to its send time,
// as if it were the last renewal the document will hold (on a server whose updates read, then write back
// by _id, it could write its older expiry after a newer renewal). It can no longer be written once a later
// renewal has been confirmed and the unknown one's server bound (maxTimeMS) + 1 s has passed since that
// confirmation; the first renewal sent after that, once confirmed, lifts the pin.
class LeaseBook {
public:
  // Per lock: held (counts from its last confirmed renewal), pinned (an unknown renewal, no confirmation
  // since), clearing (confirmed since; the pin holds until a renewal sent after clear_after() is confirmed).
  enum class State { held, pinned, clearing };

  // What a confirmation did: counted (no pin), clearing (started the pin's clearing time), lifted.
  enum class Confirmed { counted, clearing, lifted };

  // `sent`: per lock, when its insert (or last renewal) was sent. Never throws.
  LeaseBook(const std::vector<LocalTime>& sent, const LeaseTiming& timing);

  [[nodiscard]] std::size_t size() const { return m_locks.size(); }
  [[nodiscard]] State state(std::size_t i) const;
  // Where lock i's lease counts from: its last confirmed renewal's send time, or an earlier pinned one.
  [[nodiscard]] LocalTime basis(std::size_t i) const;
  // When lock i's lease counts as lost unless a renewal is confirmed first: basis + renew_deadline.
  [[nodiscard]] LocalTime deadline(std::size_t i) const { return basis(i) + m_timing.renew_deadline; }
  // The earliest deadline over all locks: the run's lease deadline.
  [[nodiscard]] LocalTime deadline() const;
  // When to renew next: renew_interval after the oldest confirmed renewal, or as soon as a pin may lift.
  [[nodiscard]] LocalTime next_renewal() const;
  // When a clearing pin of lock i lifts at the earliest (a renewal sent then or later lifts it).
  [[nodiscard]] std::optional<LocalTime> clear_after(std::size_t i) const { return m_locks[i].clear_after; }

  // The server's bound (maxTimeMS) for a renewal whose call may take `total`: a quarter of the renew
  // interval, at least 1 s (a healthy server answers in milliseconds), at most `total` (at least 1 ms).
  [[nodiscard]] Millis server_bound(Millis total) const;

  // How long a renewal call sent `left` before its lock's deadline may take (issue 27): a call that
  // hangs (a primary gone silent, no reset) is abandoned `reserve` before the deadline, reserve =
  // renew_interval / 8 (at least 100 ms), so that one more attempt on a new connection (server selection
  // included) fits before it: left - reserve. When less than 2 * reserve is left this is the last
  // attempt: it gets left + kill_grace + 500 ms (its reply then does not count, but a slow server is
  // given the time there is while the heartbeat still ends soon after the job is stopped). The abandoned
  // request may land later: it is an unknown renewal (unknown()), safe by the rule above and
  // Locker::renew's stamps (ARCHITECTURE.md, "An abandoned renewal").
  [[nodiscard]] Millis call_bound(Millis left) const;
  // The reserve call_bound() keeps for the next attempt.
  [[nodiscard]] Millis retry_reserve() const;

  // Lock i's renewal sent at `sent` was confirmed at `received` (before its deadline: the caller checks).
  Confirmed confirmed(std::size_t i, LocalTime sent, LocalTime received);
  // Lock i's renewal sent at `sent`, bounded on the server by `bound`, has an unknown outcome: pins lock i.
  void unknown(std::size_t i, LocalTime sent, Millis bound);

private:
  struct Lock {
    LocalTime confirmed;                  // send time of the last confirmed renewal (or the insert)
    std::optional<LocalTime> pinned;      // the earliest unknown renewal's send time, while pinned
    Millis bound{0};                      // the longest server bound among the unknown renewals
    std::optional<LocalTime> clear_after; // set at the first confirmation after them: + bound + 1 s
  };
  std::vector<Lock> m_locks;
  LeaseTiming m_timing;
};

} // namespace mongolock
