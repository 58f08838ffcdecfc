#include <mongolock/error.hpp>
#include <mongolock/heartbeat.hpp>
#include <mongolock/queue.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace mongolock {

namespace {

using Clock = LeaseClock;

// How long before the first renewal the server-time probe is due, at most (half the renew interval when that is
// shorter): late enough that a short run never sends it, early enough to end before the renewal.
constexpr Millis k_probe_lead{500};

std::vector<LocalTime> sent_times(const std::vector<LockRecord>& locks) {
  std::vector<LocalTime> sent;
  for (const auto& lock : locks)
    sent.push_back(lock.sent);
  return sent;
}

} // namespace

HeartbeatSteps::HeartbeatSteps(Locker& locker, std::vector<LockRecord>& locks, const LeaseTiming& timing,
                               const Log& log, std::function<void(LocalTime)> renewed,
                               std::optional<Millis> replace_check, std::function<void()> notify)
    : m_locker(locker), m_locks(locks), m_timing(timing), m_log(log), m_renewed(std::move(renewed)),
      m_replace_check(replace_check), m_notify(std::move(notify)), m_book(sent_times(locks), timing),
      m_next(m_book.next_renewal()), m_check_at(m_replace_check ? Clock::now() + *m_replace_check : LocalTime::max()),
      m_probe_at(locks.empty() || !locker.store().server_time_undecided()
                     ? LocalTime::max()
                     : m_next - std::min<Millis>(k_probe_lead, m_timing.renew_interval / 2)) {}

LocalTime HeartbeatSteps::deadline() const {
  std::lock_guard lock(m_mutex);
  return m_book.deadline();
}

LocalTime HeartbeatSteps::deadline(std::size_t i) const {
  std::lock_guard lock(m_mutex);
  return m_book.deadline(i);
}

std::string HeartbeatSteps::last_error() const {
  std::lock_guard lock(m_mutex);
  return m_last_error;
}

std::string HeartbeatSteps::gone() const {
  std::lock_guard lock(m_mutex);
  return m_gone;
}

std::string HeartbeatSteps::replaced() const {
  std::lock_guard lock(m_mutex);
  return m_replaced_by;
}

void HeartbeatSteps::give_up() {
  std::lock_guard lock(m_mutex);
  m_stop = true;
}

bool HeartbeatSteps::step() {
  const auto retry_delay = std::clamp(m_timing.renew_interval / 4, Millis(100), Millis(2000));
  {
    std::lock_guard lock(m_mutex);
    if (m_stop) return false;
  }
  if (Clock::now() < m_next) { // the probe or the replace check is due, not a renewal
    if (Clock::now() >= m_probe_at) probe_server_time(m_next);
    if (Clock::now() >= m_check_at) {
      check_replace(m_next);
      m_check_at = Clock::now() + *m_replace_check;
    }
    return true;
  }
  m_probe_at = LocalTime::max(); // passed: the first renewal decides the condition, as without a probe
  bool all_renewed = true;
  const auto round_sent = Clock::now();
  for (std::size_t i = 0; i < m_locks.size(); ++i) {
    const auto outcome = renew_one(i);
    if (outcome == Renewal::gone) return false;
    all_renewed = all_renewed && outcome == Renewal::renewed;
  }
  LocalTime deadline;
  {
    std::lock_guard lock(m_mutex);
    // A failed round is retried retry_delay after it was sent: at once after a call that was abandoned
    // for time (LeaseBook::call_bound left room for this attempt), later after an error answer.
    m_next = all_renewed ? m_book.next_renewal() : std::max(Clock::now(), round_sent + retry_delay);
    deadline = m_book.deadline();
  }
  if (all_renewed && m_renewed) m_renewed(deadline);
  if (all_renewed) mark_if_waited(m_next); // m_next: written by this thread only
  return true;
}

// After a renewal, while a lock is not marked `waiters`: read the queue and mark it ourselves when
// someone waits (Locker::mark_if_waited). Waiters never write the holder's document, so this thread
// is the only writer of it while the command runs (the main thread writes before and after). A failure
// only delays a waiter's wake-up (it polls); the next renewal gets a fresh connection.
// Its own bound (issue 27): half the renew interval, and done before the renewal due at `next`; never
// the renewal's call limits, whose few ms left after a slow renewal let a reconnect inside the read
// escape them (integration.faults_network "1 s latency", docs/testing.md). Skipped below 100 ms, and below
// the round trip the clock measured at this renewal's hello: such a read is cut before its reply can come,
// and a cut read costs the connection (the next renewal would pay a new one's handshake: red team 5, F2).
void HeartbeatSteps::mark_if_waited(LocalTime next) {
  const auto budget = std::min(std::chrono::floor<Millis>(next - Clock::now()), m_timing.renew_interval / 2);
  if (budget < Millis(100)) {
    m_log.debugf("queue of waiters not read: {} left before the next renewal", format_duration(budget));
    return;
  }
  if (const auto round_trip = m_locker.store().clock().round_trip(); budget < round_trip) {
    m_log.debugf("queue of waiters not read: {} left before the next renewal, less than a round trip ({})",
                 format_duration(budget), format_duration(round_trip));
    return;
  }
  try {
    m_locker.store().reconnect(CallLimits{budget, budget, std::nullopt, false}); // the renewal's clock
    (void)m_locker.mark_if_waited(m_locks);
  } catch (const Error& e) {
    m_log.debugf("could not read the queue of waiters: {}", e.what());
  }
}

