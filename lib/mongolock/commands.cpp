#include <mongolock/commands.hpp>
#include <mongolock/error.hpp>
#include <mongolock/identity.hpp>
#include <mongolock/liveness.hpp>
#include <mongolock/lock_name.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/metrics.hpp>
#include <mongolock/orphan.hpp>
#include <mongolock/process.hpp>
#include <mongolock/report.hpp>
#include <mongolock/schedule.hpp>
#include <mongolock/text.hpp>
#include <mongolock/token.hpp>
#include <mongolock/uri.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <syslog.h>
#include <thread>
#include <unistd.h>

namespace mongolock {

namespace {

constexpr int k_max_slots = 1000;
constexpr Millis k_gc_expire_after{24 * 3600 * 1000}; // init: the TTL index deletes a day after expiry

// The holder identity of acquire, release and renew: the calling process (the shell that runs
// mongolock), so that `mongolock acquire x` and a later `mongolock release x` in one script match.
std::string caller_identity(const std::optional<std::string>& override_process) {
  if (override_process) {
    if (override_process->empty()) throw usage_error("--process is empty; give a holder such as host:1234");
    return *override_process;
  }
  return holder_identity(getppid());
}

void validate_take(const TakeOptions& take) {
  if (take.slots < 1 || take.slots > k_max_slots) {
    throw usage_error(fmt::format("--slots {} is out of range; give 1 to {}", take.slots, k_max_slots));
  }
  if (take.splay > k_max_splay) {
    throw usage_error(fmt::format("--splay {} is too long; give at most {}", format_duration(take.splay),
                                  format_duration(k_max_splay)));
  }
}

void validate_token(const std::optional<std::string>& token) {
  if (token && !is_valid_token(*token)) {
    throw usage_error(
        fmt::format("--token '{}' is not a mongolock token (32 hex digits, as printed by acquire)", *token));
  }
}

AcquireRequest make_request(const GlobalOptions& global, const TakeOptions& take, std::string name, std::string process,
                            Millis ttl) {
  AcquireRequest request;
  request.name = std::move(name);
  request.process = std::move(process);
  request.user = user_name();
  request.ttl = ttl;
  request.takeover_grace = global.takeover_grace;
  request.min_hold = take.min_hold;
  request.slots = take.slots;
  request.fence = take.fence;
  // A lock whose holder provably died on this host is taken over at once (liveness.hpp; issue #17).
  request.holder_dead = [self = own_process_identity(), host = host_name()](const LockRecord& lock) {
    return holder_provably_dead(lock, self, host);
  };
  return request;
}

std::vector<LockView> views(Locker& locker, std::vector<LockRecord> locks) {
  const auto now = locker.store().clock().now();
  std::vector<LockView> out;
  for (auto& lock : locks) {
    auto alive = holder_alive_here(lock.process);
    out.push_back(LockView{std::move(lock), now, alive});
  }
  return out;
}

// Reports who holds the lock that was not acquired; `held_by` (when given) gets the first holder's host:pid.
int report_held(const GlobalOptions& global, Locker& locker, const AcquireOutcome& outcome, const Log& log,
                std::string* held_by = nullptr) {
  // The holders the attempt read (no second round trip); read them when it did not (e.g. a --wait).
  const auto holders = outcome.holders.empty() ? locker.holders(outcome.held) : outcome.holders;
  if (held_by != nullptr && !holders.empty()) *held_by = holders.front().process;
  if (holders.empty()) {
    // The holder released between our attempt and this read; the name was held when we tried.
    log.info(fmt::format("lock '{}' is held (its holder released it just now; try again)", outcome.held));
  } else if (holders.size() == 1 && holders.front().slot <= 1) {
    log.info(fmt::format("lock '{}' is {}", outcome.held, locker.describe_holder(holders.front())));
  } else {
    // One line, as every message: the slots one after another.
    std::string slots;
    for (const auto& h : holders)
      slots += fmt::format("{}slot {} {}", slots.empty() ? "" : "; ", std::max(h.slot, 1), locker.describe_holder(h));
    log.info(fmt::format("all {} slots of lock '{}' are held: {}", holders.size(), outcome.held, slots));
  }
  return global.conflict_exit_code;
}

// Which lock `release`/`renew` act on: by --token when given (checked), else by holder (--process, or
// the calling shell).
LockSelector holder_selector(const std::string& name, const std::optional<std::string>& token,
                             const std::optional<std::string>& process) {
  validate_token(token);
  return LockSelector{
      .program = name, .token = token, .process = token ? std::optional<std::string>() : caller_identity(process)};
}

// Runs `attempt` on the plain name; when that `matched` nothing, on the semaphore slot ("NAME#K") that
// the same token or holder has, if any (updating which.program). Returns the last attempt's result.
template <typename Attempt, typename Matched>
auto on_name_or_slot(Locker& locker, LockSelector& which, const Attempt& attempt, const Matched& matched) {
  auto result = attempt(which);
  if (matched(result)) return result;
  for (const auto& lock : locker.holders(which.program)) {
    if (lock.program == which.program) continue; // the plain name was tried already
    if ((which.token && lock.token == *which.token) || (which.process && lock.process == *which.process)) {
      which.program = lock.program;
      return attempt(which);
    }
  }
  return result;
}

// Before `renew`: true when waiters are queued for lock `name`, so that the renewal marks it `waiters`
// too (in its one update: the holder never sends a second one) and its release wakes them. One find; a
// failure is only logged (the waiters then notice by polling).
bool waiters_queued(Locker& locker, const std::string& name, const Log& log) {
  try {
    auto& store = locker.store();
    const auto now = store.clock().earliest_now();
    const auto tickets = store.tickets({name});
    return std::any_of(tickets.begin(), tickets.end(), [&](const TicketRecord& t) { return t.expires_at > now; });
  } catch (const Error& e) {
    log.debugf("could not read the queue of waiters: {}", e.what());
    return false;
  }
}

// Refuses a release or renew: says who holds the lock instead, if anyone. Exit 65.
[[noreturn]] void refuse_not_holder(Locker& locker, const std::string& name, const std::string& as_whom,
                                    std::string_view what) {
  const auto holders = locker.holders(name);
  if (holders.empty()) throw Error(k_exit_not_holder, fmt::format("lock '{}' is not held; nothing was {}", name, what));
  if (holders.size() == 1 && holders.front().released_at) {
    throw Error(k_exit_not_holder, fmt::format("lock '{}' was already released at {}; it is kept until {} for its "
                                               "minimum hold; nothing was {}",
                                               name, format_time(*holders.front().released_at),
                                               format_time(holders.front().expires_at), what));
  }
  throw Error(k_exit_not_holder,
              fmt::format("lock '{}' is {}, not by {}; nothing was {} (name the holder with --token or --process)",
                          name, locker.describe_holder(holders.front()), as_whom, what));
}

// Sleeps between attempts of `run --wait`, waking early when a forwarded signal arrives (it is raised
// again, stays pending while blocked, and is handled after the wait). Returns false on a signal.
bool sleep_unless_signalled(Millis pause) {
  const auto signo = take_forwarded_signal(pause);
  if (signo) raise(*signo);
  return !signo;
}

// --splay: sleeps this host's offset for `names` (-v prints it) and shortens `wait` by it, so that a --wait
// deadline counts from the start. Returns false when a forwarded signal ended the sleep (raised again:
// pending, as sleep_unless_signalled() leaves it).
bool splay_before_acquiring(Millis splay, const std::vector<std::string>& names, std::optional<Millis>& wait,
                            const Log& log) {
  if (splay <= Millis(0)) return true;
  const auto offset = splay_offset(host_name(), names, splay);
  log.debugf("--splay {}: this host starts {} late", format_duration(splay), format_duration(offset));
  if (wait && *wait != k_wait_forever) wait = std::max(Millis(0), *wait - offset);
  return offset <= Millis(0) || sleep_unless_signalled(offset);
}

std::string command_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// How giving back a run's locks went: every one released (or kept for its minimum hold), one found gone
// (its lease was lost), or one could not be released (server error; it expires on its own).
enum class RunRelease { released, gone, failed };

// Releases the locks a run holds; failures are reported, never thrown (the command has already ended).
// `lease_lost`: the run already reported the loss, so a lock found gone is expected.
RunRelease release_after_run(Locker& locker, const std::vector<LockRecord>& locks, const Log& log,
                             bool lease_lost = false) {
  auto result = RunRelease::released;
  for (const auto& lock : locks) {
    try {
      const auto outcome = locker.release(LockSelector{.program = lock.program, .id = lock.id, .token = lock.token});
      if (outcome.kind == ReleaseOutcome::released) {
        log.debugf("released lock '{}'", lock.program);
      } else if (outcome.kind == ReleaseOutcome::min_hold) {
        log.info(
            fmt::format("lock '{}' stays held until {} (--min-hold)", lock.program, format_time(outcome.hold_until)));
      } else if (lease_lost) {
        log.debugf("lock '{}' was gone already (its lease was lost)", lock.program);
      } else {
        log.error(fmt::format("lock '{}' was no longer held when the command ended: the lease was lost", lock.program));
        if (result == RunRelease::released) result = RunRelease::gone;
      }
    } catch (const Error& e) {
      log.error(fmt::format("could not release lock '{}' ({}); it expires on its own, at {} at the latest",
                            lock.program, e.what(), format_time(lock.expires_at)));
      result = RunRelease::failed;
    }
  }
  return result;
}

// "'a', 'b'" for messages.
std::string quoted_programs(const std::vector<LockRecord>& locks) {
  std::string out;
  for (const auto& lock : locks)
    out += fmt::format("{}'{}'", out.empty() ? "" : ", ", lock.program);
  return out;
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
    }
  }

