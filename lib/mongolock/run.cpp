// mongolock run: acquire the locks, start the command under its guardian, supervise the lease, release,
// record the run (history, metrics). One function per step; every way out goes through the RunRecorder.
#include <mongolock/command_support.hpp>
#include <mongolock/commands.hpp>
#include <mongolock/error.hpp>
#include <mongolock/history.hpp>
#include <mongolock/identity.hpp>
#include <mongolock/liveness.hpp>
#include <mongolock/lock_name.hpp>
#include <mongolock/metrics.hpp>
#include <mongolock/mongo_store.hpp>
#include <mongolock/orphan.hpp>
#include <mongolock/process.hpp>
#include <mongolock/supervisor.hpp>
#include <mongolock/text.hpp>
#include <mongolock/token.hpp>
#include <mongolock/uri.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <map>
#include <unistd.h>

namespace mongolock {

namespace {

std::string command_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

template <typename F> std::string join(const std::vector<LockRecord>& locks, F field) {
  std::string out;
  for (const auto& lock : locks)
    out += (out.empty() ? "" : "\n") + field(lock);
  return out;
}

// What a run records when it ends: one history document per lock name (record_runs()) and the metrics file.
// Filled in as the run goes; finish() writes both once and returns the exit code it was given.
class RunRecorder {
public:
  RunRecorder(const GlobalOptions& global, const RunOptions& options, std::vector<std::string> names, const Log& log)
      : m_options(options), m_names(std::move(names)), m_log(log),
        m_command(recorded_command(options.command, global.store.uri)), m_began(LeaseClock::now()) {
    for (std::size_t i = 0; i < m_names.size(); ++i)
      m_ids.push_back(make_object_id());
  }

  // MONGOLOCK_RUN_ID: the history record ids of `locks`' names, one line each (as MONGOLOCK_TOKEN).
  [[nodiscard]] std::string run_id(const std::vector<LockRecord>& locks) const {
    std::string out;
    for (const auto& lock : locks) {
      const auto at = std::find(m_names.begin(), m_names.end(), lock.name);
      if (at != m_names.end()) out += (out.empty() ? "" : "\n") + m_ids[static_cast<std::size_t>(at - m_names.begin())];
    }
    return out;
  }

  // The locks were taken: the wait ends now.
  void acquired(const std::vector<LockRecord>& locks) {
    m_waited = std::chrono::duration_cast<Millis>(LeaseClock::now() - m_began);
    for (const auto& lock : locks) {
      if (lock.fence) m_fences[lock.name] = *lock.fence;
      m_locks.emplace(lock.name, lock.id); // a name's first slot: the one its skipped attempts name
    }
  }

  // The command has just started; `clock` is the server's clock (as of the acquisition), `before_spawn` the
  // LeaseClock just before the spawn: the command cannot have started earlier, so a duration counted from it
  // is never shorter than the command ran (stamped after the spawn, a 0.4 s sleep was once recorded as 399 ms).
  void started(const ServerClock& clock, LocalTime before_spawn) {
    m_clock = clock;
    m_started_local = before_spawn;
    m_started_at = clock.at(m_started_local);
  }

  [[nodiscard]] bool finished() const { return m_finished; }
  // Whether finish() stored the run in the history.
  [[nodiscard]] bool recorded() const { return m_recorded; }