// run --replace: reads the queue of the run's names (one find, bounded to finish before the renewal due
// at `next`, at most 1 s); a live ticket of a replacing run other than this run's own: replaced(), unless this
// run took the lock as a replacing run that joined after it (LockRecord::replace_seq: an older replacing
// run that missed being passed finds itself superseded when it reads this lock). Errors only
// delay it to the next check.
// This run's own ticket, by its _id (LockRecord::ticket: the ticket a lock was taken with, deleted after
// the start). Never by `process`: "host:pid" is not unique (containers that share a host name, mongolock
// PID 1 in each: both "vm:1"; issue 26 item 7).
bool HeartbeatSteps::own_ticket(const TicketRecord& ticket) const {
  return std::any_of(m_locks.begin(), m_locks.end(),
                     [&](const LockRecord& lock) { return !lock.ticket.empty() && lock.ticket == ticket.id; });
}

void HeartbeatSteps::check_replace(LocalTime next) {
  {
    std::lock_guard lock(m_mutex);
    if (!m_replaced_by.empty()) return;
  }
  // Never a budget of ~0 (issue 27): below 100 ms the check waits for the next one.
  const auto budget = std::min(std::chrono::floor<Millis>(next - Clock::now()), Millis(1000));
  if (budget < Millis(100)) return;
  try {
    auto& store = m_locker.store();
    store.reconnect(CallLimits{budget, budget});
    std::vector<std::string> names;
    for (const auto& lock : m_locks)
      if (std::find(names.begin(), names.end(), lock.name) == names.end()) names.push_back(lock.name);
    const auto now = store.clock().earliest_now();
    const auto own = m_locks.front().replace_seq; // taken as a replacing run: only a newer one (lower) counts
    for (const auto& ticket : store.tickets(names)) {
      if (!WaitQueue::is_replace(ticket) || ticket.expires_at <= now || own_ticket(ticket) ||
          (own && ticket.seq >= *own)) {
        continue;
      }
      {
        std::lock_guard lock(m_mutex);
        m_replaced_by = ticket.process;
      }
      if (m_notify) m_notify();
      return;
    }
  } catch (const Error& e) {
    m_log.debugf("could not read the queue for a replacing run: {}", e.what());
  }
}

// Once, before the first renewal (store::ServerTimeCondition): on FerretDB v1 the renewals' server-time condition
// is refused once per process, and that refusal's round trip, paid inside the first renewal's deadline, lost a
// lease with no fault at the edge timings (the simulator's seed 4824 of --semantics ferretdb --edge). Bounded as
// the queue read (mark_if_waited): done before the renewal, skipped below 100 ms or a round trip. A read of the
// first lock's document by _id and token (renew_filter() adds "not released" and the condition); nothing to pin
// (nothing is written).
void HeartbeatSteps::probe_server_time(LocalTime next) {
  m_probe_at = LocalTime::max();
  const auto budget = std::min(std::chrono::floor<Millis>(next - Clock::now()), Millis(1000));
  if (budget < Millis(100)) return;
  auto& store = m_locker.store();
  try {
    if (budget < store.clock().round_trip()) return;
    store.reconnect(CallLimits{budget, budget, std::nullopt, false});
    const auto& lock = m_locks.front();
    store.probe_server_time(LockSelector{.program = lock.program, .id = lock.id, .token = lock.token});
  } catch (const Error& e) {
    m_log.debugf("could not read whether the server has the renewals' server-time condition: {}", e.what());
  }
}