  // The command has just started; `clock` is the server's clock (as of the acquisition).
  void started(const ServerClock& clock) {
    m_clock = clock;
    m_started_local = LeaseClock::now();
    m_started_at = clock.at(m_started_local);
  }

  [[nodiscard]] bool finished() const { return m_finished; }

  // Writes the record of outcome `outcome` (history through `store`; the metrics file) and returns
  // `exit_code`. A null `store` means the server did not answer just now (or was never reached): the
  // history is not tried, since it would only hold up the exit (a warning says so unless the outcome is error). `ended`
  // is when the whole job ended (LeaseClock), when known. Never throws.
  int finish(LockStore* store, Outcome outcome, int exit_code, std::optional<LocalTime> ended = std::nullopt,
             int signal = 0, std::string held_by = {}) noexcept {
    if (m_finished) return exit_code;
    m_finished = true;
    try {
      write(store, outcome, exit_code, ended.value_or(LeaseClock::now()), signal, std::move(held_by));
    } catch (const std::exception& e) {
      m_log.warning(fmt::format("the run was not recorded ({})", e.what()));
    }
    return exit_code;
  }

private:
  void write(LockStore* store, Outcome outcome, int exit_code, LocalTime ended, int signal, std::string held_by) {
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
      run.held_by = held_by;
      if (const auto fence = m_fences.find(name); fence != m_fences.end()) run.fence = fence->second;
      metrics.push_back(RunMetrics{
          .name = name,
          .outcome = outcome,
          .ended_at = static_cast<double>(ended_at.time_since_epoch().count()) / 1000.0,
          .duration =
              run.duration ? std::optional<double>(static_cast<double>(run.duration->count()) / 1000.0) : std::nullopt,
          .exit_code = exit_code});
      runs.push_back(std::move(run));
    }
    if (store != nullptr && clock) {
      record_runs(*store, std::move(runs), m_options.history, ended_at, m_log);
    } else if (m_options.history.enabled && outcome != Outcome::error) {
      m_log.warning("the run was not recorded in the history: the server did not answer in time; its exit status "
                    "is unchanged");
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
  bool m_finished = false;
};

// The outcome of a run whose command ran, from how supervision ended and how the release went.
Outcome run_outcome(const RunOutcome& result, bool release_gone) {
  if (result.lease_lost || release_gone) return Outcome::lease_lost;
  if (result.timed_out) return Outcome::timeout;
  return result.command_status == 0 ? Outcome::ok : Outcome::failed;
}

} // namespace

