#include "client.hpp"

#include "host.hpp"

#include <mongolock/error.hpp>
#include <mongolock/history.hpp>
#include <mongolock/supervisor.hpp>

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

Client::Client(World& world, int id, std::optional<std::uint64_t> operator_seed)
    : m_world(world), m_id(id), m_tag(operator_seed ? std::string("op") : fmt::format("c{}", id)),
      m_own_rng(operator_seed ? std::optional<Rng>(Rng(*operator_seed)) : std::nullopt), m_store(world, *this),
      m_locker(m_store, m_log) {
  m_wake_at = world.now() + rng().millis(Millis(0), world.config().timing.ttl);
}

void Client::kill() {
  (void)m_waiter.release(); // the process is gone: nothing deletes its tickets (they expire)
  (void)m_skipper.release();
  if (m_state == State::dead) return;
  m_state = State::dead;
  m_died_at = std::min(m_died_at, m_world.now());
  auto* host = m_world.host();
  auto* run = host && m_pid ? host->find(m_pid) : nullptr;
  if (run == nullptr || m_world.ended()) return;
  // Same host: mongolock and its guardian were killed together (pkill -9 mongolock), not the host. The job's
  // command dies with its guardian (PR_SET_PDEATHSIG: a SIGKILL, dead m_dying later); the holder file stays,
  // unlocked; a part of the job that left its process group or session may run on; the pid may be reused.
  run->supervised = false;
  auto& rng = m_world.rng();
  if (job_running()) {
    if (rng.chance(0.5)) {
      run->escape_until = m_world.now() + rng.millis(Millis(1), m_world.config().timing.ttl * 2);
      run->escape_in_group = rng.chance(0.5);
      // Out of its cgroup (root writing another group's cgroup.procs) but still in the process group, where
      // only the group check can see it; out of both is the man page's limit (nothing proves it), not drawn.
      run->escape_left_cgroup = run->escape_in_group && rng.chance(0.5);
      m_world.note(fmt::format("{}: a part of its job ({}) runs on", m_tag,
                               run->escape_in_group ? "in its process group" : "in a session of its own"));
    }
    run->zombie = rng.chance(0.2);
  }
  if (rng.chance(0.3)) run->reused = run->start + 1 + rng.range(0, 1000);
}

void Client::begin_run() {
  if (auto* host = m_world.host()) m_pid = host->begin_run(m_id);
}

void Client::end_run() {
  auto* host = m_world.host();
  auto* run = host && m_pid ? host->find(m_pid) : nullptr;
  if (run == nullptr) return;
  run->supervised = false; // mongolock exits: its HolderFile is removed
  run->file = false;
}

