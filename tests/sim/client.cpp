#include "client.hpp"

#include <mongolock/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace sim {

using mongolock::LockRecord;
using mongolock::LockSelector;

namespace {

std::string ms(Millis d) { return fmt::format("{} ms", d.count()); }

// GuardianDeadline's time: CLOCK_BOOTTIME (here: virtual) nanoseconds.
std::int64_t ns(LocalTime t) { return t.time_since_epoch().count(); }
std::int64_t ns(Millis d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); }

} // namespace

Client::Client(World& world, int id)
    : m_world(world), m_id(id), m_tag(fmt::format("c{}", id)), m_store(world, *this), m_locker(m_store, m_log) {
  m_wake_at = world.now() + world.rng().millis(Millis(0), world.config().timing.ttl);
}

void Client::kill() {
  (void)m_waiter.release(); // the process is gone: nothing deletes its tickets (they expire)
  (void)m_skipper.release();
  m_state = State::dead;
  m_died_at = std::min(m_died_at, m_world.now());
}

void Client::step() {
  try {
    switch (m_state) {
    case State::idle: {
      draw_wants();
      m_want_until = m_world.now() + m_world.config().timing.ttl * m_world.rng().range(1, 4);
      m_state = State::wanting;
      if (m_world.rng().chance(m_world.config().p_wait)) {
        mongolock::WaitPolicy policy{.wait = std::chrono::ceil<Millis>(m_want_until - m_world.now()),
                                     .push = m_world.config().push};
        if (m_world.config().plant == Plant::no_poll) {
          for (auto* d : {&policy.queue.poll, &policy.queue.push_check, &policy.queue.push_recheck,
                          &policy.queue.follow_idle, &policy.queue.idle_poll})
            *d = Millis(600'000);
        }
        m_waiter = std::make_unique<mongolock::Waiter>(m_locker, requests(), policy);
      }
      acquire();
      break;
    }
    case State::wanting:
      acquire();
      break;
    case State::holding:
      hold();
      break;
    case State::finishing:
      finish();
      break;
    case State::dead:
      break;
    }
  } catch (const Killed&) {
    m_world.note(fmt::format("{} died in a call", m_tag));
  }
}

// The names of this attempt: one of the world's names; in a schedule of several names per run (Config::multi),
// 2-3 of them in 2 attempts of 3, sorted as the CLI sorts them (all clients take them in one order).
void Client::draw_wants() {
  auto names = m_world.config().names; // sorted
  const int n = static_cast<int>(names.size());
  const int k = m_world.config().multi && m_world.rng().range(0, 2) > 0 ? m_world.rng().range(2, n) : 1;
  while (static_cast<int>(names.size()) > k)
    names.erase(names.begin() + m_world.rng().range(0, static_cast<int>(names.size()) - 1));
  m_wants = std::move(names);
}

// One AcquireRequest per wanted name, as `run` builds them.
std::vector<mongolock::AcquireRequest> Client::requests() const {
  const auto& config = m_world.config();
  std::vector<mongolock::AcquireRequest> requests;
  for (const auto& name : m_wants) {
    mongolock::AcquireRequest request;
    request.name = name;
    request.process = fmt::format("host{}:{}", m_id, 100 + m_id);
    request.user = "sim";
    request.ttl = config.timing.ttl;
    request.takeover_grace = config.plant == Plant::no_grace ? Millis(0) : config.grace;
    request.slots = config.slots.at(name);
    request.fence = config.fence;
    request.min_hold = config.min_hold;
    requests.push_back(std::move(request));
  }
  return requests;
}

std::string Client::wanted() const {
  std::string out;
  for (const auto& name : m_wants)
    out += fmt::format("{}'{}'", out.empty() ? "" : ", ", name);
  return out;
}

std::string Client::held() const {
  std::string out;
  for (const auto& lock : m_locks)
    out += fmt::format("{}'{}'", out.empty() ? "" : ", ", lock.program);
  return out;
}

// One step of the real Waiter; its pauses become this client's wake-up time (a wait for an event runs
// inside the step, as a getMore on virtual time).
void Client::wait_in_queue() {
  Millis pause{0};
  const auto sleeper = [&pause](Millis d) {
    pause = d;
    return true;
  };
  m_parked_until.reset();
  try {
    if (m_waiter->step(sleeper)) {
      m_wake_at = m_parked_until ? *m_parked_until : m_world.now() + pause;
      const bool head = m_waiter->state() == mongolock::Waiter::State::head;
      if (!head) m_head_since.reset();
      if (head && !m_head_since) m_head_since = m_world.now();
      return;
    }
  } catch (const mongolock::Error& e) {
    m_world.note(fmt::format("{} waiting for {}: error: {}; exits", m_tag, wanted(), e.what()));
    m_head_since.reset();
    m_waiter.reset(); // run exits 69; its tickets are deleted on the way out
    idle_for(m_world.rng().millis(Millis(0), m_world.config().timing.ttl));
    return;
  }
  m_head_since.reset();
  auto outcome = std::move(m_waiter->outcome());
  const auto state = m_waiter->state();
  m_waiter.reset();
  if (state != mongolock::Waiter::State::acquired) {
    m_world.note(fmt::format("{} waiting for {}: {}", m_tag, wanted(), mongolock::Waiter::state_name(state)));
    idle_for(m_world.rng().millis(Millis(0), m_world.config().timing.ttl));
    return;
  }
  m_world.note(fmt::format("{} took {} from the queue", m_tag, wanted()));
  start(std::move(outcome.locks));
  outcome.leave_queue(); // once the job started (run: after the handover)
}

// The planted bug: joins the queue like a waiter (its tickets and the taken locks' `ticket` look right),
// then takes the locks as soon as it finds them free, without looking at who waits ahead.
void Client::skip_queue() {
  try {
    auto rs = requests();
    if (!m_skipper) {
      m_skipper = std::make_unique<mongolock::WaitQueue>(m_store, m_log, mongolock::QueueTiming{});
      m_skipper->join(m_wants, rs.front().process);
    }
    (void)m_skipper->keep_alive(mongolock::QueueTiming{}.ticket_lease);
    for (auto& r : rs) {
      r.ticket = m_skipper->ticket_of(r.name);
      r.waiters = true;
    }
    auto outcome = m_locker.acquire_all(rs, mongolock::WaitPolicy{}, [](Millis) { return true; });
    if (!outcome.locks.empty()) {
      m_waiter.reset();
      start(std::move(outcome.locks));
      m_skipper.reset();
      return;
    }
  } catch (const mongolock::Error& e) {
    m_world.note(fmt::format("{} skipping the queue of {}: error: {}", m_tag, wanted(), e.what()));
  }
  if (m_world.now() >= m_want_until) {
    m_waiter.reset();
    m_skipper.reset();
    idle_for(m_world.rng().millis(Millis(0), m_world.config().timing.ttl));
    return;
  }
  m_wake_at = m_world.now() + m_world.rng().millis(Millis(50), Millis(500));
}

void Client::acquire() {
  if (m_waiter && m_world.config().plant == Plant::skip_queue) {
    skip_queue();
    return;
  }
  if (m_waiter) {
    wait_in_queue();
    return;
  }
  const auto& config = m_world.config();
  const auto started = m_world.now();
  try {
    auto outcome = config.plant == Plant::partial
                       ? acquire_partial()
                       : m_locker.acquire_all(requests(), mongolock::WaitPolicy{}, [](Millis) { return true; });
    if (!outcome.locks.empty()) {
      start(std::move(outcome.locks));
      return;
    }
    m_world.note(fmt::format("{} acquire {}: '{}' held", m_tag, wanted(), outcome.held));
    // All or none: the names before the busy one were taken and given back.
    if (outcome.held != m_wants.front()) m_world.count("all-or-none give-backs");
    m_world.attempt_held(*this, outcome.held, started);
    maybe_mark_waiters(outcome.holders);
  } catch (const mongolock::Error& e) {
    m_world.note(fmt::format("{} acquire {}: error: {}", m_tag, wanted(), e.what()));
  }
  if (m_world.now() >= m_want_until) {
    idle_for(m_world.rng().millis(Millis(0), config.timing.ttl));
    return;
  }
  m_wake_at = m_world.now() + m_world.rng().millis(Millis(100), Millis(1000)); // the caller's retry
}

// 0.2.0's head waiter: `$set {waiters: true}` on the holder's document (Plant::rollback only).
void Client::maybe_mark_waiters(const std::vector<LockRecord>& seen) {
  if (m_world.config().plant != Plant::rollback) return;
  for (const auto& holder : seen) {
    if (!m_world.rng().chance(0.5)) continue;
    try {
      m_store.mark_waiters(LockSelector{.program = holder.program, .id = holder.id});
    } catch (const mongolock::Error&) {}
  }
}

// The planted bug (Plant::partial): acquire_all that is not all-or-none: it takes the names in order and, when
// one is busy, keeps those it took and reports them acquired (the job then starts on all the run's names).
mongolock::AcquireOutcome Client::acquire_partial() {
  mongolock::AcquireOutcome outcome;
  for (const auto& request : requests()) {
    auto lock = m_locker.try_acquire(request, false, &outcome.holders);
    if (!lock) {
      outcome.held = request.name;
      break;
    }
    outcome.locks.push_back(std::move(*lock));
  }
  return outcome;
}

// Run::start(): the job starts only before the first acquisition's renew deadline (the earliest over the locks:
// lease_deadline()); past it the locks are released and nothing starts (exit 76).
void Client::start(std::vector<LockRecord> locks) {
  const auto& timing = m_world.config().timing;
  const auto now = m_world.now();
  for (const auto& lock : locks)
    m_world.acquired(lock);
  m_locks = std::move(locks);
  std::vector<LocalTime> sent;
  for (const auto& lock : m_locks)
    sent.push_back(lock.sent);
  if (m_world.config().plant == Plant::first_only) sent.resize(1); // the planted bug: the first lock only
  m_book.emplace(sent, timing);
  m_lost = false;
  m_state = State::finishing;
  m_run_names = m_wants;
  m_wants.clear();
  if (now >= m_book->deadline() && m_world.config().plant != Plant::late_spawn) {
    m_world.note(fmt::format("{} acquired {} past its renew deadline: releases, starts nothing", m_tag, held()));
    m_job = false;
    m_wake_at = now;
    return;
  }
  m_job = true;
  m_job_start = now;
  m_job_planned_end = now + m_world.rng().millis(timing.ttl / 4, timing.ttl * 3);
  // The guardian, armed with the first acquisition's deadline (run: on_lost term); it checks first
  // whenever it wakes.
  m_guardian.emplace(ns(m_book->deadline()), ns(timing.kill_grace));
  (void)m_guardian->check(ns(now));
  m_next_renewal = m_book->next_renewal();
  m_state = State::holding;
  m_world.count("jobs");
  if (m_run_names.size() > 1) m_world.count("jobs on several names");
  std::string what;
  for (const auto& lock : m_locks) {
    what += fmt::format("{}'{}' ({}{})", what.empty() ? "" : ", ", lock.program, lock.id,
                        lock.fence ? fmt::format(", fence {}", *lock.fence) : std::string());
  }
  m_world.note(fmt::format("{} acquired {}: job until {} (deadline {})", m_tag, what,
                           ms(std::chrono::duration_cast<Millis>(m_job_planned_end - now)),
                           ms(std::chrono::duration_cast<Millis>(m_book->deadline() - now))));
  for (const auto& lock : m_locks)
    m_world.job_started(lock);
  m_wake_at = std::min({m_next_renewal, m_job_planned_end, m_book->deadline()});
}

// The main loop (lease check first) and the heartbeat, one step.
void Client::hold() {
  const auto now = m_world.now();
  if (!m_lost && now >= m_book->deadline()) set_lost("the renew deadline passed");
  if (!m_lost && now >= m_job_planned_end) m_world.note(fmt::format("{} job on {} ended", m_tag, held()));
  if (m_lost || now >= m_job_planned_end) {
    m_state = State::finishing;
    m_wake_at = job_end();
    return;
  }
  if (now >= m_next_renewal) renew();
  if (m_state == State::holding) m_wake_at = std::min({m_next_renewal, m_job_planned_end, m_book->deadline()});
}

// Heartbeat's loop (supervisor.cpp), one pass on virtual time: renew_one() on every lock in turn; a lease
// gone (any lock's) ends it; when every renewal was confirmed, the guardian gets the run's deadline (the
// earliest over the locks) and the next pass comes at LeaseBook's next renewal, else a retry delay later.
void Client::renew() {
  const auto& timing = m_world.config().timing;
  bool all_renewed = true;
  for (std::size_t i = 0; i < m_book->size(); ++i) { // m_locks.size() (but Plant::first_only)
    const auto outcome = renew_one(i);
    if (outcome == Renewal::gone) return;
    all_renewed = all_renewed && outcome == Renewal::renewed;
  }
  const auto now = m_world.now();
  if (!all_renewed) {
    m_next_renewal = now + std::clamp(timing.renew_interval / 4, Millis(100), Millis(2000));
    return;
  }
  // The guardian woke at its deadline on its own (a fired watchdog stays fired), then gets the extension.
  (void)m_guardian->check(ns(now));
  m_guardian->extend(ns(m_book->deadline()));
  m_next_renewal = m_book->next_renewal();
  m_world.note(fmt::format("{} renewed {}: deadline in {}", m_tag, held(),
                           ms(std::chrono::duration_cast<Millis>(m_book->deadline() - now))));
}

// Heartbeat::renew_one() (supervisor.cpp) for lock i, on virtual time.
Client::Renewal Client::renew_one(std::size_t i) {
  const auto& timing = m_world.config().timing;
  auto& lock = m_locks[i];
  const auto deadline = m_book->deadline(i);
  const auto sent = m_world.now();
  if (sent >= deadline) {
    set_lost("too late to renew");
    return Renewal::gone;
  }
  const auto left = std::chrono::floor<Millis>(deadline - sent);
  const auto total = left + timing.kill_grace + Millis(500);
  try {
    m_store.reconnect(mongolock::CallLimits{left, total, m_book->server_bound(total)});
    if (!m_locker.renew(lock, timing.ttl, sent)) {
      set_lost(fmt::format("the lock document of '{}' is gone", lock.program));
      return Renewal::gone;
    }
    const auto received = m_world.now();
    if (received >= deadline) m_world.count("late replies");
    if (received >= deadline && m_world.config().plant != Plant::late_reply) {
      set_lost(fmt::format("the renewal of '{}' was answered after the renew deadline", lock.program));
      return Renewal::gone;
    }
    m_book->confirmed(i, sent, received);
    m_world.count("renewals");
    return Renewal::renewed;
  } catch (const mongolock::Error& e) {
    m_book->unknown(i, sent, m_book->server_bound(left + timing.kill_grace + Millis(500)));
    m_world.note(fmt::format("{} renewal of '{}' failed: {}", m_tag, lock.program, e.what()));
    return Renewal::failed;
  }
}

void Client::set_lost(const std::string& why) {
  m_lost = true;
  if (m_guardian) {
    const auto now = m_world.now();
    (void)m_guardian->check(ns(now));
    (void)m_guardian->stop(ns(now), ns(now + m_world.config().timing.kill_grace)); // Child::stop_job()
  }
  m_world.note(fmt::format("{} lost {}: {}; the job is stopped", m_tag, held(), why));
}

// After the job has ended (the guardian reaped it): release by _id + token, as run does.
void Client::finish() {
  if (m_job && m_world.now() < job_end()) {
    m_wake_at = job_end();
    return;
  }
  m_job = false;
  m_store.reconnect(std::nullopt);
  // release_after_run(): each lock in turn, a failure of one does not keep the others.
  for (std::size_t i = 0; i < m_locks.size(); ++i) {
    const auto& lock = m_locks[i];
    // The lease counts as valid (the release is sent before its deadline): a --min-hold must be kept.
    const bool valid = !m_lost && m_world.now() < (i < m_book->size() ? m_book->deadline(i) : m_book->deadline());
    try {
      const LockSelector which{.program = lock.program, .id = lock.id, .token = lock.token};
      mongolock::ReleaseOutcome result;
      if (m_world.config().plant == Plant::no_hold) {
        result.kind = m_locker.remove_and_wake(which) ? mongolock::ReleaseOutcome::released
                                                      : mongolock::ReleaseOutcome::not_holder;
      } else {
        result = m_locker.release(which);
      }
      m_world.note(fmt::format("{} released '{}': {}", m_tag, lock.program,
                               result.kind == mongolock::ReleaseOutcome::released   ? "deleted"
                               : result.kind == mongolock::ReleaseOutcome::min_hold ? "kept for its minimum hold"
                                                                                    : "not the holder"));
      if (valid) m_world.released(lock, result);
    } catch (const mongolock::Error& e) {
      m_world.note(fmt::format("{} could not release '{}': {}", m_tag, lock.program, e.what()));
    }
  }
  m_locks.clear();
  m_run_names.clear();
  m_book.reset();
  idle_for(m_world.rng().millis(Millis(0), m_world.config().timing.ttl * 2));
}

void Client::idle_for(Millis d) {
  m_state = State::idle;
  m_wants.clear();
  m_wake_at = m_world.now() + d;
}

LocalTime Client::guardian_kill_at() const {
  const auto next = LocalTime(std::chrono::nanoseconds(m_guardian->next_wakeup()));
  if (m_guardian->state() == mongolock::GuardianDeadline::State::stopping) return next;
  return next + m_world.config().timing.kill_grace; // it fires at the deadline, SIGKILL a kill grace later
}

LocalTime Client::job_end() const {
  if (!m_job) return m_job_start;
  return std::min({m_job_planned_end, m_died_at, std::max(guardian_kill_at(), m_job_start + Millis(1))});
}

std::optional<LocalTime> Client::head_since() const {
  if (!m_head_since || !m_waiter || dead()) return std::nullopt;
  if (m_busy && m_world.now() > m_wait_end) return std::nullopt; // held up in a call by others' calls
  return std::max({*m_head_since, m_paused_until, m_overran_at});
}

bool Client::job_running() const { return m_job && m_world.now() < job_end(); }

bool Client::believes() const { return m_state == State::holding && !m_lost && m_world.now() < m_book->deadline(); }

} // namespace sim