int acquire_command(const GlobalOptions& global, const AcquireOptions& options, Log& log) {
  validate_lock_name(options.name);
  validate_ttl(options.ttl);
  validate_take(options.take);
  const auto process = caller_identity(options.process);
  // With --wait, the signals run forwards (INT, TERM, HUP, QUIT, USR1, USR2) end the wait instead of
  // killing the process: its queue ticket is deleted (not left to expire) and the exit status is
  // 128 + the signal, as for a waiting run. Blocked from here on, so none is lost in between.
  std::optional<SignalBlock> signals;
  if (options.take.wait || options.take.splay > Millis(0)) signals.emplace();
  MongoStore store(global.store, log);
  Locker locker(store, log);
  auto wait = options.take.wait;
  AcquireOutcome outcome;
  if (splay_before_acquiring(options.take.splay, {options.name}, wait, log)) {
    outcome = locker.acquire_all({make_request(global, options.take, options.name, process, options.ttl)},
                                 WaitPolicy{.wait = wait, .push = options.take.push}, sleep_unless_signalled);
  }
  if (signals) {
    if (const auto signo = take_forwarded_signal(Millis(0))) {
      log.info(fmt::format("received SIG{} while waiting for lock '{}'{}", sigabbrev_np(*signo), options.name,
                           outcome.locks.empty() ? "; left the queue" : "; releasing the lock just taken"));
      release_after_run(locker, outcome.locks, log);
      return exit_code_for_signal(*signo);
    }
  }
  if (outcome.locks.empty()) return report_held(global, locker, outcome, log);
  const auto& lock = outcome.locks.front();
  if (lock.fence) {
    fmt::print("{} {}\n", lock.token, *lock.fence);
  } else {
    fmt::print("{}\n", lock.token);
  }
  std::fflush(stdout);
  log.debugf("acquired lock '{}' as {} until {}", lock.program, lock.process, format_time(lock.expires_at));
  return k_exit_ok;
}