  // The records the guardian's `__release-orphaned` writes when mongolock dies while the job runs
  // (OrphanRequest::runs; issue 26 item 12): as write() would, the command starting now (server clock
  // `clock`), outcome lease-lost with `exit_code` (mongolock's own status is not known then); none with
  // --no-history. The same _id as this recorder's: a run whose mongolock lives never has both.
  [[nodiscard]] std::vector<RunRecord> orphan_records(const ServerClock& clock, int exit_code) const {
    std::vector<RunRecord> runs;
    if (!m_options.history.enabled) return runs;
    const auto now = LeaseClock::now();
    for (std::size_t i = 0; i < m_names.size(); ++i) {
      RunRecord run;
      run.id = m_ids[i];
      run.name = m_names[i];
      run.process = holder_identity(getpid());
      run.pid_ns = own_process_identity().pid_ns;
      run.host = host_name();
      run.user = user_name();
      run.command = m_command;
      run.started_at = clock.at(now);
      run.waited = m_waited.value_or(std::chrono::duration_cast<Millis>(now - m_began));
      run.outcome = std::string(outcome_name(Outcome::lease_lost));
      run.exit_code = exit_code;
      if (const auto lock = m_locks.find(run.name); lock != m_locks.end()) run.lock = lock->second;
      if (const auto fence = m_fences.find(run.name); fence != m_fences.end()) run.fence = fence->second;
      runs.push_back(std::move(run));
    }
    return runs;
  }

  // Writes the record of outcome `outcome` (history through `store`; the metrics file) and returns
  // `exit_code`. A null `store` means the server did not answer just now (or was never reached): the
  // history is not tried, since it would only hold up the exit (a warning says so unless the outcome is error). `ended`
  // is when the whole job ended (LeaseClock), when known. Never throws.
  int finish(RunStore* store, Outcome outcome, int exit_code, std::optional<LocalTime> ended = std::nullopt,
             int signal = 0, std::string held_by = {}, std::string held_lock = {}) noexcept {
    if (m_finished) return exit_code;
    m_finished = true;
    try {
      write(store, outcome, exit_code, ended.value_or(LeaseClock::now()), signal,
            Holder{std::move(held_by), std::move(held_lock)});
    } catch (const std::exception& e) {
      m_log.warning(fmt::format("the run was not recorded ({})", e.what()));
    }
    return exit_code;
  }

  // For a record written before the release (run --once-per): a purge of the history that falls due is
  // kept for purge_deferred(), after the release, so that the locks are not held for housekeeping.
  void defer_purge() { m_defer_purge = true; }
  // Why a finish() with a null store records nothing, for its warning (default: the server did not answer).
  void not_recorded_because(std::string reason) { m_not_recorded = std::move(reason); }
  void purge_deferred(RunStore& store) noexcept {
    if (m_purge_runs.empty()) return;
    purge_history(store, m_purge_runs, m_options.history, m_purge_now, m_log);
    m_purge_runs.clear();
  }

private:
  struct Holder {
    std::string process; // held_by
    std::string lock;    // held_lock
  };

