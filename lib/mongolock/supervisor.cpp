#include <mongolock/error.hpp>
#include <mongolock/lease_book.hpp>
#include <mongolock/queue.hpp>
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

// Renews the leases of all locks of a run on its own thread. A lock's lease counts as held until
// renew_deadline after the send time of its last successful renewal; the thread never sends a renewal past
// that deadline, and it accepts a reply only if it arrived before that deadline (by then the job is being
// stopped, and a later reply may describe a write the server applied after another holder had taken over).
// Every renewal is bounded by the deadline (plus the kill grace + 0.5s for the command), on the run's
// connection while it answers and on a new one after a failure, so the thread never outlives the job by
// much, and a failed server is tried again at once.
// The lease decisions (deadline, next renewal, a renewal whose outcome is unknown pinning the lease) are
// LeaseBook's; this class sends the renewals and feeds it their outcomes.
// After each successful renewal, `renewed` gets the new deadline (the guardian's watchdog).
class Heartbeat {
public:
  // `replace_check`: run --replace, read the queue this often between renewals (replaced()); nullopt: never.
  Heartbeat(Locker& locker, std::vector<LockRecord>& locks, const LeaseTiming& timing, const Log& log,
            std::function<void(LocalTime)> renewed, std::optional<Millis> replace_check = std::nullopt)
      : m_locker(locker), m_locks(locks), m_timing(timing), m_log(log), m_renewed(std::move(renewed)),
        m_replace_check(replace_check), m_wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        m_book(sent_times(locks), timing) {
    if (m_wake.get() < 0) throw internal_error(fmt::format("eventfd failed: {}", std::strerror(errno)));
    m_thread = std::thread([this] { loop(); });
  }

  ~Heartbeat() { stop(); }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  void stop() {
    give_up();
    if (m_thread.joinable()) m_thread.join();
  }

  // When the lease counts as lost unless a renewal succeeds first: the earliest over all locks.
  [[nodiscard]] LocalTime deadline() const {
    std::lock_guard lock(m_mutex);
    return m_book.deadline();
  }

  // The last renewal error, for messages ("" when none failed since the last success).
  [[nodiscard]] std::string last_error() const {
    std::lock_guard lock(m_mutex);
    return m_last_error;
  }

  // Non-empty once a renewal found a lease gone: the reason.
  [[nodiscard]] std::string gone() const {
    std::lock_guard lock(m_mutex);
    return m_gone;
  }

  // Non-empty once a replacing run waits for one of the names (run --replace): its "host:pid".
  [[nodiscard]] std::string replaced() const {
    std::lock_guard lock(m_mutex);
    return m_replaced_by;
  }

  // Stops renewing (the lease is lost or the command ended): no renewal is sent after this.
  void give_up() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_cv.notify_all();
  }

  // Readable when gone() changed.
  [[nodiscard]] int wake_fd() const { return m_wake.get(); }