int release_command(const GlobalOptions& global, const ReleaseOptions& options, Log& log) {
  validate_lock_name(options.name);
  auto which = holder_selector(options.name, options.token, options.process);
  MongoStore store(global.store, log);
  Locker locker(store, log);
  const auto outcome = on_name_or_slot(
      locker, which, [&](const LockSelector& w) { return locker.release(w); },
      [](const ReleaseOutcome& o) { return o.kind != ReleaseOutcome::not_holder; });
  switch (outcome.kind) {
  case ReleaseOutcome::released:
    log.debugf("released lock '{}'", which.program);
    return k_exit_ok;
  case ReleaseOutcome::min_hold:
    log.info(fmt::format("lock '{}' released; it stays held until {} (minimum hold)", which.program,
                         format_time(outcome.hold_until)));
    return k_exit_ok;
  case ReleaseOutcome::not_holder:
    break;
  }
  refuse_not_holder(locker, options.name, options.token ? "the given token" : *which.process, "released");
}

int renew_command(const GlobalOptions& global, const RenewOptions& options, Log& log) {
  validate_lock_name(options.name);
  validate_ttl(options.ttl);
  auto which = holder_selector(options.name, options.token, options.process);
  MongoStore store(global.store, log);
  Locker locker(store, log);
  const bool mark = waiters_queued(locker, options.name, log);
  const auto expires = on_name_or_slot(
      locker, which, [&](const LockSelector& w) { return locker.renew(w, options.ttl, mark); },
      [](const std::optional<ServerTime>& e) { return e.has_value(); });
  if (!expires) {
    const auto holders = locker.holders(options.name);
    const auto now = store.clock().now();
    if (holders.size() == 1 && holders.front().expires_at <= now && !holders.front().released_at) {
      throw Error(k_exit_not_holder, fmt::format("lock '{}' expired {} ago; nothing was renewed (an expired lock "
                                                 "cannot be renewed: acquire it again)",
                                                 options.name, format_duration(now - holders.front().expires_at)));
    }
    refuse_not_holder(locker, options.name, options.token ? "the given token" : *which.process, "renewed");
  }
  log.debugf("lock '{}' renewed until {}", which.program, format_time(*expires));
  if (mark) log.debugf("marked lock '{}': waiters are queued, its release wakes them", which.program);
  return k_exit_ok;
}