  void write(RunStore* store, Outcome outcome, int exit_code, LocalTime ended, int signal, const Holder& holder) {
    // The server's clock: fresh when the store has just spoken to the server (the release), else as taken
    // at the acquisition; none when the server was never reached.
    std::optional<ServerClock> clock = m_clock;
    if (store != nullptr) {
      try {
        clock = store->clock();
      } catch (const Error&) {}
    }
    // A run that started: its duration on this host's clock, and the end from the start (two estimates of
    // the server's clock, taken at different handshakes, could make a run look shorter than it was).
    const auto duration = std::max(Millis(0), std::chrono::duration_cast<Millis>(ended - m_started_local));
    const auto ended_at = m_started_at ? *m_started_at + duration
                          : clock      ? clock->at(ended)
                                       : std::chrono::time_point_cast<Millis>(std::chrono::system_clock::now());
    std::vector<RunRecord> runs;
    std::vector<RunMetrics> metrics;
    for (std::size_t i = 0; i < m_names.size(); ++i) {
      const auto& name = m_names[i];
      RunRecord run;
      run.id = m_ids[i];
      run.name = name;
      run.process = holder_identity(getpid());
      run.pid_ns = own_process_identity().pid_ns;
      run.host = host_name();
      run.user = user_name();
      run.command = m_command;
      run.started_at = m_started_at;
      run.ended_at = ended_at;
      if (m_started_at) run.duration = duration;
      run.waited = m_waited.value_or(std::chrono::duration_cast<Millis>(ended - m_began));
      run.outcome = std::string(outcome_name(outcome));
      run.exit_code = exit_code;
      if (signal > 0 && sigabbrev_np(signal) != nullptr) run.signal = sigabbrev_np(signal);
      run.held_by = holder.process;
      run.held_lock = holder.lock;
      if (const auto lock = m_locks.find(name); lock != m_locks.end()) run.lock = lock->second;
      if (const auto fence = m_fences.find(name); fence != m_fences.end()) run.fence = fence->second;
      // The success --once-per reads: kept through every purge for its period (red team 8 F2).
      if (m_options.once_per && outcome == Outcome::ok) run.keep_until = ended_at + *m_options.once_per;
      metrics.push_back(RunMetrics{
          .name = name,
          .outcome = outcome,
          .ended_at = static_cast<double>(ended_at.time_since_epoch().count()) / 1000.0,
          .duration =
              run.duration ? std::optional<double>(static_cast<double>(run.duration->count()) / 1000.0) : std::nullopt,
          .exit_code = exit_code,
          .waited = static_cast<double>(run.waited.count()) / 1000.0});
      runs.push_back(std::move(run));
    }
    if (store != nullptr && clock) {
      m_recorded = record_runs(*store, std::move(runs), m_options.history, ended_at, m_log,
                               m_defer_purge ? &m_purge_runs : nullptr);
      m_purge_now = ended_at;
    } else if (m_options.history.enabled && outcome != Outcome::error) {
      m_log.warning(
          fmt::format("the run was not recorded in the history: {}; its exit status is unchanged", m_not_recorded));
    }
    if (m_options.metrics_file) {
      try {
        write_metrics_file(*m_options.metrics_file, metrics);
      } catch (const Error& e) {
        m_log.warning(fmt::format("{}; the run's exit status is unchanged", e.what()));
      }
    }
  }

  const RunOptions& m_options;
  bool m_defer_purge = false;
  std::string m_not_recorded = "the server did not answer in time";
  bool m_recorded = false;
  std::vector<RunRecord> m_purge_runs; // a purge due after the release (defer_purge())
  ServerTime m_purge_now{};
  std::vector<std::string> m_names;
  std::vector<std::string> m_ids; // each name's history record _id
  const Log& m_log;
  std::vector<std::string> m_command;
  LocalTime m_began;
  std::optional<Millis> m_waited;
  std::optional<ServerClock> m_clock;
  LocalTime m_started_local{}; // when the command started (LeaseClock)
  std::optional<ServerTime> m_started_at;
  std::map<std::string, std::int64_t> m_fences;
  std::map<std::string, std::string> m_locks; // each name's lock document _id, once acquired
  bool m_finished = false;
};

// The outcome of a run whose command ran, from how supervision ended and how the release went.
Outcome run_outcome(const RunOutcome& result, bool release_gone) {
  if (result.lease_lost || release_gone) return Outcome::lease_lost;
  if (result.timed_out) return Outcome::timeout;
  return result.command_status == 0 ? Outcome::ok : Outcome::failed;
}

// One `mongolock run` after its options were checked: its store, locks and recorder, and one method per
// step. A step returns the exit code when the run ends there (std::nullopt: go on); every way out goes
// through the recorder.
class Run {
public:
  Run(const GlobalOptions& global, const RunOptions& options, const std::vector<std::string>& names,
      const RunPolicy& policy, const SignalBlock& signals, RunRecorder& recorder, Log& log)
      : m_global(global), m_options(options), m_names(names), m_policy(policy), m_signals(signals),
        m_recorder(recorder), m_log(log), m_config(store_config(global, policy)), m_store(m_config, log),
        m_locker(m_store, log), m_self(own_process_identity()), m_holder_file(m_self) {}

