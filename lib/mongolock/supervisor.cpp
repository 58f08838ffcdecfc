#include <mongolock/error.hpp>
#include <mongolock/heartbeat.hpp>
#include <mongolock/supervisor.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <thread>
#include <unistd.h>

namespace mongolock {

namespace {

using Clock = LeaseClock;

// A file descriptor closed on destruction.
class Fd {
public:
  explicit Fd(int fd) : m_fd(fd) {}
  ~Fd() {
    if (m_fd >= 0) close(m_fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  [[nodiscard]] int get() const { return m_fd; }

private:
  int m_fd;
};

// How long before its first step is due the heartbeat's thread starts (Heartbeat::start_when_due()).
constexpr auto k_heartbeat_lead = Millis(500);

// Runs the heartbeat's steps (HeartbeatSteps, heartbeat.hpp: renewals, the replace check, marking a lock
// waited for) on its own thread, at each step's next_wakeup(), until given up or the lease is gone.
// wake_fd() is readable when gone() or replaced() changed. The thread starts k_heartbeat_lead before the
// first step is due (start_when_due(), called by the supervisor's loop, which wakes for it: start_at()), so a
// job that ends before then costs no thread (issue 30: its start and join, ~0.5 ms of a one-shot run).
class Heartbeat {
public:
  // `replace_check`: run --replace, read the queue this often between renewals (replaced()); nullopt: never.
  Heartbeat(Locker& locker, std::vector<LockRecord>& locks, const LeaseTiming& timing, const Log& log,
            std::function<void(LocalTime)> renewed, std::optional<Millis> replace_check = std::nullopt)
      : m_wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        m_steps(locker, locks, timing, log, std::move(renewed), replace_check, [this] { notify(); }),
        m_start_at(m_steps.next_wakeup() - k_heartbeat_lead) {
    if (m_wake.get() < 0) throw internal_error(fmt::format("eventfd failed: {}", std::strerror(errno)));
    start_when_due(Clock::now());
  }

  // Starts the thread when `now` is at or past start_at() (once; never after give_up()).
  void start_when_due(LocalTime now) {
    if (m_thread.joinable() || now < m_start_at) return;
    {
      std::lock_guard lock(m_mutex);
      if (m_stop) return;
    }
    m_thread = std::thread([this] { loop(); });
  }

  // When the thread is due to start; LocalTime::max() once it runs.
  [[nodiscard]] LocalTime start_at() const { return m_thread.joinable() ? LocalTime::max() : m_start_at; }

  ~Heartbeat() { stop(); }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  void stop() {
    give_up();
    if (m_thread.joinable()) m_thread.join();
  }

  [[nodiscard]] LocalTime deadline() const { return m_steps.deadline(); }
  [[nodiscard]] std::string last_error() const { return m_steps.last_error(); }
  [[nodiscard]] std::string gone() const { return m_steps.gone(); }
  [[nodiscard]] std::string replaced() const { return m_steps.replaced(); }

  // Stops renewing (the lease is lost or the command ended): no renewal is sent after this.
  void give_up() {
    m_steps.give_up();
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
  }

  // Readable when gone() or replaced() changed.
  [[nodiscard]] int wake_fd() const { return m_wake.get(); }

private:
  void loop() {
    for (;;) {
      {
        std::unique_lock lock(m_mutex);
        m_cv.wait_until(lock, m_steps.next_wakeup(), [this] { return m_stop; });
        if (m_stop) return;
      }
      if (!m_steps.step()) return;
    }
  }

  void notify() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = write(m_wake.get(), &one, sizeof one);
  }

  Fd m_wake;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_stop = false; // under m_mutex
  HeartbeatSteps m_steps;
  LocalTime m_start_at; // when the thread starts (start_when_due())
  std::thread m_thread;
};

int poll_timeout_ms(LocalTime now, LocalTime until) {
  const auto ms = std::chrono::ceil<Millis>(until - now).count();
  return static_cast<int>(std::clamp<Millis::rep>(ms, 0, 60'000));
}

// Supervision of one run's job: a state machine on the main thread, woken by signals, the heartbeat
// (a lease gone), the guardian's reports and its own timers; time only from LeaseClock::now().
//   holding  -> lost      the lease check fails (deadline passed, watchdog fired, lock gone, or the job was
//                         stopped past the deadline); on_lost applies
//   holding  -> stopping  --timeout ran out (SIGTERM, SIGKILL after --kill-after); the lease is still renewed
//   holding  -> replaced  run --replace: the heartbeat saw a replacing run in the queue (SIGTERM, SIGKILL after
//                         the kill grace); the lease is still renewed
//   stopping/replaced -> lost  as from holding
//   any      -> ended     the whole job has ended (the guardian was reaped)
class Supervisor {
public:
  enum class State { holding, stopping, replaced, lost, ended };

  Supervisor(Locker& locker, std::vector<LockRecord>& locks, Child& child, const SignalBlock& signals,
             const RunPolicy& policy, const Log& log)
      : m_child(child), m_policy(policy), m_log(log), m_signal_fd(open_signal_fd(signals)),
        m_watchdog(policy.on_lost != OnLost::ignore),
        m_heartbeat(
            locker, locks, policy.lease, log,
            [this](LocalTime deadline) {
              if (m_watchdog) m_child.extend_deadline(deadline);
            },
            policy.replaceable ? std::optional(policy.replace_check) : std::nullopt),
        m_names(quoted_programs(locks)), m_started(Clock::now()),
        m_timeout_at(policy.timeout ? m_started + *policy.timeout : LocalTime::max()), m_slept_from(m_started),
        m_planned_wake(m_started), m_woke(m_started) {}

  RunOutcome run() {
    while (m_state != State::ended) {
      check_lease();
      check_replaced();
      if (reap()) break;
      warn_unkillable();
      if (m_child_state.state == Child::WaitResult::stopped) {
        on_job_stopped();
        continue;
      }
      const auto now = Clock::now();
      on_timers(now);
      m_heartbeat.start_when_due(now);
      sleep(now);
      check_lease(); // before anything read now can count
      forward_signals();
    }
    m_heartbeat.stop();
    m_outcome.deadline = m_heartbeat.deadline();
    return m_outcome;
  }

  [[nodiscard]] State state() const { return m_state; }

private:
  // The signalfd of the blocked signals, before the heartbeat thread starts.
  static int open_signal_fd(const SignalBlock& signals) {
    const int fd = signalfd(-1, &signals.blocked(), SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0) throw internal_error(fmt::format("signalfd failed: {}", std::strerror(errno)));
    return fd;
  }

  // The lease first, on every pass (also the first after a stop): whatever else happened meanwhile.
  void check_lease() {
    if (m_outcome.lease_lost) return;
    const auto now = Clock::now();
    const auto deadline = m_heartbeat.deadline();
    const auto fired = m_watchdog ? m_child.watchdog_fired() : std::nullopt;
    // A job that ended before the deadline ended within its lease, even if mongolock (stopped meanwhile)
    // only learns it after the deadline: not a lost lease.
    if (const auto ended = m_child.job_ended(); ended && *ended < deadline && !fired) return;
    auto reason = m_heartbeat.gone();
    if (reason.empty() && (now >= deadline || fired)) reason = ran_out(now, deadline);
    if (reason.empty()) return;
    lose(reason, now, deadline, fired);
  }

  // holding -> replaced: a replacing run waits (run --replace): the job is stopped as after a lost lease
  // (SIGTERM, SIGKILL after the kill grace, by the guardian) while the lease is still renewed.
  void check_replaced() {
    if (m_state != State::holding) return;
    auto by = m_heartbeat.replaced();
    if (by.empty()) return;
    m_state = State::replaced;
    m_outcome.replaced_by = by;
    m_log.warning(fmt::format("{} replaced by a newer run on {}; stopping the command (SIGTERM, SIGKILL after {})",
                              m_names, by, format_duration(m_policy.lease.kill_grace)));
    m_child.stop_job(m_policy.lease.kill_grace);
  }

  // Why the lease ran out (no renewal in time, a stop of mongolock, or the guardian's watchdog first).
  // (The guardian first: the lease on the server is still valid, so the run releases its locks and records
  // the run as usual; only a lease that ran out is left to end on its own.)
  std::string ran_out(LocalTime now, LocalTime deadline) {
    if (m_woke - m_planned_wake > Millis(500) && deadline <= m_woke) {
      m_outcome.ran_out = true;
      m_outcome.stalled = true;
      return fmt::format("mongolock was stopped or starved of CPU for {} and the lease's renew deadline passed "
                         "meanwhile (no renewal could be sent)",
                         format_duration(std::chrono::duration_cast<Millis>(m_woke - m_slept_from)));
    }
    if (now >= deadline) {
      m_outcome.ran_out = true;
      const auto error = m_heartbeat.last_error();
      return fmt::format("no renewal succeeded within {}{}", format_duration(m_policy.lease.renew_deadline),
                         error.empty() ? "" : fmt::format(" (last error: {})", error));
    }
    return "the guardian's deadline passed before the last renewal reached it";
  }

  // holding/stopping -> lost: stops renewing and applies --on-lost.
  void lose(const std::string& reason, LocalTime now, LocalTime deadline, std::optional<LocalTime> fired) {
    m_outcome.lease_lost = true;
    m_state = State::lost;
    m_heartbeat.give_up();
    const auto fired_at = fired.value_or(now);
    const auto by_guardian = [&] {
      return fmt::format("the guardian stopped the command at the deadline, {} ago",
                         format_duration(std::chrono::duration_cast<Millis>(now - fired_at)));
    };
    switch (m_policy.on_lost) {
    case OnLost::term: {
      // The SIGKILL is due at deadline + kill grace, also when mongolock only notices later (stopped,
      // starved): then the job is killed at once, since the lease may already have ended.
      const auto grace = std::clamp(std::chrono::duration_cast<Millis>(deadline + m_policy.lease.kill_grace - now),
                                    Millis(0), m_policy.lease.kill_grace);
      // The guardian decided on its own: what it sent (no SIGTERM when it woke after the kill grace).
      const bool killed_at_once = fired ? m_child.watchdog_killed_at_once() : grace <= Millis(0);
      m_log.error(fmt::format("lease on {} lost: {}; {} ({})", m_names, reason,
                              fired ? by_guardian() : "stopping the command",
                              !killed_at_once ? fmt::format("SIGTERM, SIGKILL after {}", format_duration(grace))
                                              : std::string("SIGKILL at once, no SIGTERM: the kill grace had passed "
                                                            "too")));
      m_child.stop_job(grace);
      break;
    }
    case OnLost::kill:
      m_log.error(
          fmt::format("lease on {} lost: {}; {}", m_names, reason, fired ? by_guardian() : "killing the command"));
      m_child.kill_job();
      break;
    case OnLost::ignore:
      m_log.error(fmt::format("lease on {} lost: {}; the command keeps running (--on-lost ignore) and may "
                              "overlap another holder",
                              m_names, reason));
      break;
    }
  }

  // -> ended when the whole job has ended (the guardian reaped): true then.
  bool reap() {
    m_child_state = m_child.try_wait();
    if (m_child_state.state != Child::WaitResult::exited) return false;
    m_outcome.command_status = m_child_state.exit_code;
    m_outcome.command_signal = m_child_state.signal;
    if (m_child.orphans_killed() > 0) {
      m_log.warning(fmt::format("the guardian was killed (status {}); killed what it left of the job before "
                                "releasing",
                                m_child_state.exit_code));
    }
    m_state = State::ended;
    return true;
  }

  void warn_unkillable() {
    if (m_told_unkillable) return;
    const auto pid = m_child.unkillable();
    if (!pid) return;
    m_told_unkillable = true;
    m_log.error(fmt::format("cannot kill process {} of the job: it runs as another user (a setuid program?) and "
                            "mongolock may not signal it; waiting for it to end{}",
                            *pid,
                            m_outcome.lease_lost ? "; it may run beside the next holder"
                                                 : ", the lease is renewed meanwhile (run --no-new-privs keeps a "
                                                   "job killable)"));
  }

  // Job control (Ctrl-Z, or a background job reading the terminal): the whole job is stopped before
  // mongolock stops, so nothing of it runs while nothing renews the lease. Continued after the lease
  // deadline, the job is killed, never continued (-> lost): another holder may already be running.
  void on_job_stopped() {
    if (!m_child.has_terminal()) {
      // The guardian was stopped from outside (kill -STOP of it or of the job's process group: without a
      // terminal it never stops itself for the job). No shell would continue it, and a stopped guardian
      // can act on neither the lease nor mongolock's death, nor reap a job that ended (the lock stayed held
      // for good; a nested run's job outlived its lease: red team of issue 26, X6 and X15). It is continued
      // at once; the job's own processes stay as they were (a stopped job is the operator's choice).
      kill(m_child.pid(), SIGCONT);
      m_log.warning(fmt::format("the guardian of the job of {} was stopped by a signal without a terminal (not job "
                                "control); continued it (the job's own processes are left as they are)",
                                m_names));
      return;
    }
    m_log.debugf("the job stopped; stopping mongolock until it is continued (the lease is not renewed meanwhile)");
    m_child.suspend();
    if (!m_outcome.lease_lost && Clock::now() >= m_heartbeat.deadline() && m_policy.on_lost != OnLost::ignore) {
      m_outcome.lease_lost = true;
      m_outcome.ran_out = true;
      m_state = State::lost;
      m_heartbeat.give_up();
      m_log.error(fmt::format("lease on {} lost while the job was stopped; killing it", m_names));
      m_child.kill_job();
    } else {
      m_child.resume();
    }
    m_slept_from = m_planned_wake = m_woke = Clock::now();
  }

  // --timeout (holding -> stopping) and the SIGKILL after a SIGTERM.
  void on_timers(LocalTime now) {
    if (!m_outcome.timed_out && now >= m_timeout_at) {
      m_outcome.timed_out = true;
      if (m_state == State::holding) m_state = State::stopping;
      m_log.error(fmt::format("command ran longer than --timeout {}; stopping it (SIGTERM, SIGKILL after {})",
                              format_duration(*m_policy.timeout), format_duration(m_policy.kill_after)));
      m_child.signal(SIGTERM);
      const auto at = Clock::now() + m_policy.kill_after;
      m_kill_at = m_kill_at ? std::min(*m_kill_at, at) : at;
    }
    if (m_kill_at && now >= *m_kill_at) {
      m_log.info("the job still runs after SIGTERM; sending SIGKILL to all of it");
      m_child.kill_job();
      m_kill_at.reset();
    }
  }

  // Sleeps until the next timer or event, at most 500ms, so that a wake-up long after the planned one
  // measures a stop of mongolock (SIGSTOP, a frozen cgroup) or CPU starvation.
  void sleep(LocalTime now) {
    auto wake_at = now + Millis(500);
    if (!m_outcome.lease_lost) wake_at = std::min({wake_at, m_heartbeat.deadline(), m_heartbeat.start_at()});
    if (m_kill_at) wake_at = std::min(wake_at, *m_kill_at);
    if (!m_outcome.timed_out) wake_at = std::min(wake_at, m_timeout_at);
    pollfd fds[3] = {
        {m_signal_fd.get(), POLLIN, 0}, {m_heartbeat.wake_fd(), POLLIN, 0}, {m_child.report_fd(), POLLIN, 0}};
    m_slept_from = now;
    m_planned_wake = std::max(now, wake_at);
    if (poll(fds, 3, poll_timeout_ms(now, wake_at)) < 0 && errno != EINTR) {
      throw internal_error(fmt::format("poll failed: {}", std::strerror(errno)));
    }
    m_woke = Clock::now();
  }

  void forward_signals() {
    signalfd_siginfo info{};
    while (read(m_signal_fd.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      const int signo = static_cast<int>(info.ssi_signo);
      if (signo == SIGCHLD || signo == SIGTTOU || signo == SIGTTIN) continue;
      m_log.debugf("forwarding signal {} ({}) to the command", signo, sigabbrev_np(signo));
      m_child.signal(signo);
    }
    std::uint64_t counter = 0;
    [[maybe_unused]] const auto n = read(m_heartbeat.wake_fd(), &counter, sizeof counter);
  }

  Child& m_child;
  const RunPolicy& m_policy;
  const Log& m_log;
  Fd m_signal_fd;
  const bool m_watchdog;
  Heartbeat m_heartbeat;
  const std::string m_names;
  State m_state = State::holding;
  RunOutcome m_outcome;
  Child::WaitResult m_child_state{};
  const LocalTime m_started;
  const LocalTime m_timeout_at;
  std::optional<LocalTime> m_kill_at;
  // When the loop last went to sleep, was planned to wake up, and woke up.
  LocalTime m_slept_from;
  LocalTime m_planned_wake;
  LocalTime m_woke;
  bool m_told_unkillable = false;
};

} // namespace

LocalTime lease_deadline([[maybe_unused]] LockStore& store, const std::vector<LockRecord>& locks,
                         const LeaseTiming& timing) {
  auto earliest = LocalTime::max();
  for (const auto& lock : locks)
    earliest = std::min(earliest, lock.sent);
  return earliest + timing.renew_deadline;
}

RunOutcome supervise(Locker& locker, std::vector<LockRecord>& locks, Child& child, const SignalBlock& signals,
                     const RunPolicy& policy, const Log& log) {
  Supervisor supervisor(locker, locks, child, signals, policy, log);
  return supervisor.run();
}

} // namespace mongolock