namespace {

// run --once-per, decided while holding every lock of the run (so no two hosts both decide to run): when
// a run of each name succeeded (outcome ok, on any host) within `period` before now (server clock), the
// line to print ("'report' succeeded on web1 3h12m ago (--once-per 23h); not run", naming the name whose
// last success is oldest); nullopt when the command is due. One find per name on the runs collection
// (at most the history's runs of the period). Throws Error (69) when the server fails: the caller
// releases the locks.
std::optional<std::string> succeeded_within(LockStore& store, const std::vector<LockRecord>& locks, Millis period) {
  const auto now = store.clock().now();
  std::optional<RunRecord> oldest;
  for (const auto& lock : locks) {
    std::optional<RunRecord> newest;
    for (auto& run : store.runs(lock.name, now - period, k_max_history_keep)) {
      if (run.outcome == outcome_name(Outcome::ok)) {
        newest = std::move(run);
        break; // newest first
      }
    }
    if (!newest) return std::nullopt;
    if (!oldest || newest->ended_at < oldest->ended_at) oldest = std::move(newest);
  }
  return fmt::format("'{}' succeeded on {} {} ago (--once-per {}); not run", printable(oldest->name),
                     printable(oldest->host), format_duration(std::max(Millis(0), now - oldest->ended_at)),
                     format_duration(period));
}

// run_command() after the options were checked: every way out goes through `recorder`.
int run_checked(const GlobalOptions& global, const RunOptions& options, const std::vector<std::string>& names,
                const RunPolicy& policy, const SignalBlock& signals, RunRecorder& recorder, Log& log) {
  auto config = global.store;
  // Each command must give up well within the renewal deadline so the heartbeat can retry.
  config.operation_timeout = std::clamp(policy.lease.renew_interval, Millis(1000), config.operation_timeout);
  // No periodic server checks: every renewal connects afresh, and its handshake re-reads the server's time
  // (so a clock estimate made stale by a paused VM is corrected at the next renewal); a check due between
  // the handshake and the renewal would only add a round trip that could outlast the renew deadline.
  MongoStore store(config, log);
  Locker locker(store, log);
  // Where this holder runs, and its holder file (locked while mongolock or its guardian lives): a run on
  // this host may then take the lock over at once when both are gone (liveness.hpp).
  const auto self = own_process_identity();
  const HolderFile holder_file(self);
  std::vector<AcquireRequest> requests;
  for (const auto& name : names) {
    auto request = make_request(global, options.take, name, holder_identity(getpid()), options.ttl);
    if (holder_file.locked()) {
      request.boot_id = self.boot_id;
      request.pid_ns = self.pid_ns;
      request.pid_start = self.pid_start;
    }
    request.command = printable(command_name(options.command.front())); // shown by status and list
    requests.push_back(std::move(request));
  }
  auto wait = options.take.wait;
  AcquireOutcome outcome;
  if (splay_before_acquiring(options.take.splay, names, wait, log)) {
    outcome = locker.acquire_all(requests, WaitPolicy{.wait = wait, .push = options.take.push}, sleep_unless_signalled);
  } else {
    outcome.interrupted = true;
  }
  if (outcome.locks.empty() && !outcome.interrupted) {
    std::string held_by;
    const auto code = report_held(global, locker, outcome, log, &held_by);
    return recorder.finish(&store, Outcome::skipped, code, std::nullopt, 0, held_by);
  }
  auto& locks = outcome.locks;
  if (!locks.empty()) recorder.acquired(locks);
  for (const auto& lock : locks) {
    log.debugf("acquired lock '{}' as {} until {}", lock.program, lock.process, format_time(lock.expires_at));
  }

  if (const auto signo = take_forwarded_signal(Millis(0))) {
    log.info(fmt::format("received SIG{} before the command started{}", sigabbrev_np(*signo),
                         locks.empty() ? "" : "; releasing the lock"));
    release_after_run(locker, locks, log);
    // Interrupted while waiting for a held lock: skipped; after taking it: the run failed to start.
    return recorder.finish(&store, locks.empty() ? Outcome::skipped : Outcome::failed, exit_code_for_signal(*signo),
                           std::nullopt, *signo);
  }

  if (options.once_per) {
    std::optional<std::string> done;
    try {
      done = succeeded_within(store, locks, *options.once_per);
    } catch (const Error&) {
      release_after_run(locker, locks, log); // nothing ran: give the locks back, then fail (69)
      throw;
    }
    if (done) {
      log.info(*done);
      release_after_run(locker, locks, log);
      return recorder.finish(&store, Outcome::not_due, k_exit_ok);
    }
  }

  // Every MONGOLOCK_* variable describes this run: stale ones inherited from an outer run are replaced or
  // removed.
  std::vector<std::pair<std::string, std::string>> env{
      {"MONGOLOCK_NAME", join(locks, [](const LockRecord& l) { return l.name; })},
      {"MONGOLOCK_TOKEN", join(locks, [](const LockRecord& l) { return l.token; })},
      {"MONGOLOCK_PROCESS", locks.front().process},
      {"MONGOLOCK_HOLDER", locks.front().process},
      {"MONGOLOCK_RUN_ID", options.history.enabled ? recorder.run_id(locks) : std::string()}};
  const auto fences = join(locks, [](const LockRecord& l) { return l.fence ? fmt::format("{}", *l.fence) : ""; });
  const auto slots = join(locks, [](const LockRecord& l) { return l.slot > 0 ? fmt::format("{}", l.slot) : ""; });
  env.emplace_back("MONGOLOCK_FENCE", options.take.fence ? fences : std::string());
  env.emplace_back("MONGOLOCK_SLOT", options.take.slots > 1 ? slots : std::string());
  ChildSpec spec;
  spec.argv = options.command;
  spec.env = std::move(env);
  spec.signal_mask = signals.previous();
  // No job after the lease: the renew deadline of the first acquisition bounds the start (checked here,
  // by the guardian before it forks, and by the command's process before exec), whatever --on-lost says.
  spec.start_by = lease_deadline(store, locks, policy.lease);
  spec.no_new_privs = options.no_new_privs;
  spec.orphan_request = encode_orphan_request(
      OrphanRequest{.store = config, .locks = locks, .holder_pid = getpid(), .holder_start = self.pid_start});
  if (policy.on_lost != OnLost::ignore) {
    // The guardian's watchdog: armed from the start with the acquisition's deadline.
    spec.deadline = spec.start_by;
    spec.kill_grace = policy.on_lost == OnLost::term ? policy.lease.kill_grace : Millis(0);
  }
  if (const auto now = LeaseClock::now(); now >= *spec.start_by) {
    log.error(fmt::format(
        "lease on {} ended before the command could start: acquiring took {}, past the renew "
        "deadline of {} (mongolock stopped or starved, or the server slow); not started",
        quoted_programs(locks),
        format_duration(std::chrono::duration_cast<Millis>(now - *spec.start_by + policy.lease.renew_deadline)),
        format_duration(policy.lease.renew_deadline)));
    release_after_run(locker, locks, log, /*lease_lost=*/true);
    return recorder.finish(&store, Outcome::lease_lost, options.lost_exit_code);
  }
  std::optional<Child> child;
  try {
    const auto clock = store.clock();
    child.emplace(Child::spawn(spec));
    recorder.started(clock);
  } catch (const Error& e) {
    release_after_run(locker, locks, log, /*lease_lost=*/e.exit_code() == k_exit_lease_lost);
    if (e.exit_code() == k_exit_cannot_execute || e.exit_code() == k_exit_not_found) {
      recorder.finish(&store, Outcome::not_executable, e.exit_code());
    } else if (e.exit_code() == k_exit_lease_lost) {
      // Not started: the lease had ended. Said once, with --lost-exit-code's status.
      log.error(e.what());
      return recorder.finish(&store, Outcome::lease_lost, options.lost_exit_code);
    }
    throw;
  }
  log.debugf("started {} (pid {})", options.command.front(), child->pid());
  // Taken from the queue: its tickets are deleted now that the command runs, not in the handover.
  outcome.leave_queue();
  const auto result = supervise(locker, locks, *child, signals, policy, log);
  const auto ended = child->job_ended();
  log.debugf("command exited with status {}", result.command_status);
  // The heartbeat left its call deadline (or a failed client): the release gets the configured timeouts,
  // on the same connection unless a call failed.
  store.reconnect(std::nullopt);

  if (result.lease_lost) {
    // The job has ended (or, with --on-lost ignore, ran to its end): give back the locks still held
    // (another name of a multi-name run; the lost one is normally gone). Releases name the _id and token,
    // so they never touch another holder's lock. When the lease ran out (the server did not answer in
    // time, or mongolock did not run), trying would only delay the exit: the leases end on their own.
    if (result.stalled) {
      log.info("not releasing: the lease ran out while mongolock did not run; the leases end on their own");
    } else if (result.ran_out) {
      log.info("not releasing: no renewal succeeded in time; the leases end on their own");
    } else {
      release_after_run(locker, locks, log, /*lease_lost=*/true);
    }
    const auto code = policy.on_lost == OnLost::ignore ? result.command_status : options.lost_exit_code;
    // A server that did not answer the renewals gets no history insert either: it would delay the exit.
    // (When mongolock itself did not run, the server is likely fine: the insert is tried.)
    const bool server_silent = result.ran_out && !result.stalled;
    return recorder.finish(server_silent ? nullptr : &store, Outcome::lease_lost, code, ended, result.command_signal);
  }
  const auto released = release_after_run(locker, locks, log);
  const auto what = run_outcome(result, released == RunRelease::gone);
  auto code = result.command_status;
  if (result.timed_out) {
    code = k_exit_timeout;
  } else if (result.command_status == 0 && released == RunRelease::gone) {
    // A command that succeeded is not reported as a success when its lock was not held to the end (76) or
    // could not be given back (69); a failing command's own status says more.
    code = options.lost_exit_code;
  } else if (result.command_status == 0 && released == RunRelease::failed) {
    code = k_exit_unavailable;
  }
  return recorder.finish(released == RunRelease::failed ? nullptr : &store, what, code, ended, result.command_signal);
}

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
  const RunPolicy policy{
      make_lease_timing(options.ttl, options.kill_grace, options.renew_interval, options.renew_deadline),
      options.on_lost, options.timeout, options.kill_after};

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
    return run_checked(global, options, names, policy, signals, recorder, log);
  } catch (const Error& e) {
    // MongoDB unavailable, an internal error: nothing can be stored, but the metrics file counts it.
    if (!recorder.finished()) recorder.finish(nullptr, Outcome::error, e.exit_code());
    throw;
  }
}