  int execute() {
    if (const auto code = acquire()) return *code;
    if (const auto code = check_before_start()) return *code;
    std::optional<Child> child;
    if (const auto code = start(child)) return *code;
    // Taken from the queue: its tickets are deleted now that the command runs, not in the handover.
    m_outcome.leave_queue();
    const auto result = supervise(m_locker, locks(), *child, m_signals, m_policy, m_log);
    const auto ended = child->job_ended();
    m_log.debugf("command exited with status {}", result.command_status);
    // The heartbeat left its call deadline (or a failed client): the release gets the configured timeouts,
    // on the same connection unless a call failed.
    m_store.reconnect(std::nullopt);
    return result.lease_lost ? finish_lost(result, ended) : finish(result, ended);
  }

private:
  // Each command must give up well within the renewal deadline so the heartbeat can retry.
  static StoreConfig store_config(const GlobalOptions& global, const RunPolicy& policy) {
    auto config = global.store;
    config.operation_timeout = std::clamp(policy.lease.renew_interval, Millis(1000), config.operation_timeout);
    return config;
  }

  std::vector<LockRecord>& locks() { return m_outcome.locks; }

  // Where this holder runs, recorded with its holder file (locked while mongolock or its guardian lives),
  // so that a run on this host may take the lock over at once when both are gone (liveness.hpp).
  std::vector<AcquireRequest> requests() const {
    std::vector<AcquireRequest> out;
    for (const auto& name : m_names) {
      auto request = make_request(m_global, m_options.take, name, holder_identity(getpid()), m_options.ttl, &m_log);
      // The boot and PID namespace tell this holder from another "host:pid" (issue 26 item 7); the start,
      // which points a same-host run to the holder file, only with that file (a file of this name that
      // someone else made first is no evidence of this run: red team of issue 26, X2).
      request.boot_id = m_self.boot_id;
      request.pid_ns = m_self.pid_ns;
      if (m_holder_file.locked()) request.pid_start = m_self.pid_start;
      request.command = printable(command_name(m_options.command.front())); // shown by status and list
      out.push_back(std::move(request));
    }
    return out;
  }

  // --splay, then every name (--wait: through the queue; --replace: at its front, waiting until taken
  // unless --wait limits it). Ends the run when a name is held (skipped) or a newer --replace run came.
  std::optional<int> acquire() {
    auto wait = m_options.take.wait;
    if (m_options.replace && !wait) wait = k_wait_forever;
    if (splay_before_acquiring(m_options.take.splay, m_names, wait, m_log)) {
      m_outcome = m_locker.acquire_all(
          requests(), WaitPolicy{.wait = wait, .push = m_options.take.push, .replace = m_options.replace},
          sleep_unless_signalled);
    } else {
      m_outcome.interrupted = true;
    }
    if (m_outcome.superseded) {
      // The Waiter said so in one line: a newer replacing run goes first; this one never ran.
      return m_recorder.finish(&m_store, Outcome::skipped, m_global.conflict_exit_code);
    }
    if (locks().empty() && !m_outcome.interrupted) {
      std::string held_by, held_lock;
      const auto code = report_held(m_global, m_locker, m_outcome, m_log, &held_by, &held_lock);
      return m_recorder.finish(&m_store, Outcome::skipped, code, std::nullopt, 0, held_by, held_lock);
    }
    if (!locks().empty()) m_recorder.acquired(locks());
    for (const auto& lock : locks()) {
      m_log.debugf("acquired lock '{}' as {} until {}", lock.program, lock.process, format_time(lock.expires_at));
    }
    return std::nullopt;
  }

