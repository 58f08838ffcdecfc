// The heartbeat of `run`, as steps: renews the leases of all locks of a run (LeaseBook decides when and
// what counts), reads the queue for a replacing run (run --replace) and marks a lock waited for. No thread
// and no clock of its own: time from LeaseClock::now() (a TimeSource in tests and the simulator), the
// server through the Locker's LockStore. Supervisor's heartbeat thread calls step() at next_wakeup(); the
// simulator (tests/sim) calls the same steps on virtual time.
#pragma once

#include <mongolock/lease.hpp>
#include <mongolock/lease_book.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/log.hpp>

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace mongolock {

// Renews the leases of all locks of a run, one wake-up per step(). A lock's lease counts as held until
// renew_deadline after the send time of its last successful renewal; it never sends a renewal past that
// deadline, and it accepts a reply only if it arrived before that deadline (by then the job is being
// stopped, and a later reply may describe a write the server applied after another holder had taken over).
// Every renewal call is bounded by LeaseBook::call_bound (abandoned in time for one more attempt before the
// deadline; the last attempt gets the deadline plus the kill grace + 0.5s), on the run's connection while
// it answers and on a new one after a failure, so the heartbeat never outlives the job by much, and a
// failed or silent server is tried again at once (issue 27). An abandoned renewal pins the lease as any
// renewal whose outcome is unknown; a late landing of it cannot shorten the lease (ARCHITECTURE.md).
// The lease decisions (deadline, next renewal, a renewal whose outcome is unknown pinning the lease) are
// LeaseBook's; this class sends the renewals and feeds it their outcomes.
// After each successful renewal of all locks, `renewed` gets the new deadline (the guardian's watchdog).
// `notify` is called (from step()) when gone() or replaced() became non-empty. The accessors and
// give_up() may be called from another thread than step() (under an internal mutex).
class HeartbeatSteps {
public:
  // `locks`: the run's locks, renewed in place (must outlive this). `replace_check`: run --replace, read the
  // queue this often between renewals (replaced()); nullopt: never. Never throws.
  HeartbeatSteps(Locker& locker, std::vector<LockRecord>& locks, const LeaseTiming& timing, const Log& log,
                 std::function<void(LocalTime)> renewed, std::optional<Millis> replace_check = std::nullopt,
                 std::function<void()> notify = {});

  // When step() is due next (LeaseClock): the next renewal, or the next replace check or the server-time probe
  // if earlier.
  [[nodiscard]] LocalTime next_wakeup() const { return std::min({m_next, m_check_at, m_probe_at}); }

  // One wake-up at LeaseClock::now() (at or after next_wakeup()): before the renewal is due, the server-time
  // probe and the replace check when they are due, else a renewal of every lock in turn (then the `renewed`
  // callback and Locker::mark_if_waited). The probe (LockStore::probe_server_time) is due once, before the first
  // renewal by min(500 ms, renew interval / 2), while the store has the server-time condition undecided
  // (LockStore::server_time_undecided() at construction), so that a run that ends before then sends nothing for
  // it (scripts/bench: `run -- true` sends 5 commands). Returns false
  // when the heartbeat has ended: given up, a lease gone (gone() says why when the lock was found gone), too
  // late to renew, or a reply after the deadline (deadline() has then passed). Store errors are caught (a
  // failed renewal is retried after a quarter of the renew interval, 100 ms..2 s).
  bool step();

  // When the lease counts as lost unless a renewal succeeds first: the earliest over all locks.
  [[nodiscard]] LocalTime deadline() const;
  // Lock i's own deadline (i < the number of locks).
  [[nodiscard]] LocalTime deadline(std::size_t i) const;
  // The last renewal error, for messages ("" when none failed since the last success).
  [[nodiscard]] std::string last_error() const;
  // Non-empty once a renewal found a lease gone: the reason.
  [[nodiscard]] std::string gone() const;
  // Non-empty once a replacing run waits for one of the names (run --replace): its "host:pid".
  [[nodiscard]] std::string replaced() const;
  // Stops renewing (the lease is lost or the command ended): no renewal is sent after this.
  void give_up();

private:
  enum class Renewal { renewed, failed, gone };
  // Reads the queue after a renewal, bounded on its own to end before `next` (the next renewal).
  void mark_if_waited(LocalTime next);
  // Whether `ticket` is this run's own (by _id, never by `process`: issue 26 item 7).
  [[nodiscard]] bool own_ticket(const TicketRecord& ticket) const;
  void check_replace(LocalTime next);
  // The server-time probe, bounded on its own to end before `next` (the first renewal); errors only leave the
  // condition to the first renewal.
  void probe_server_time(LocalTime next);
  Renewal renew_one(std::size_t i);
  void confirmed(std::size_t i, LocalTime sent, LocalTime received);
  void report_gone(const std::string& reason);

  Locker& m_locker;
  std::vector<LockRecord>& m_locks;
  const LeaseTiming m_timing;
  const Log& m_log;
  std::function<void(LocalTime)> m_renewed;
  const std::optional<Millis> m_replace_check;
  std::function<void()> m_notify;
  mutable std::mutex m_mutex;
  bool m_stop = false;       // under m_mutex
  std::string m_last_error;  // its error
  std::string m_gone;        // under m_mutex
  std::string m_replaced_by; // under m_mutex
  LeaseBook m_book;          // under m_mutex
  LocalTime m_next;          // the next renewal (step()'s thread only)
  LocalTime m_check_at;      // the next replace check (step()'s thread only)
  LocalTime m_probe_at;      // the server-time probe; max() once done or passed (step()'s thread only)
};

} // namespace mongolock
