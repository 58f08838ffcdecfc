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
      const auto& names = m_world.config().names;
      m_want = names[static_cast<std::size_t>(m_world.rng().range(0, static_cast<int>(names.size()) - 1))];
      m_slots = m_world.config().slots.at(m_want);
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
        m_waiter = std::make_unique<mongolock::Waiter>(m_locker, std::vector{request()}, policy);
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

mongolock::AcquireRequest Client::request() const {
  const auto& config = m_world.config();
  mongolock::AcquireRequest request;
  request.name = m_want;
  request.process = fmt::format("host{}:{}", m_id, 100 + m_id);
  request.user = "sim";
  request.ttl = config.timing.ttl;
  request.takeover_grace = config.plant == Plant::no_grace ? Millis(0) : config.grace;
  request.slots = m_slots;
  request.fence = config.fence;
  request.min_hold = config.min_hold;
  return request;
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
    m_world.note(fmt::format("{} waiting for '{}': error: {}; exits", m_tag, m_want, e.what()));
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
    m_world.note(fmt::format("{} waiting for '{}': {}", m_tag, m_want, mongolock::Waiter::state_name(state)));
    idle_for(m_world.rng().millis(Millis(0), m_world.config().timing.ttl));
    return;
  }
  m_world.note(fmt::format("{} took '{}' from the queue", m_tag, m_want));
  start(outcome.locks.front());
  outcome.leave_queue(); // once the job started (run: after the handover)
}