  // A signal that came while acquiring, and --once-per: either ends the run before the command starts.
  std::optional<int> check_before_start() {
    if (const auto signo = take_forwarded_signal(Millis(0))) {
      m_log.info(fmt::format("received SIG{} before the command started{}", sigabbrev_np(*signo),
                             locks().empty() ? "" : "; releasing the lock"));
      release_after_run(m_locker, locks(), m_log);
      // Interrupted while waiting for a held lock: skipped; after taking it: the run failed to start.
      return m_recorder.finish(&m_store, locks().empty() ? Outcome::skipped : Outcome::failed,
                               exit_code_for_signal(*signo), std::nullopt, *signo);
    }
    if (!m_options.once_per) return std::nullopt;
    std::optional<std::string> done;
    try {
      done = succeeded_within(m_store, locks(), *m_options.once_per);
    } catch (const Error&) {
      release_after_run(m_locker, locks(), m_log); // nothing ran: give the locks back, then fail (69)
      throw;
    }
    if (!done) return std::nullopt;
    m_log.info(*done);
    release_after_run(m_locker, locks(), m_log);
    return m_recorder.finish(&m_store, Outcome::not_due, k_exit_ok);
  }

  // Every MONGOLOCK_* variable describes this run: stale ones inherited from an outer run are replaced or
  // removed.
  std::vector<std::pair<std::string, std::string>> job_environment() {
    auto& l = locks();
    std::vector<std::pair<std::string, std::string>> env{
        {"MONGOLOCK_NAME", join(l, [](const LockRecord& r) { return r.name; })},
        {"MONGOLOCK_TOKEN", join(l, [](const LockRecord& r) { return r.token; })},
        {"MONGOLOCK_PROCESS", l.front().process},
        {"MONGOLOCK_HOLDER", l.front().process},
        {"MONGOLOCK_RUN_ID", m_options.history.enabled ? m_recorder.run_id(l) : std::string()}};
    const auto fences = join(l, [](const LockRecord& r) { return r.fence ? fmt::format("{}", *r.fence) : ""; });
    const auto slots = join(l, [](const LockRecord& r) { return r.slot > 0 ? fmt::format("{}", r.slot) : ""; });
    env.emplace_back("MONGOLOCK_FENCE", m_options.take.fence ? fences : std::string());
    env.emplace_back("MONGOLOCK_SLOT", m_options.take.slots > 1 ? slots : std::string());
    // A MONGOLOCK_URI holding a secret (a password: redact_uri() hides something) is removed unless
    // --pass-uri: the job needs no password to run under the lock, and could print or pass it on.
    const char* uri = std::getenv("MONGOLOCK_URI");
    if (!m_options.pass_uri && uri != nullptr && redact_uri(uri) != uri) env.emplace_back("MONGOLOCK_URI", "");
    return env;
  }

  ChildSpec child_spec() {
    ChildSpec spec;
    spec.argv = m_options.command;
    spec.env = job_environment();
    spec.signal_mask = m_signals.previous();
    // No job after the lease: the renew deadline of the first acquisition bounds the start (checked here,
    // by the guardian before it forks, and by the command's process before exec), whatever --on-lost says.
    spec.start_by = lease_deadline(m_store, locks(), m_policy.lease);
    spec.no_new_privs = m_options.no_new_privs;
    spec.holder_fd = m_holder_file.fd();
    spec.orphan_request = encode_orphan_request(OrphanRequest{.store = m_config,
                                                              .locks = locks(),
                                                              .holder_pid = getpid(),
                                                              .holder_start = m_self.pid_start,
                                                              .runs = orphan_records()});
    if (m_policy.on_lost != OnLost::ignore) {
      // The guardian's watchdog: armed from the start with the acquisition's deadline.
      spec.deadline = spec.start_by;
      spec.kill_grace = m_policy.on_lost == OnLost::term ? m_policy.lease.kill_grace : Millis(0);
    }
    return spec;
  }

  // The history records of this run should mongolock die (RunRecorder::orphan_records()); none when the
  // server's clock cannot be read now (the start then fails on it anyway).
  std::vector<RunRecord> orphan_records() {
    try {
      return m_recorder.orphan_records(m_store.clock(), m_options.lost_exit_code);
    } catch (const Error& e) {
      m_log.debugf("no history record prepared for the guardian ({})", e.what());
      return {};
    }
  }