int status_command(const GlobalOptions& global, const StatusOptions& options, Log& log) {
  validate_lock_name(options.name);
  MongoStore store(global.store, log);
  Locker locker(store, log);
  const auto locks = views(locker, locker.holders(options.name));
  const auto now = store.clock().now();
  const auto waiters = live_waiters(store.tickets({options.name}), now);
  const auto runs = store.runs(options.name, std::nullopt, 1);
  const auto last_run = runs.empty() ? std::nullopt : std::optional<RunRecord>(runs.front());
  fmt::print("{}", options.json ? status_json(options.name, locks, waiters, last_run)
                                : status_text(options.name, locks, waiters, now, last_run));
  const bool held = std::any_of(locks.begin(), locks.end(), is_live);
  return held ? k_exit_ok : k_exit_not_held;
}

int list_command(const GlobalOptions& global, const ListOptions& options, Log& log) {
  MongoStore store(global.store, log);
  Locker locker(store, log);
  auto locks = views(locker, store.list());
  std::erase_if(locks, [](const LockView& v) { return !is_live(v); });
  if (options.names) {
    std::set<std::string> names;
    for (const auto& view : locks)
      names.insert(view.lock.name);
    for (const auto& name : names)
      fmt::print("{}\n", printable(name));
    return k_exit_ok;
  }
  const auto now = store.clock().now();
  auto tickets = store.tickets({});
  std::stable_sort(tickets.begin(), tickets.end(),
                   [](const TicketRecord& a, const TicketRecord& b) { return a.name < b.name; });
  const auto waiters = live_waiters(tickets, now);
  LastRuns last_runs;
  for (const auto& view : locks) {
    if (last_runs.contains(view.lock.name)) continue;
    auto runs = store.runs(view.lock.name, std::nullopt, 1);
    if (!runs.empty()) last_runs.emplace(view.lock.name, std::move(runs.front()));
  }
  fmt::print("{}", options.json ? list_json(locks, waiters, last_runs) : list_text(locks, waiters, now, last_runs));
  return k_exit_ok;
}