// The planted bug: joins the queue like a waiter (its ticket and the taken lock's `ticket` look right),
// then takes the lock as soon as it finds it free, without looking at who waits ahead.
void Client::skip_queue() {
  try {
    if (!m_skipper) {
      m_skipper = std::make_unique<mongolock::WaitQueue>(m_store, m_log, mongolock::QueueTiming{});
      m_skipper->join({m_want}, request().process);
    }
    (void)m_skipper->keep_alive(mongolock::QueueTiming{}.ticket_lease);
    auto r = request();
    r.ticket = m_skipper->ticket_of(m_want);
    r.waiters = true;
    if (auto lock = m_locker.try_acquire(r, false)) {
      m_waiter.reset();
      start(std::move(*lock));
      m_skipper.reset();
      return;
    }
  } catch (const mongolock::Error& e) {
    m_world.note(fmt::format("{} skipping the queue of '{}': error: {}", m_tag, m_want, e.what()));
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
  const auto request = this->request();
  std::vector<LockRecord> seen;
  const auto started = m_world.now();
  try {
    auto lock = m_locker.try_acquire(request, false, &seen);
    if (lock) {
      start(std::move(*lock));
      return;
    }
    m_world.note(fmt::format("{} acquire '{}': held", m_tag, m_want));
    m_world.attempt_held(*this, m_want, started);
    maybe_mark_waiters(seen);
  } catch (const mongolock::Error& e) {
    m_world.note(fmt::format("{} acquire '{}': error: {}", m_tag, m_want, e.what()));
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

// Run::start(): the job starts only before the first acquisition's renew deadline; past it the lock is
// released and nothing starts (exit 76).
void Client::start(LockRecord lock) {
  const auto& timing = m_world.config().timing;
  const auto now = m_world.now();
  m_world.acquired(lock);
  m_lock = std::move(lock);
  m_book.emplace(std::vector<LocalTime>{m_lock->sent}, timing);
  m_lost = false;
  m_state = State::finishing;
  m_want.clear();
  if (now >= m_book->deadline() && m_world.config().plant != Plant::late_spawn) {
    m_world.note(fmt::format("{} acquired '{}' ({}) past its renew deadline: releases, starts nothing", m_tag,
                             m_lock->program, m_lock->id));
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
  m_world.note(fmt::format("{} acquired '{}' ({}{}): job until {} (deadline {})", m_tag, m_lock->program, m_lock->id,
                           m_lock->fence ? fmt::format(", fence {}", *m_lock->fence) : std::string(),
                           ms(std::chrono::duration_cast<Millis>(m_job_planned_end - now)),
                           ms(std::chrono::duration_cast<Millis>(m_book->deadline() - now))));
  m_world.job_started(*m_lock);
  m_wake_at = std::min({m_next_renewal, m_job_planned_end, m_book->deadline()});
}

// The main loop (lease check first) and the heartbeat, one step.
void Client::hold() {
  const auto now = m_world.now();
  if (!m_lost && now >= m_book->deadline()) set_lost("the renew deadline passed");
  if (!m_lost && now >= m_job_planned_end) m_world.note(fmt::format("{} job on '{}' ended", m_tag, m_lock->program));
  if (m_lost || now >= m_job_planned_end) {
    m_state = State::finishing;
    m_wake_at = job_end();
    return;
  }
  if (now >= m_next_renewal) renew();
  if (m_state == State::holding) m_wake_at = std::min({m_next_renewal, m_job_planned_end, m_book->deadline()});
}

// Heartbeat::renew_one() (supervisor.cpp) for one lock, on virtual time.
void Client::renew() {
  const auto& timing = m_world.config().timing;
  const auto deadline = m_book->deadline(0);
  const auto sent = m_world.now();
  if (sent >= deadline) {
    set_lost("too late to renew");
    return;
  }
  const auto left = std::chrono::floor<Millis>(deadline - sent);
  const auto total = left + timing.kill_grace + Millis(500);
  try {
    m_store.reconnect(mongolock::CallLimits{left, total, m_book->server_bound(total)});
    if (!m_locker.renew(*m_lock, timing.ttl, sent)) {
      set_lost("the lock document is gone");
      return;
    }
    const auto received = m_world.now();
    if (received >= deadline) m_world.count("late replies");
    if (received >= deadline && m_world.config().plant != Plant::late_reply) {
      set_lost("the renewal was answered after the renew deadline");
      return;
    }
    m_book->confirmed(0, sent, received);
    // The guardian woke at its deadline on its own (a fired watchdog stays fired), then gets the extension.
    (void)m_guardian->check(ns(received));
    m_guardian->extend(ns(m_book->deadline()));
    m_next_renewal = m_book->next_renewal();
    m_world.count("renewals");
    m_world.note(fmt::format("{} renewed '{}': deadline in {}", m_tag, m_lock->program,
                             ms(std::chrono::duration_cast<Millis>(m_book->deadline() - received))));
  } catch (const mongolock::Error& e) {
    m_book->unknown(0, sent, m_book->server_bound(left + timing.kill_grace + Millis(500)));
    m_next_renewal = m_world.now() + std::clamp(timing.renew_interval / 4, Millis(100), Millis(2000));
    m_world.note(fmt::format("{} renewal of '{}' failed: {}", m_tag, m_lock->program, e.what()));
  }
}

void Client::set_lost(const char* why) {
  m_lost = true;
  if (m_guardian) {
    const auto now = m_world.now();
    (void)m_guardian->check(ns(now));
    (void)m_guardian->stop(ns(now), ns(now + m_world.config().timing.kill_grace)); // Child::stop_job()
  }
  m_world.note(fmt::format("{} lost '{}': {}; the job is stopped", m_tag, m_lock->program, why));
}

// After the job has ended (the guardian reaped it): release by _id + token, as run does.
void Client::finish() {
  if (m_job && m_world.now() < job_end()) {
    m_wake_at = job_end();
    return;
  }
  m_job = false;
  m_store.reconnect(std::nullopt);
  const auto program = m_lock->program;
  // The lease counts as valid (the release is sent before its deadline): a --min-hold must be kept.
  const bool valid = !m_lost && m_world.now() < m_book->deadline();
  try {
    const LockSelector which{.program = program, .id = m_lock->id, .token = m_lock->token};
    mongolock::ReleaseOutcome result;
    if (m_world.config().plant == Plant::no_hold) {
      result.kind =
          m_locker.remove_and_wake(which) ? mongolock::ReleaseOutcome::released : mongolock::ReleaseOutcome::not_holder;
    } else {
      result = m_locker.release(which);
    }
    m_world.note(fmt::format("{} released '{}': {}", m_tag, program,
                             result.kind == mongolock::ReleaseOutcome::released   ? "deleted"
                             : result.kind == mongolock::ReleaseOutcome::min_hold ? "kept for its minimum hold"
                                                                                  : "not the holder"));
    if (valid) m_world.released(*m_lock, result);
  } catch (const mongolock::Error& e) {
    m_world.note(fmt::format("{} could not release '{}': {}", m_tag, program, e.what()));
  }
  m_lock.reset();
  m_book.reset();
  idle_for(m_world.rng().millis(Millis(0), m_world.config().timing.ttl * 2));
}

void Client::idle_for(Millis d) {
  m_state = State::idle;
  m_want.clear();
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

std::optional<LocalTime> Client::head_since(const std::string& name) const {
  if (!m_head_since || !m_waiter || dead() || m_want != name) return std::nullopt;
  if (m_busy && m_world.now() > m_wait_end) return std::nullopt; // held up in a call by others' calls
  return std::max({*m_head_since, m_paused_until, m_overran_at});
}

bool Client::job_running() const { return m_job && m_world.now() < job_end(); }

bool Client::believes() const { return m_state == State::holding && !m_lost && m_world.now() < m_book->deadline(); }

} // namespace sim