  // Starts the command under its guardian, unless the lease has already ended.
  std::optional<int> start(std::optional<Child>& child) {
    const auto spec = child_spec();
    if (const auto now = LeaseClock::now(); now >= *spec.start_by) {
      m_log.error(fmt::format(
          "lease on {} ended before the command could start: acquiring took {}, past the renew "
          "deadline of {} (mongolock stopped or starved, or the server slow); not started",
          quoted_programs(locks()),
          format_duration(std::chrono::duration_cast<Millis>(now - *spec.start_by + m_policy.lease.renew_deadline)),
          format_duration(m_policy.lease.renew_deadline)));
      release_after_run(m_locker, locks(), m_log, /*lease_lost=*/true);
      return m_recorder.finish(&m_store, Outcome::lease_lost, m_options.lost_exit_code);
    }
    try {
      const auto clock = m_store.clock();
      const auto before_spawn = LeaseClock::now();
      child.emplace(Child::spawn(spec));
      m_recorder.started(clock, before_spawn);
    } catch (const Error& e) {
      release_after_run(m_locker, locks(), m_log, /*lease_lost=*/e.exit_code() == k_exit_lease_lost);
      if (e.exit_code() == k_exit_cannot_execute || e.exit_code() == k_exit_not_found) {
        m_recorder.finish(&m_store, Outcome::not_executable, e.exit_code());
      } else if (e.exit_code() == k_exit_lease_lost) {
        // Not started: the lease had ended. Said once, with --lost-exit-code's status.
        m_log.error(e.what());
        return m_recorder.finish(&m_store, Outcome::lease_lost, m_options.lost_exit_code);
      }
      throw;
    }
    const auto cgroup = child->cgroup();
    // The pid is the guardian's, the job's process group (the command's own pid is the guardian's child's).
    m_log.debugf("started {} (guardian pid {}, the job's process group; {})", m_options.command.front(), child->pid(),
                 cgroup ? fmt::format("its cgroup {}", *cgroup)
                        : fmt::format("no cgroup of its own: {}", child->cgroup_why_not()));
    return std::nullopt;
  }

  // The lease was lost: the job has ended (or, with --on-lost ignore, ran to its end). Gives back the locks
  // still held (another name of a multi-name run; the lost one is normally gone), by _id and token, so
  // never another holder's. When the lease ran out (the server did not answer in time, or mongolock did
  // not run), trying would only delay the exit: the leases end on their own.
  int finish_lost(const RunOutcome& result, std::optional<LocalTime> ended) {
    if (result.stalled) {
      m_log.info("not releasing: the lease ran out while mongolock did not run; the leases end on their own");
    } else if (result.ran_out) {
      m_log.info("not releasing: no renewal succeeded in time; the leases end on their own");
    } else {
      release_after_run(m_locker, locks(), m_log, /*lease_lost=*/true);
    }
    const auto code = m_policy.on_lost == OnLost::ignore ? result.command_status : m_options.lost_exit_code;
    // A server that did not answer the renewals gets no history insert either: it would delay the exit.
    // (When mongolock itself did not run, the server is likely fine: the insert is tried.)
    const bool server_silent = result.ran_out && !result.stalled;
    return m_recorder.finish(server_silent ? nullptr : &m_store, Outcome::lease_lost, code, ended,
                             result.command_signal);
  }