int break_command(const GlobalOptions& global, const BreakOptions& options, Log& log) {
  validate_lock_name(options.name);
  if (!options.force) {
    throw usage_error(
        fmt::format("break removes lock '{}' whoever holds it; add --force if that is what you mean", options.name));
  }
  MongoStore store(global.store, log);
  Locker locker(store, log);
  const auto by = fmt::format("{}@{}", user_name(), holder_identity(getpid()));
  int broken = 0;
  for (const auto& lock : locker.holders(options.name)) {
    const auto description = locker.describe_holder(lock);
    // As a release: waiters queued for it are woken.
    if (!locker.remove_and_wake(LockSelector{.program = lock.program, .id = lock.id})) continue;
    ++broken;
    const auto message = fmt::format("broke lock '{}' ({}), by {}", lock.program, description, by);
    log.warning(message);
    openlog("mongolock", LOG_PID, LOG_USER);
    syslog(LOG_NOTICE, "%s", message.c_str());
    closelog();
  }
  if (broken == 0)
    throw Error(k_exit_not_holder, fmt::format("lock '{}' is not held; nothing was broken", options.name));
  return k_exit_ok;
}

// True when `address` ("host:port", "[v6]:port") names this host: localhost, 127.0.0.0/8 or ::1.
bool is_loopback_address(std::string_view address) {
  std::string_view host = address;
  if (host.starts_with('[')) {
    host = host.substr(1, host.find(']') - 1);
  } else if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  return host == "localhost" || host.starts_with("127.") || host == "::1";
}