void Client::step() {
  m_join_collided = false;
  try {
    if (is_operator()) {
      operate();
      return;
    }
    switch (m_state) {
    case State::idle: {
      begin_run();
      draw_wants();
      m_want_until = m_world.now() + m_world.config().timing.ttl * m_world.rng().range(1, 4);
      m_state = State::wanting;
      // run --replace (Config::p_replace): always through the queue, at its front; its holder is replaceable.
      m_replace = m_world.config().p_replace > 0 && m_world.rng().chance(m_world.config().p_replace);
      if (m_replace || m_world.rng().chance(m_world.config().p_wait)) {
        mongolock::WaitPolicy policy{.wait = std::chrono::ceil<Millis>(m_want_until - m_world.now()),
                                     .push = m_world.config().push,
                                     .replace = m_replace};
        if (m_world.config().plant == Plant::no_poll) {
          for (auto* d : {&policy.queue.poll, &policy.queue.push_check, &policy.queue.push_recheck,
                          &policy.queue.follow_idle, &policy.queue.idle_poll})
            *d = Millis(600'000);
        }
        m_waiter = std::make_unique<mongolock::Waiter>(m_locker, requests(), policy);
        m_waiting_since = m_world.now();
        m_joined.clear();
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
  m_in_hand.clear(); // the acquisition returned: its locks are held (m_locks) or given back
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
    if (m_world.host() != nullptr) {
      // Same host: the run records where it runs, and takes a live-looking lock over at once when the real
      // holder_verdict() proves its holder dead on the simulated evidence (World::judge_holder()).
      request.process = fmt::format("{}:{}", k_shared_host, m_pid);
      request.boot_id = k_shared_identity.boot_id;
      request.pid_ns = k_shared_identity.pid_ns;
      request.pid_start = m_world.host()->run(m_pid).start;
      request.holder_dead = [this](const LockRecord& lock, bool taking_over) {
        return m_world.judge_holder(*this, lock, taking_over);
      };
    }
    request.user = "sim";
    request.command = "job"; // a run's lock (the instant takeover's verdict applies only to those)
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
      // The Waiter's pause is on this client's clock; a parked getMore's end is the server's (the world's).
      m_wake_at = m_parked_until ? *m_parked_until : world_at(local_now() + pause);
      const bool head = m_waiter->state() == mongolock::Waiter::State::head;
      if (!head) m_head_since.reset();
      if (head && !m_head_since) m_head_since = m_world.now();
      return;
    }
  } catch (const mongolock::Error& e) {
    const bool failover = std::string_view(e.what()).find(k_failover_answer) != std::string_view::npos;
    if (pause_after(e)) return;
    m_world.note(fmt::format("{} waiting for {}: error: {}; exits", m_tag, wanted(), e.what()));
    const auto left = std::chrono::floor<Millis>(m_want_until - m_world.now());
    if (failover && m_waiter->state() != mongolock::Waiter::State::start && left > Millis(100)) {
      m_world.waiter_gave_up_in_election(*this, e.what(), left);
    }
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
  // A waiter never holds a lock without a confirmed acquisition: the server confirmed each insert to it (a write
  // of unknown outcome taken for "nothing happened" must not turn into a lock it counts on).
  for (const auto& lock : outcome.locks) {
    if (m_confirmed.count(lock.id) == 0) {
      throw Violation(fmt::format("{} took '{}' ({}) from the queue without a confirmed acquisition", m_tag,
                                  lock.program, lock.id));
    }
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
      m_joined.clear();
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
  if (m_waiter && !jumps_queue()) {
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
      m_waiter.reset(); // Plant::jump_queue: it took the lock outside the queue
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

// Run::start(): the job starts only before the first acquisition's renew deadline (the real lease_deadline():
// the earliest over the locks); past it the locks are released and nothing starts (exit 76). Then the real
// heartbeat (HeartbeatSteps, heartbeat.hpp) keeps the lease, and the guardian is armed with that deadline.
void Client::start(std::vector<LockRecord> locks) {
  const auto& timing = m_world.config().timing;
  for (const auto& lock : locks)
    m_world.acquired(lock);
  m_locks = std::move(locks);
  m_lost = false;
  m_replaced_by.clear();
  m_state = State::finishing;
  m_run_names = m_wants;
  m_wants.clear();
  if (m_world.config().once_per && !due(*m_world.config().once_per)) {
    m_job = false;
    m_wake_at = m_world.now();
    return;
  }
  const auto now = m_world.now();
  const auto local = local_now(); // the real code's deadlines are on this client's clock
  const auto start_by = mongolock::lease_deadline(m_store, m_locks, timing);
  if (local >= start_by && m_world.config().plant != Plant::late_spawn) {
    m_world.note(fmt::format("{} acquired {} past its renew deadline: releases, starts nothing", m_tag, held()));
    m_job = false;
    m_wake_at = now;
    return;
  }
  // Plant::first_only: the heartbeat renews (and counts the lease by) the first lock only.
  const bool first_only = m_world.config().plant == Plant::first_only;
  m_renewing = first_only ? std::vector<LockRecord>{m_locks.front()} : std::vector<LockRecord>{};
  // run --replace: the heartbeat reads the queue for a newer replacing run between renewals (Supervisor).
  const auto replace_check = m_replace ? std::optional(mongolock::RunPolicy{}.replace_check) : std::nullopt;
  m_heart = std::make_unique<mongolock::HeartbeatSteps>(
      m_locker, first_only ? m_renewing : m_locks, timing, m_log, [this](LocalTime deadline) { renewed(deadline); },
      replace_check);
  m_job = true;
  m_job_start = now;
  if (m_world.config().max_dying > Millis(0)) m_dying = m_world.rng().millis(Millis(0), m_world.config().max_dying);
  if (auto* host = m_world.host()) {
    auto& run = host->run(m_pid);
    run.pgid = m_pid + 1; // the guardian's child leads the job's group and writes it to the holder file
    if (m_world.config().cgroups) run.cgroup = fmt::format("/sys/fs/cgroup/mongolock-job-{}", m_pid);
    run.names = m_run_names;
    for (const auto& lock : m_locks)
      run.lock_ids.push_back(lock.id);
  }
  m_job_planned_end = now + m_world.rng().millis(timing.ttl / 4, timing.ttl * 3);
  m_job_fails = m_world.rng().chance(m_world.config().p_job_fails);
  // The guardian, armed with the first acquisition's deadline (run: on_lost term); it checks first
  // whenever it wakes.
  m_guardian.emplace(ns(start_by), ns(timing.kill_grace));
  guardian_wake(local);
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
                           ms(std::chrono::duration_cast<Millis>(m_heart->deadline() - local))));
  for (const auto& lock : m_locks)
    m_world.job_started(lock);
  m_wake_at = std::min({world_at(m_heart->next_wakeup()), m_job_planned_end, world_at(m_heart->deadline())});
}

// Supervisor's main loop (lease check first: its deadline, a lock found gone), then the real heartbeat's
// step when it is due (the thread's wake-up, here on virtual time).
void Client::hold() {
  const auto now = m_world.now();
  const auto local = local_now();
  if (!m_lost && local >= m_heart->deadline()) set_lost("the renew deadline passed");
  if (!m_lost && !m_heart->gone().empty()) set_lost(m_heart->gone());
  check_replaced(local);
  if (!m_lost && now >= m_job_planned_end) m_world.note(fmt::format("{} job on {} ended", m_tag, held()));
  if (!m_lost && m_replaced_by.empty() && now < m_job_planned_end && now >= job_end())
    m_world.note(fmt::format("{}: its guardian killed the job (its deadline lagged the lease's)", m_tag));
  // The job ended: on its own, stopped for a replacing run, or killed by the guardian (Supervisor: reap()).
  if (m_lost || now >= job_end()) {
    m_heart->give_up();
    m_state = State::finishing;
    m_wake_at = job_end();
    return;
  }
  if (local >= m_heart->next_wakeup() && !m_heart->step()) {
    // Ended: the lock was found gone, too late to renew, or a reply after the deadline (it has passed).
    const auto gone = m_heart->gone();
    set_lost(gone.empty() ? "the renewal came too late (the renew deadline passed)" : gone);
    m_heart->give_up();
    m_state = State::finishing;
    m_wake_at = job_end();
    return;
  }
  if (m_state == State::holding)
    m_wake_at = std::min({world_at(m_heart->next_wakeup()), job_end(), world_at(m_heart->deadline())});
}

// Supervisor::check_replaced(): a newer replacing run waits (the heartbeat's replace check saw its ticket):
// the job is stopped as after a lost lease (SIGTERM, SIGKILL after the kill grace, by the guardian) while the
// lease is still renewed; the locks are released once it has ended. Plant::ignore_replace: never.
void Client::check_replaced(LocalTime now) {
  if (m_lost || !m_replaced_by.empty() || m_heart->replaced().empty()) return;
  m_replaced_by = m_heart->replaced();
  if (m_world.config().plant == Plant::ignore_replace) return;
  m_world.note(fmt::format("{} replaced by a newer run on {}: stops its job", m_tag, m_replaced_by));
  m_world.count("runs replaced");
  guardian_wake(now);
  (void)m_guardian->stop(ns(now), ns(now + m_world.config().timing.kill_grace)); // Child::stop_job()
}

// The heartbeat's `renewed` callback (Supervisor: Child::extend_deadline()): every lock was renewed.
void Client::renewed(LocalTime deadline) {
  if (!m_renewing.empty()) m_locks.front() = m_renewing.front(); // Plant::first_only: its copy
  const auto now = local_now();
  m_world.count("renewals");
  // The guardian woke at its deadline on its own (a fired watchdog stays fired), then gets the extension.
  guardian_wake(now);
  if (m_world.config().plant != Plant::no_extend) m_guardian->extend(ns(deadline));
  m_world.note(fmt::format("{} renewed {}: deadline in {}", m_tag, held(),
                           ms(std::chrono::duration_cast<Millis>(deadline - now))));
}

void Client::set_lost(const std::string& why) {
  m_lost = true;
  if (m_heart)
    m_world.lease_lost(*this, m_locks, world_at(m_heart->deadline() - m_world.config().timing.renew_deadline), why);
  if (m_guardian) {
    const auto now = local_now();
    guardian_wake(now);
    (void)m_guardian->stop(ns(now), ns(now + m_world.config().timing.kill_grace)); // Child::stop_job()
  }
  m_world.note(fmt::format("{} lost {}: {}; the job is stopped", m_tag, held(), why));
}

// After the job has ended (the guardian reaped it): release by _id + token, as run does; run --once-per records the
// run in the history (a success before the release: Run::finish_once_per(); Plant::late_record: after it).
void Client::finish() {
  if (m_job && m_world.now() < job_end()) {
    m_wake_at = job_end();
    return;
  }
  // The job ran to its own end with the lease held, and exited 0.
  const bool succeeded =
      m_job && m_heart && !m_lost && m_replaced_by.empty() && !m_job_fails && job_end() >= m_job_planned_end;
  const bool once = m_world.config().once_per.has_value();
  const bool late = m_world.config().plant == Plant::late_record;
  const bool ran = m_job;
  m_job = false;
  m_store.reconnect(std::nullopt);
  // A confirmed success counts from its confirmation, before the release (whose call may take seconds while another
  // run takes a lock and records its own: registered after it, the earlier success looked like a second one, seed
  // 1131 of --multi).
  if (once && succeeded && !late && record_success()) m_world.once_succeeded(*this, m_locks);
  release_all();
  if (once && succeeded && late && record_success()) m_world.once_succeeded(*this, m_locks);
  if (once && ran && !succeeded) {
    try {
      auto records = run_records("failed");
      m_store.insert_runs(records);
    } catch (const mongolock::Error& e) {
      m_world.note(fmt::format("{} could not record its run: {}", m_tag, e.what()));
    }
  }
  m_locks.clear();
  m_run_names.clear();
  m_heart.reset();
  m_renewing.clear();
  idle_for(m_world.rng().millis(Millis(0), m_world.config().timing.ttl * 2));
}

// release_after_run(): each lock in turn, a failure of one does not keep the others.
void Client::release_all() {
  // Run::finish_replaced(): a run stopped for a replacing run wakes the queue with k_replace_event.
  const bool replaced = !m_replaced_by.empty() && m_world.config().plant != Plant::ignore_replace;
  m_locker.wake_as_replaced(replaced && m_world.config().plant != Plant::plain_wake);
  for (std::size_t i = 0; i < m_locks.size(); ++i) {
    const auto& lock = m_locks[i];
    // The lease counts as valid (the release is sent before its deadline): a --min-hold must be kept.
    const bool valid =
        m_heart && !m_lost && local_now() < (i < renewed_count() ? m_heart->deadline(i) : m_heart->deadline());
    try {
      const LockSelector which{.program = lock.program, .id = lock.id, .token = lock.token};
      if (replaced) m_world.replaced_release(lock.name);
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
}

bool Client::due(Millis period) {
  try {
    const auto done = mongolock::succeeded_within(m_store, m_locks, period);
    if (!done) return true;
    m_world.count("once-per runs not due");
    m_world.note(fmt::format("{} {}", m_tag, *done));
  } catch (const mongolock::Error& e) {
    m_world.note(fmt::format("{} could not read the history ({}): releases, starts nothing", m_tag, e.what()));
  }
  return false;
}

bool Client::record_success() {
  const auto deadline = m_heart->deadline();
  const auto left = std::chrono::floor<Millis>(deadline - local_now());
  if (left <= Millis(0)) {
    m_world.note(fmt::format("{} succeeded past its renew deadline: recorded as lease-lost", m_tag));
    return false;
  }
  auto records = run_records("ok");
  bool confirmed = false;
  m_store.reconnect(mongolock::CallLimits{left, left});
  try {
    m_store.insert_runs(records);
    confirmed = true;
  } catch (const mongolock::Error& e) {
    m_world.note(fmt::format("{} could not record its success: {}", m_tag, e.what()));
  }
  m_store.reconnect(std::nullopt);
  if (local_now() >= deadline) confirmed = false; // exit 76: not this period's success
  m_world.note(fmt::format("{} {} its success", m_tag, confirmed ? "recorded" : "did not record"));
  return confirmed;
}

std::vector<mongolock::RunRecord> Client::run_records(const char* outcome) {
  std::vector<mongolock::RunRecord> records;
  const auto now = m_store.clock().now();
  for (const auto& lock : m_locks) {
    mongolock::RunRecord r;
    r.name = lock.name;
    r.process = lock.process;
    r.host = lock.process.substr(0, lock.process.rfind(':'));
    r.user = "sim";
    r.command = {"job"};
    r.ended_at = now;
    r.outcome = outcome;
    r.lock = lock.id;
    records.push_back(std::move(r));
  }
  return records;
}

// Plant::jump_queue: client 1's --wait runs take a free lock as runs without --wait do (the others queue).
bool Client::jumps_queue() const { return m_world.config().plant == Plant::jump_queue && m_id == 1; }

void Client::idle_for(Millis d) {
  end_run();
  m_replace = false;
  m_waiter.reset(); // Plant::jump_queue: its unused Waiter
  m_state = State::idle;
  m_wants.clear();
  m_wake_at = m_world.now() + d;
}

// The guardian is a process of its own: it woke at its deadline, and at its SIGKILL, whenever they came before
// `now`, not when this client steps (which may be late: inside a call). Then it reads the messages at `now`.
void Client::guardian_wake(LocalTime now) {
  for (int i = 0; i < 2; ++i) {
    const auto wake = m_guardian->next_wakeup();
    if (wake > ns(now)) break;
    if (m_guardian->check(wake).kill) break;
  }
  (void)m_guardian->check(ns(now));
}

LocalTime Client::guardian_kill_at() const {
  const auto next = LocalTime(std::chrono::nanoseconds(m_guardian->next_wakeup()));
  if (m_guardian->state() == mongolock::GuardianDeadline::State::stopping) return next;
  return next + m_world.config().timing.kill_grace; // it fires at the deadline, SIGKILL a kill grace later
}

// A killed job is dead m_dying after its SIGKILL (the guardian's; on the same host, its PR_SET_PDEATHSIG when
// mongolock and the guardian were killed); a host that dies takes its job with it at once.
LocalTime Client::job_end() const {
  if (!m_job) return m_job_start;
  auto end = std::min(m_job_planned_end, std::max(world_at(guardian_kill_at()) + m_dying, m_job_start + Millis(1)));
  if (m_died_at != LocalTime::max()) end = std::min(end, m_world.host() ? m_died_at + m_dying : m_died_at);
  return end;
}

std::optional<LocalTime> Client::head_since() const {
  if (!m_head_since || !m_waiter || dead()) return std::nullopt;
  if (m_busy && m_world.now() > m_wait_end) return std::nullopt; // held up in a call by others' calls
  return std::max({*m_head_since, m_paused_until, m_overran_at});
}

std::string Client::waiting_as() const {
  if (!m_waiter || dead()) return {};
  return m_world.host() != nullptr ? fmt::format("{}:{}", k_shared_host, m_pid)
                                   : fmt::format("host{}:{}", m_id, 100 + m_id);
}

std::optional<LocalTime> Client::lease_deadline_of(const std::string& id) const {
  if (!m_heart) return std::nullopt;
  for (std::size_t i = 0; i < renewed_count(); ++i)
    if (m_locks[i].id == id) return m_heart->deadline(i);
  return std::nullopt;
}

std::optional<LocalTime> Client::guardian_deadline() const {
  if (!m_guardian || m_guardian->state() != mongolock::GuardianDeadline::State::armed) return std::nullopt;
  return LocalTime(std::chrono::nanoseconds(m_guardian->next_wakeup()));
}

bool Client::job_running() const { return m_job && m_world.now() < job_end(); }

bool Client::believes() const { return m_state == State::holding && !m_lost && local_now() < m_heart->deadline(); }

// Locker::acquire_all's loop: a step of the Waiter that threw a transient error (Error::transient(): the server
// unreachable, or a call that changes nothing cut by the network) while queued and within the wait pauses a poll
// interval and tries again (Waiter::pause_after, red team 6 F5); any other error ends the run (69).
bool Client::pause_after(const mongolock::Error& error) {
  Millis pause{0};
  const auto sleeper = [&pause](Millis d) {
    pause = d;
    return true;
  };
  if (!m_waiter || dead() || !m_waiter->pause_after(error, sleeper)) return false; // (killed in the call: gone)
  m_world.count("waiter pauses after a transient error");
  m_world.note(
      fmt::format("{} waiting for {}: error: {}; pauses {} and tries again", m_tag, wanted(), error.what(), ms(pause)));
  m_wake_at = world_at(local_now() + pause);
  return true;
}

// The operator: `mongolock status` shows a lock (read here at once), then `mongolock renew` (own TTL, or --ttl of half
// to all of the schedule's TTL) or `mongolock release` of it, naming it by holder (--process "host:pid", no place:
// commands.cpp's caller_place() of an explicit --process), by --token, or by _id, through the real Locker on its own
// SimStore (delayed, duplicated, lost, as any client's calls). Its writes are judged by World::operator_write().
void Client::operate() {
  auto& draw = rng();
  const auto& config = m_world.config();
  m_wake_at = m_world.now() + draw.millis(config.operator_every / 2, config.operator_every * 3 / 2);
  const auto docs = m_world.server().list();
  if (docs.empty()) return;
  const auto doc = docs[static_cast<std::size_t>(draw.range(0, static_cast<int>(docs.size()) - 1))];
  using By = OperatorCommand::By;
  OperatorCommand command;
  command.kind = draw.chance(0.7) ? OperatorCommand::Kind::renew : OperatorCommand::Kind::release;
  command.by = static_cast<By>(draw.range(0, 2));
  command.program = doc.program;
  command.named = doc.id;
  command.sent = m_world.now();
  LockSelector which{.program = doc.program};
  if (command.by == By::holder) which.process = command.selector = doc.process;
  if (command.by == By::token) which.token = command.selector = doc.token;
  if (command.by == By::id) which.id = command.selector = doc.id;
  if (command.kind == OperatorCommand::Kind::renew) {
    command.ttl =
        draw.chance(0.5) && doc.ttl > Millis(0) ? doc.ttl : draw.millis(config.timing.ttl / 2, config.timing.ttl);
  }
  m_command = command;
  const char* by = command.by == By::holder ? "holder" : command.by == By::token ? "token" : "_id";
  try {
    if (command.kind == OperatorCommand::Kind::renew) {
      const auto ttl = command.ttl;
      m_world.count("operator renew commands");
      const auto expires = config.plant == Plant::outstamp_any ? planted_renew(which, ttl) : m_locker.renew(which, ttl);
      m_world.note(fmt::format("op: renew '{}' by {} ({}), ttl {}: {}", doc.program, by, doc.id, ms(ttl),
                               expires ? "renewed" : "not held"));
    } else {
      m_world.count("operator release commands");
      const auto outcome = m_locker.release(which);
      m_world.note(fmt::format("op: release '{}' by {} ({}): {}", doc.program, by, doc.id,
                               outcome.kind == mongolock::ReleaseOutcome::not_holder ? "not held" : "released"));
    }
  } catch (const mongolock::Error& e) {
    m_world.note(fmt::format("op: {} '{}' by {}: error: {}",
                             command.kind == OperatorCommand::Kind::renew ? "renew" : "release", doc.program, by,
                             e.what()));
  }
}

// Plant::outstamp_any: Locker::renew(which, ttl) as it was before red team 6's F1 was fixed: the retry above a
// renewal stamped at or after this one's is allowed whatever the filter names (by holder too), so that a late
// `renew --process H` renews H's next acquisition above its stamp, with the TTL of the command.
std::optional<ServerTime> Client::planted_renew(const LockSelector& which, Millis ttl) {
  const auto at = mongolock::LeaseClock::now();
  auto stamp = m_store.clock().earliest(at);
  auto live = which;
  live.expires_after = m_store.clock().latest(at);
  live.not_released = true;
  for (int attempt = 0;; ++attempt) {
    live.renewed_before = stamp;
    const auto expires = std::max(*live.expires_after, stamp) + ttl;
    if (m_store.renew(live, expires, stamp, ttl, false) == 1) return expires;
    const auto current = attempt == 0 ? m_store.find(which.program) : std::nullopt;
    if (!current) return std::nullopt;
    const bool named = (!which.id || current->id == *which.id) && (!which.token || current->token == *which.token) &&
                       (!which.process || current->process == *which.process);
    if (!named || current->renewed_at < stamp || current->released_at || current->expires_at <= *live.expires_after) {
      return std::nullopt;
    }
    stamp = current->renewed_at + Millis(1);
  }
}

} // namespace sim