HeartbeatSteps::Renewal HeartbeatSteps::renew_one(std::size_t i) {
  LocalTime deadline;
  {
    std::lock_guard lock(m_mutex);
    if (m_stop) return Renewal::gone;
    deadline = m_book.deadline(i);
  }
  auto& lease = m_locks[i];
  const auto sent = Clock::now();
  if (sent >= deadline) return Renewal::gone; // too late: the lease is lost
  const auto left = std::chrono::floor<Millis>(deadline - sent);
  const auto total = m_book.call_bound(left);
  const auto writes_before = m_locker.store().writes_sent();
  try {
    // The run's connection while it answers; a new one after a failed call, so that a server that failed
    // a check is tried again at once (libmongoc's single-threaded client would wait 5s). A connect must be
    // done by the deadline; the call may end a little later (its reply then does not count), so that a
    // slow server is given the time there is, while the thread still ends within the kill grace + 0.5s
    // of the deadline and mongolock exits soon after its job (ARCHITECTURE.md, "Faults").
    // The call is abandoned in time for one more attempt on a new connection before the deadline
    // (LeaseBook::call_bound): a primary that went silent without a reset hangs it (issue 27).
    m_locker.store().reconnect(CallLimits{left, total, m_book.server_bound(total)});
    if (!m_locker.renew(lease, m_timing.ttl, sent)) {
      report_gone(fmt::format("the lock document of '{}' is gone (expired and taken over, or broken with "
                              "'mongolock break')",
                              lease.program));
      return Renewal::gone;
    }
    // The deadline first: a reply that arrives after it does not count, however it reads (the job is
    // being stopped; mongolock may have been stopped while the reply waited).
    const auto received = Clock::now();
    if (received >= deadline) {
      m_log.warning(fmt::format("lease renewal of '{}' answered after {}, past the renew deadline; it does not count",
                                lease.program, format_duration(std::chrono::duration_cast<Millis>(received - sent))));
      return Renewal::gone;
    }
    std::lock_guard lock(m_mutex);
    m_last_error.clear();
    confirmed(i, sent, received);
    m_log.debugf("lease on '{}' renewed until {}", lease.program, format_time(lease.expires_at));
    return Renewal::renewed;
  } catch (const Error& e) {
    bool stopping = false;
    bool late = false;
    // Nothing of the renewal reached a connection (its clock hello, server selection or connect failed):
    // no copy of it can land later, so the lease is not pinned to it (red team 6 F4: at --ttl 3s a connection
    // reset between renewals cost the lease although nothing was sent). Anything else may have been sent.
    // Nor is a renewal the server refused, every copy of it answered with an error (Error::refused(): red team
    // 7 F6, refused for its server-time condition and again without it): nothing of it was applied.
    const auto writes_after = m_locker.store().writes_sent();
    const bool unsent = writes_before && writes_after && *writes_before == *writes_after;
    const bool refused = e.refused();
    {
      std::lock_guard lock(m_mutex);
      m_last_error = e.what();
      if (!unsent && !refused) m_book.unknown(i, sent, m_book.server_bound(total));
      stopping = m_stop;
      late = Clock::now() >= deadline;
    }
    if (unsent) {
      m_log.debugf("lease renewal of '{}' was not sent: it failed before its write had a connection; the lease "
                   "counts on from its last confirmed renewal",
                   lease.program);
    } else if (refused) {
      m_log.debugf("lease renewal of '{}' was refused by the server: nothing of it was applied; the lease counts on "
                   "from its last confirmed renewal",
                   lease.program);
    }
    if (stopping || late) {
      // The run is ending (given up: the job ended, or the lease was lost) or the lease is lost: no
      // "retrying" after "lease lost" (issue 27), and the reason as it is (red team 5, F3).
      m_log.debugf("lease renewal of '{}' failed {}: {}", lease.program,
                   stopping ? "while the run was ending" : "past the renew deadline", e.what());
      return Renewal::gone;
    }
    m_log.warning(fmt::format("lease renewal of '{}' failed, retrying: {}", lease.program, e.what()));
    return Renewal::failed;
  }
}

// Lock i's renewal sent at `sent` was confirmed at `received` (under m_mutex): the first confirmation
// after unknown renewals starts their clearing time; one sent after it lifts the pin.
void HeartbeatSteps::confirmed(std::size_t i, LocalTime sent, LocalTime received) {
  const auto state = m_book.state(i);
  const auto result = m_book.confirmed(i, sent, received);
  if (result == LeaseBook::Confirmed::clearing && state == LeaseBook::State::pinned) {
    m_log.debugf("lease on '{}' counts from {} ago until a renewal after {} is confirmed (an earlier renewal's "
                 "outcome is unknown)",
                 m_locks[i].program, format_duration(std::chrono::duration_cast<Millis>(received - m_book.basis(i))),
                 format_duration(std::chrono::duration_cast<Millis>(*m_book.clear_after(i) - received)));
  } else if (result == LeaseBook::Confirmed::lifted) {
    m_log.debugf("lease on '{}': the renewal whose outcome was unknown can no longer be written", m_locks[i].program);
  }
}

void HeartbeatSteps::report_gone(const std::string& reason) {
  {
    std::lock_guard lock(m_mutex);
    m_gone = reason;
  }
  if (m_notify) m_notify();
}

} // namespace mongolock