int doctor_command(const GlobalOptions& global, Log& log) {
  MongoStore store(global.store, log);
  fmt::print("uri: {}\n", redact_uri(global.store.uri));
  const auto& clock = store.clock();
  const auto info = store.server_info();
  fmt::print("server: {} (version {}, wire version {})\n", info.address, info.version, info.max_wire_version);
  if (info.tls) {
    fmt::print("tls: on (CA file {}{})\n", info.tls_ca_file.empty() ? "none: the system's CAs" : info.tls_ca_file,
               info.tls_certificate.empty() ? "" : fmt::format(", client certificate {}", info.tls_certificate));
  } else {
    fmt::print("tls: off\n");
    if (!is_loopback_address(info.address)) {
      log.warning(fmt::format("TLS is off towards {}, which is not this host: the password and the lock documents "
                              "cross the network in clear text (add tls=true to the URI)",
                              info.address));
    }
  }
  if (info.mechanism.empty()) {
    fmt::print("authentication: none\n");
  } else {
    fmt::print("authentication: {} ({})\n", info.user.empty() ? "no user confirmed by the server" : info.user,
               info.mechanism);
  }
  fmt::print("round trip: {}\n", format_duration(clock.round_trip()));
  const auto offset = clock.offset_from_local_wall_clock();
  fmt::print("clock offset: the server's clock is {} {} this host's (mongolock uses the server's)\n",
             format_duration(offset < Millis(0) ? -offset : offset), offset < Millis(0) ? "behind" : "ahead of");
  fmt::print("collection: {}.{}\n", global.store.database, global.store.collection);
  const bool indexed = store.has_unique_index();
  fmt::print("unique index program_1: {}\n",
             indexed ? "present" : "missing (created by the next acquire, or run 'mongolock init')");

  // Write access: insert and delete a probe document whose program no lock can have ('#' is reserved).
  LockRecord probe;
  probe.program = fmt::format("#doctor-{}", make_token());
  probe.name = probe.program;
  probe.process = holder_identity(getpid());
  probe.token = make_token();
  probe.acquired_at = probe.renewed_at = clock.now();
  probe.expires_at = probe.acquired_at + Millis(60'000);
  probe.ttl = Millis(60'000);
  probe.user = user_name();
  probe.host = host_name();
  if (!store.insert(probe) || store.remove(LockSelector{.program = probe.program, .id = probe.id}) != 1) {
    throw unavailable_error("write check failed: the probe document could not be written and removed");
  }
  fmt::print("write access: ok (inserted and removed a probe document with write concern majority)\n");
  log.debugf("doctor finished");
  return k_exit_ok;
}

int history_command(const GlobalOptions& global, const HistoryOptions& options, Log& log) {
  if (options.name) validate_lock_name(*options.name);
  if (options.limit < 1 || options.limit > k_max_history_keep) {
    throw usage_error(fmt::format("--limit {} is out of range; give 1 to {}", options.limit, k_max_history_keep));
  }
  MongoStore store(global.store, log);
  const auto now = store.clock().now();
  const auto since = options.since ? std::optional<ServerTime>(now - *options.since) : std::nullopt;
  const auto runs = store.runs(options.name, since, options.limit);
  fmt::print("{}", options.json ? history_json(runs) : history_text(runs, options.name, now));
  return k_exit_ok;
}

int init_command(const GlobalOptions& global, const InitOptions& options, Log& log) {
  MongoStore store(global.store, log);
  store.ensure_indexes();
  fmt::print("unique index program_1 on {}.{}: ok\n", global.store.database, global.store.collection);
  const auto ttl_error = store.create_ttl_index(k_gc_expire_after);
  if (ttl_error.empty()) {
    fmt::print("TTL index expires_at_ttl: ok (deletes lock documents {} after they expire; garbage collection only)\n",
               format_duration(k_gc_expire_after));
  } else {
    fmt::print("TTL index expires_at_ttl: not supported by this server ({}); expired locks are purged by the next "
               "acquire of their name, which is all the protocol needs\n",
               ttl_error);
  }
  const auto runs_ttl_error = store.create_runs_ttl_index(options.history_max_age);
  if (runs_ttl_error.empty()) {
    fmt::print("TTL index ended_at_ttl on the run history: ok (deletes runs {} after they ended)\n",
               format_duration(options.history_max_age));
  } else {
    fmt::print("TTL index ended_at_ttl on the run history: not created ({}); runs are purged by the runs that "
               "write them (--history-keep, --history-max-age)\n",
               runs_ttl_error);
  }
  return k_exit_ok;
}

} // namespace mongolock