private:
  static std::vector<LocalTime> sent_times(const std::vector<LockRecord>& locks) {
    std::vector<LocalTime> sent;
    for (const auto& lock : locks)
      sent.push_back(lock.sent);
    return sent;
  }

  void loop() {
    const auto retry_delay = std::clamp(m_timing.renew_interval / 4, Millis(100), Millis(2000));
    LocalTime next;
    {
      std::lock_guard lock(m_mutex);
      next = m_book.next_renewal();
    }
    auto check_at = m_replace_check ? Clock::now() + *m_replace_check : LocalTime::max();
    for (;;) {
      {
        std::unique_lock lock(m_mutex);
        m_cv.wait_until(lock, std::min(next, check_at), [this] { return m_stop; });
        if (m_stop) return;
      }
      if (Clock::now() < next) { // only the replace check is due
        check_replace(next);
        check_at = Clock::now() + *m_replace_check;
        continue;
      }
      bool all_renewed = true;
      const auto round_sent = Clock::now();
      for (std::size_t i = 0; i < m_locks.size(); ++i) {
        const auto outcome = renew_one(i);
        if (outcome == Renewal::gone) return;
        all_renewed = all_renewed && outcome == Renewal::renewed;
      }
      LocalTime deadline;
      {
        std::lock_guard lock(m_mutex);
        // A failed round is retried retry_delay after it was sent: at once after a call that was abandoned
        // for time (LeaseBook::call_bound left room for this attempt), later after an error answer.
        next = all_renewed ? m_book.next_renewal() : std::max(Clock::now(), round_sent + retry_delay);
        deadline = m_book.deadline();
      }
      if (all_renewed && m_renewed) m_renewed(deadline);
      if (all_renewed) mark_if_waited();
    }
  }

  // After a renewal, while a lock is not marked `waiters`: read the queue and mark it ourselves when
  // someone waits (Locker::mark_if_waited). Waiters never write the holder's document, so this thread
  // is the only writer of it while the command runs (the main thread writes before and after). A failure
  // only delays a waiter's wake-up (it polls); the next renewal gets a fresh connection.
  void mark_if_waited() {
    try {
      (void)m_locker.mark_if_waited(m_locks);
    } catch (const Error& e) {
      m_log.debugf("could not read the queue of waiters: {}", e.what());
    }
  }

  // This run's own ticket, by its _id (LockRecord::ticket: the ticket a lock was taken with, deleted after
  // the start). Never by `process`: "host:pid" is not unique (containers that share a host name, mongolock
  // PID 1 in each: both "vm:1"; issue 26 item 7).
  [[nodiscard]] bool own_ticket(const TicketRecord& ticket) const {
    return std::any_of(m_locks.begin(), m_locks.end(),
                       [&](const LockRecord& lock) { return !lock.ticket.empty() && lock.ticket == ticket.id; });
  }

  // run --replace: reads the queue of the run's names (one find, bounded to finish before the renewal due
  // at `next`, at most 1 s); a live ticket of a replacing run other than this run's own: replaced(), unless this
  // run took the lock as a replacing run that joined after it (LockRecord::replace_seq: an older replacing
  // run that missed being passed finds itself superseded when it reads this lock). Errors only
  // delay it to the next check.
  void check_replace(LocalTime next) {
    {
      std::lock_guard lock(m_mutex);
      if (!m_replaced_by.empty()) return;
    }
    const auto budget = std::clamp(std::chrono::floor<Millis>(next - Clock::now()), Millis(1), Millis(1000));
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
        const std::uint64_t one = 1;
        [[maybe_unused]] const auto n = write(m_wake.get(), &one, sizeof one);
        return;
      }
    } catch (const Error& e) {
      m_log.debugf("could not read the queue for a replacing run: {}", e.what());
    }
  }

  enum class Renewal { renewed, failed, gone };

  Renewal renew_one(std::size_t i) {
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
      bool ending = false;
      {
        std::lock_guard lock(m_mutex);
        m_last_error = e.what();
        m_book.unknown(i, sent, m_book.server_bound(total));
        ending = m_stop || Clock::now() >= deadline;
      }
      if (ending) {
        // The lease is lost (or the run is ending): no "retrying" after "lease lost" (issue 27).
        m_log.debugf("lease renewal of '{}' failed past the renew deadline: {}", lease.program, e.what());
        return Renewal::gone;
      }
      m_log.warning(fmt::format("lease renewal of '{}' failed, retrying: {}", lease.program, e.what()));
      return Renewal::failed;
    }
  }

  // Lock i's renewal sent at `sent` was confirmed at `received` (under m_mutex): the first confirmation
  // after unknown renewals starts their clearing time; one sent after it lifts the pin.
  void confirmed(std::size_t i, LocalTime sent, LocalTime received) {
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

  void report_gone(const std::string& reason) {
    {
      std::lock_guard lock(m_mutex);
      m_gone = reason;
    }
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = write(m_wake.get(), &one, sizeof one);
  }

  Locker& m_locker;
  std::vector<LockRecord>& m_locks;
  const LeaseTiming m_timing;
  const Log& m_log;
  std::function<void(LocalTime)> m_renewed;
  const std::optional<Millis> m_replace_check;
  Fd m_wake;
  mutable std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_stop = false;
  std::string m_last_error; // its error
  std::string m_gone;
  std::string m_replaced_by; // under m_mutex
  LeaseBook m_book;          // under m_mutex
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
      // A stop from outside (kill -STOP of the guardian or of the job's group) with no shell to continue
      // mongolock: stopping itself would leave it stopped for good. The lease is renewed meanwhile, as for
      // a slow job (a guardian stopped past its deadline stops the job once continued: it acts on the
      // deadline first).
      m_log.warning(fmt::format("the job of {} was stopped by a signal; the lease is renewed until it is continued "
                                "(kill -CONT) or ends",
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
    if (!m_outcome.lease_lost) wake_at = std::min(wake_at, m_heartbeat.deadline());
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