  // The job ended with the lease held: release, then the exit code from the job and the release.
  int finish(const RunOutcome& result, std::optional<LocalTime> ended) {
    if (!result.replaced_by.empty()) return finish_replaced(result, ended);
    if (m_options.once_per && !result.timed_out && result.command_status == 0) return finish_once_per(result, ended);
    const auto released = release_after_run(m_locker, locks(), m_log);
    const auto what = run_outcome(result, released == RunRelease::gone);
    auto code = result.command_status;
    if (result.timed_out) {
      code = k_exit_timeout;
    } else if (result.command_status == 0 && released == RunRelease::gone) {
      // A command that succeeded is not reported as a success when its lock was not held to the end (76) or
      // could not be given back (69); a failing command's own status says more.
      code = m_options.lost_exit_code;
    } else if (result.command_status == 0 && released == RunRelease::failed) {
      code = k_exit_unavailable;
    }
    if (released == RunRelease::failed) m_recorder.not_recorded_because("the release failed (see above)");
    return m_recorder.finish(released == RunRelease::failed ? nullptr : &m_store, what, code, ended,
                             result.command_signal);
  }

  // run --once-per whose job succeeded with the lease held: the success is recorded while the locks are
  // still held and only then are they released, so whichever run takes them next reads it (issue #19:
  // recorded after the release, a slow link let a second host run the job again within the period). The
  // record says ok, as the job did, only when it is written before the lease's renew deadline: the history
  // calls are cut at that deadline (CallLimits), so an `ok` that reaches the server was sent while the lease
  // held (issue 26 item 8: mongolock stopped past TTL + grace after the job, another host took the lock,
  // found no success and ran; an `ok` written on resume counted as the period's success). Past the
  // deadline: finish_once_per_late(). A release that finds a lock gone or cannot reach the server still
  // exits 76 / 69 as without --once-per.
  int finish_once_per(const RunOutcome& result, std::optional<LocalTime> ended) {
    const auto left = std::chrono::floor<Millis>(result.deadline - LeaseClock::now());
    if (left <= Millis(0)) return finish_once_per_late(result, ended);
    m_recorder.defer_purge();
    m_store.reconnect(CallLimits{left, left});
    m_recorder.finish(&m_store, Outcome::ok, k_exit_ok, ended, result.command_signal);
    m_store.reconnect(std::nullopt);
    if (LeaseClock::now() >= result.deadline) {
      m_log.warning(fmt::format(
          "the job succeeded, but the lease's renew deadline passed {} ago while the run recorded it (mongolock was "
          "stopped or starved, or the server was slow): a record cut at the deadline was not written, and another run "
          "may take the lock and run the job again this period (--once-per)",
          format_duration(std::chrono::duration_cast<Millis>(LeaseClock::now() - result.deadline))));
      (void)release_after_run(m_locker, locks(), m_log, /*lease_lost=*/true);
      return m_options.lost_exit_code;
    }
    const auto released = release_after_run(m_locker, locks(), m_log);
    if (released != RunRelease::failed) m_recorder.purge_deferred(m_store);
    if (!m_recorder.recorded()) {
      // The period's success is not in the history: the next run anywhere runs the job again. Not 0, so that
      // cron's mail or a monitor shows it (red team 6, F3: exit 0 with a warning only).
      // "Not confirmed": the record may have been written with its reply lost (red team 8 F5).
      m_log.warning("the job succeeded, but the record of its success was not confirmed (see above): another run "
                    "may run the job again this period (--once-per)");
      return released == RunRelease::gone ? m_options.lost_exit_code : k_exit_unavailable;
    }
    if (released == RunRelease::released) return k_exit_ok;
    m_log.warning("the run was recorded as succeeded before the release: the job ended with its lease held");
    return released == RunRelease::gone ? m_options.lost_exit_code : k_exit_unavailable;
  }

  // run --once-per whose job succeeded, but the renew deadline had passed before the run could record it
  // (mongolock did not run): the lease may have ended and another host taken the lock, found no success and
  // run the job. Recorded as lease-lost (never as the period's success), exit --lost-exit-code (76).
  int finish_once_per_late(const RunOutcome& result, std::optional<LocalTime> ended) {
    m_log.warning(fmt::format(
        "the job succeeded, but the lease's renew deadline had passed {} ago before the run could record it "
        "(mongolock was stopped or starved): recorded as lease-lost, not as this period's success (--once-per); "
        "another run may have taken the lock and run the job again",
        format_duration(std::chrono::duration_cast<Millis>(LeaseClock::now() - result.deadline))));
    (void)release_after_run(m_locker, locks(), m_log, /*lease_lost=*/true);
    return m_recorder.finish(&m_store, Outcome::lease_lost, m_options.lost_exit_code, ended, result.command_signal);
  }

  // run --replace, stopped for a newer replacing run: release (its wake-up event a k_replace_event: every waiter
  // reads the queue, where the replacing run is first, before it tries), record `replaced`, exit with the
  // conflict code (75 unless -E).
  int finish_replaced(const RunOutcome& result, std::optional<LocalTime> ended) {
    m_locker.wake_as_replaced();
    const auto released = release_after_run(m_locker, locks(), m_log);
    return m_recorder.finish(released == RunRelease::failed ? nullptr : &m_store, Outcome::replaced,
                             m_global.conflict_exit_code, ended, result.command_signal, result.replaced_by);
  }

  const GlobalOptions& m_global;
  const RunOptions& m_options;
  const std::vector<std::string>& m_names;
  const RunPolicy& m_policy;
  const SignalBlock& m_signals;
  RunRecorder& m_recorder;
  Log& m_log;
  StoreConfig m_config;
  MongoStore m_store;
  Locker m_locker;
  ProcessIdentity m_self;
  HolderFile m_holder_file;
  AcquireOutcome m_outcome;
};

} // namespace

int run_command(const GlobalOptions& global, const RunOptions& options, Log& log) {
  auto names = options.names;
  if (names.empty()) throw usage_error("run needs a lock name: mongolock run NAME [NAME...] -- CMD [ARGS...]");
  for (const auto& name : names)
    validate_lock_name(name);
  std::sort(names.begin(), names.end()); // one global order: no two runs wait for each other in a cycle
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (options.command.empty() || options.command.front().empty()) {
    throw usage_error("run needs a command: mongolock run NAME -- CMD [ARGS...]");
  }
  validate_take(options.take);
  validate_history_policy(options.history);
  if (options.once_per && !options.history.enabled) {
    throw usage_error("--once-per reads the run history, which --no-history turns off; drop one of them");
  }
  if (options.metrics_file) validate_metrics_path(*options.metrics_file);
  if (options.once_per && options.take.slots > 1) {
    // Each slot's holder would check the history before any of them recorded a success: all would run.
    throw usage_error(
        "--once-per runs the job at most once per period, and a semaphore lets several run at once: drop --slots "
        "or --once-per");
  }
  if (options.replace && options.take.slots > 1) {
    throw usage_error("--replace stops the holder of a lock, and a semaphore has several: drop --slots or --replace");
  }
  RunPolicy policy{make_lease_timing(options.ttl, options.kill_grace, options.renew_interval, options.renew_deadline),
                   options.on_lost, options.timeout, options.kill_after};
  policy.replaceable = options.replace;

  // Signals are read from a signalfd from here on: a SIGTERM during the acquisition is not lost, and
  // the heartbeat thread and the command start with them blocked/restored as they should.
  // A log reader that goes away must not cost the lock: SIGPIPE is ignored from here on.
  ignore_sigpipe();
  // The mask stays until exit: a signal that comes after the command ended (during the release, the
  // history insert) is never delivered, so the exit status is the run's, not 128+N.
  SignalBlock signals;
  signals.keep_blocked();
  RunRecorder recorder(global, options, names, log);
  try {
    return Run(global, options, names, policy, signals, recorder, log).execute();
  } catch (const Error& e) {
    // MongoDB unavailable, an internal error: nothing can be stored, but the metrics file counts it.
    if (!recorder.finished()) recorder.finish(nullptr, Outcome::error, e.exit_code());
    throw;
  }
}

} // namespace mongolock
