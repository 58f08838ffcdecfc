#include <mongolock/command_support.hpp>
#include <mongolock/commands.hpp>
#include <mongolock/error.hpp>
#include <mongolock/identity.hpp>
#include <mongolock/liveness.hpp>
#include <mongolock/lock_name.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/report.hpp>
#include <mongolock/text.hpp>
#include <mongolock/token.hpp>
#include <mongolock/uri.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>
#include <syslog.h>
#include <thread>
#include <unistd.h>
#include <utility>

namespace mongolock {

namespace {

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

// Where that holder runs (issue 26 item 7): the calling process's boot, PID namespace and start, recorded by
// acquire and required by release and renew (lock_store.hpp place_matches()); none with --process, which
// names a holder explicitly and matches by that name alone.
std::optional<HolderPlace> caller_place(const std::optional<std::string>& override_process) {
  if (override_process) return std::nullopt;
  return process_place(getppid());
}

void validate_token(const std::optional<std::string>& token) {
  if (token && !is_valid_token(*token)) {
    throw usage_error(
        fmt::format("--token '{}' is not a mongolock token (32 hex digits, as printed by acquire)", *token));
  }
}

std::vector<LockView> views(Locker& locker, std::vector<LockRecord> locks) {
  const auto now = locker.store().clock().now();
  const auto here = own_process_identity();
  std::vector<LockView> out;
  for (auto& lock : locks) {
    // host:pid is not unique: a run that recorded another boot or PID namespace (a container that shares
    // this host name) is not this host's process of that pid (issue 26 item 7): not known here.
    // A document without pid_ns (before issue 26, --process) is judged only from the initial namespace, as
    // before: seen from a container it may be any namespace's process (red team X2). An unknown start is
    // no start.
    const bool elsewhere = (!lock.boot_id.empty() && lock.boot_id != here.boot_id) ||
                           (!lock.pid_ns.empty() && lock.pid_ns != here.pid_ns) ||
                           (lock.pid_ns.empty() && here.pid_ns != k_initial_pid_ns);
    const auto start = lock.pid_start.value_or(0) > 0 ? lock.pid_start : std::nullopt;
    auto alive = elsewhere ? std::nullopt : holder_alive_here(lock.process, start);
    out.push_back(LockView{std::move(lock), now, alive});
  }
  return out;
}

// Which lock `release`/`renew` act on: by --token when given (checked), else by holder (--process, or
// the calling shell).
LockSelector holder_selector(const std::string& name, const std::optional<std::string>& token,
                             const std::optional<std::string>& process) {
  validate_token(token);
  if (token) return LockSelector{.program = name, .token = token};
  return LockSelector{.program = name, .process = caller_identity(process), .place = caller_place(process)};
}

// Whether `lock` is the one `which` names by token or by holder (its process and place).
bool named_by(const LockSelector& which, const LockRecord& lock) {
  if (which.token) return lock.token == *which.token;
  return which.process && lock.process == *which.process && (!which.place || place_matches(lock, *which.place));
}

// Runs `attempt` on the plain name; when that `matched` nothing, on the semaphore slot ("NAME#K") that
// the same token or holder has, if any (updating which.program). Returns the last attempt's result.
template <typename Attempt, typename Matched>
auto on_name_or_slot(Locker& locker, LockSelector& which, const Attempt& attempt, const Matched& matched) {
  auto result = attempt(which);
  if (matched(result)) return result;
  for (const auto& lock : locker.holders(which.program)) {
    if (lock.program == which.program) continue; // the plain name was tried already
    if (named_by(which, lock)) {
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

constexpr std::string_view k_given_token = "the given token"; // refuse_not_holder()'s as_whom with --token

// Who a release or renew was for, for refuse_not_holder(): the given token, or the holder as people read it
// (holder_label(): "vm:1 (pid ns 4026532301)" where the caller is in a container's PID namespace).
std::string caller_label(const LockSelector& which) {
  if (which.token) return std::string(k_given_token);
  return holder_label(which.process.value_or(""), which.place ? which.place->pid_ns : std::string());
}

// Why `lock`, whose process is the caller's own host:pid, is not the caller at `place` (place_matches()
// failed): the first recorded field that differs, in words (red team X4: not "name the holder with
// --process", which would free another's lock).
std::string place_difference(const LockRecord& lock, const HolderPlace& place) {
  if (lock.boot_id == k_unknown_place || lock.pid_ns == k_unknown_place) {
    return "a place its acquire could not read (boot or PID namespace unknown), which only its --token names";
  }
  if (!lock.boot_id.empty() && lock.boot_id != place.boot_id) return "another boot of this host";
  if (!lock.pid_ns.empty() && lock.pid_ns != place.pid_ns) {
    return "another PID namespace (another container, or the host's)";
  }
  if (lock.pid_start == k_unknown_start) return "a process whose start could not be read (and this caller's can)";
  return "a process that started at another time (an earlier process of this pid)";
}

// Refuses a release or renew: says who holds the lock instead, if anyone. Exit 65 when another holder holds
// it (or, without --token, nobody does); 66 when the given token's lock is not held any more (released, or
// expired) and no other holder holds the name: a retry after a release whose reply was lost (issue 27). `found`:
// the _id of the acquisition a release by holder found and acted on (ReleaseOutcome::found), when another
// acquisition of the same holder holds the name now.
[[noreturn]] void refuse_not_holder(Locker& locker, const std::string& name, const LockSelector& which,
                                    std::string_view what, const std::string& found = {}) {
  const auto as_whom = caller_label(which);
  const auto holders = locker.holders(name);
  const bool by_token = as_whom == k_given_token;
  if (holders.empty() && by_token) {
    throw Error(k_exit_token_gone, fmt::format("lock '{}' is not held any more by the given token (released, or "
                                               "expired) and nobody holds it; nothing was {}",
                                               name, what));
  }
  if (holders.empty()) throw Error(k_exit_not_holder, fmt::format("lock '{}' is not held; nothing was {}", name, what));
  if (holders.size() == 1 && holders.front().released_at) {
    throw Error(by_token ? k_exit_token_gone : k_exit_not_holder,
                fmt::format("lock '{}' was already released at {}; it is kept until {} for its minimum hold; nothing "
                            "was {}",
                            name, format_time(*holders.front().released_at), format_time(holders.front().expires_at),
                            what));
  }
  const auto& holder = holders.front();
  if (!found.empty() && holders.size() == 1 && holder.id != found && named_by(which, holder)) {
    // By holder, the same holder holds it again: the acquisition this command found was released or had
    // expired before its write landed, and a later one of that holder is not what it acted on (Locker::release).
    throw Error(k_exit_not_holder,
                fmt::format("lock '{}' is {}: a later acquisition by {} than the one this command found, which was "
                            "released or expired meanwhile; nothing was {} (run it again to act on this one)",
                            name, locker.describe_holder(holder), as_whom, what));
  }
  if (!which.token && which.place && which.process && holder.process == *which.process) {
    throw Error(k_exit_not_holder,
                fmt::format("lock '{}' is {}: the same host:pid as this caller, but {}; it is not this caller's "
                            "lock, nothing was {} (its holder releases it, or names it with --token)",
                            name, locker.describe_holder(holder), place_difference(holder, *which.place), what));
  }
  throw Error(k_exit_not_holder,
              fmt::format("lock '{}' is {}, not by {}; nothing was {} (name the holder with --token or --process)",
                          name, locker.describe_holder(holder), as_whom, what));
}

// acquire's request: the holder `process` at `place` (recorded in the document, none with --process), and
// the hooks of its own orphans.
AcquireRequest acquire_request(const GlobalOptions& global, const AcquireOptions& options, const std::string& process,
                               const std::optional<HolderPlace>& place) {
  auto request = make_request(global, options.take, options.name, process, options.ttl);
  if (place) {
    request.boot_id = place->boot_id;
    request.pid_ns = place->pid_ns;
    request.pid_start = place->pid_start;
  }
  if (place && place->pid_start.value_or(0) > 0) {
    // The caller's own orphan, from an earlier acquire whose reply was lost (identity.hpp; issue 27 item 4).
    request.orphaned = [caller = getppid(), start = *place->pid_start](const LockRecord& lock) {
      note_own_orphan(caller, start, lock);
    };
    request.own_orphan = [caller = getppid(), start = *place->pid_start](const LockRecord& lock) {
      return noted_own_orphan(caller, start, lock);
    };
  }
  return request;
}

} // namespace

int acquire_command(const GlobalOptions& global, const AcquireOptions& options, Log& log) {
  validate_lock_name(options.name);
  validate_ttl(options.ttl);
  validate_take(options.take);
  const auto process = caller_identity(options.process);
  const auto place = caller_place(options.process);
  if (place && (place->pid_ns == k_unknown_place || place->boot_id == k_unknown_place)) {
    log.debugf("this caller's boot id or PID namespace cannot be read (/proc is not this PID namespace's): it is "
               "recorded as unknown, and only --token (or --process) releases or renews this lock");
  } else if (place && place->pid_start == k_unknown_start) {
    log.debugf("this caller's start cannot be read (/proc/{}/stat: hidepid, or another user): it is recorded as "
               "unknown (-1), which only a caller whose start cannot be read either matches",
               getppid());
  }
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
    const auto request = acquire_request(global, options, process, place);
    outcome =
        locker.acquire_all({request}, WaitPolicy{.wait = wait, .push = options.take.push}, sleep_unless_signalled);
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

namespace {

// The position of `value` among the newline-separated lines of the environment variable `variable`.
std::optional<std::size_t> env_line(const char* variable, const std::string& value) {
  const char* text = std::getenv(variable);
  if (text == nullptr || value.empty()) return std::nullopt;
  std::string_view rest(text);
  for (std::size_t i = 0; !rest.empty(); ++i) {
    const auto end = rest.find('\n');
    if (rest.substr(0, end) == value) return i;
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return std::nullopt;
}

// True when this process runs inside the command of the `run` that holds `name` and is selected by
// --token/--process, as the environment `run` gives its command says (MONGOLOCK_NAME, MONGOLOCK_TOKEN on the
// same line, or MONGOLOCK_HOLDER; see ENVIRONMENT). held_by_own_run() asks the process tree.
bool inside_own_run(const std::string& name, const std::optional<std::string>& token,
                    const std::optional<std::string>& process) {
  const auto line = env_line("MONGOLOCK_NAME", name);
  if (!line) return false;
  return (token && env_line("MONGOLOCK_TOKEN", *token) == line) ||
         (process && env_line("MONGOLOCK_HOLDER", *process).has_value());
}

// Whether a lock that `which` selects is held by a mongolock run this process runs inside (its command, or a
// process started from it, whatever the environment: env -i, su -, a nested run; red team 6, F2): `held`;
// `unknown` when no such run was found but the search for its job cgroup through a cgroup namespace stopped
// at its bound while a run of this boot holds such a lock (red team 9, F1); else `none`. The process tree and
// its cgroup are read first, so a caller outside any run costs the server nothing.
enum class OwnRun { none, held, unknown };

OwnRun own_run_holding(Locker& locker, const LockSelector& which, const Log& log) {
  const auto runs = enclosing_runs();
  bool complete = true;
  const auto groups = enclosing_job_cgroups(&complete); // red team 7, F1: through a PID, mount or UTS namespace too
  if (runs.empty() && groups.empty() && complete) return OwnRun::none;
  const auto host = host_name();
  auto found = OwnRun::none;
  for (const auto& lock : locker.holders(which.program)) {
    if (!named_by(which, lock)) continue;
    if (held_by_enclosing_run(lock, runs, host) || held_by_enclosing_job_cgroup(lock, groups)) return OwnRun::held;
    if (!complete && run_lock_of_this_boot(lock)) found = OwnRun::unknown;
  }
  if (found == OwnRun::unknown) {
    log.debugf("lock '{}' is held by a run of this boot, and the search of the cgroup2 hierarchy for this "
               "process's job cgroup (it is in a cgroup namespace) stopped at its bound of 20,000 groups",
               which.program);
  }
  return found;
}

bool held_by_own_run(Locker& locker, const LockSelector& which, const Log& log) {
  return own_run_holding(locker, which, log) == OwnRun::held;
}

[[noreturn]] void refuse_own_release(const std::string& name) {
  // Freed while the command still runs, the lock would let another run start beside it.
  throw usage_error(fmt::format("lock '{}' is held by the mongolock run whose command this is; it is released "
                                "when the command ends: exit the command instead of releasing its lock",
                                name));
}

// Act on proof: a release that might be the job's own (red team 9, F1) is refused like one that is.
[[noreturn]] void refuse_unproven_release(const std::string& name) {
  throw usage_error(fmt::format("lock '{}' is held by a mongolock run on this host, and this process may be part of "
                                "its command: in a cgroup namespace, the search for its cgroup stopped after 20,000 "
                                "groups; release it from outside the namespace, or stop the run",
                                name));
}

} // namespace

int release_command(const GlobalOptions& global, const ReleaseOptions& options, Log& log) {
  validate_lock_name(options.name);
  if (inside_own_run(options.name, options.token, options.process)) refuse_own_release(options.name);
  auto which = holder_selector(options.name, options.token, options.process);
  MongoStore store(global.store, log);
  Locker locker(store, log);
  switch (own_run_holding(locker, which, log)) {
  case OwnRun::held:
    refuse_own_release(options.name);
  case OwnRun::unknown:
    refuse_unproven_release(options.name);
  case OwnRun::none:
    break;
  }
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
  refuse_not_holder(locker, options.name, which, "released", outcome.found);
}

// The TTL a renew without --ttl gives: the selected holder's own (its ttl_ms, on the name or a slot of it),
// so that renewing a lock taken with --ttl 1h does not shorten it; the default when there is no such holder
// (the renewal then matches nothing and says why).
Millis own_ttl(Locker& locker, const LockSelector& which) {
  for (const auto& lock : locker.holders(which.program)) {
    if (named_by(which, lock) && lock.ttl > Millis(0)) return lock.ttl;
  }
  return k_default_acquire_ttl;
}

// The lease length of the mongolock run holding the lock `which` selects, when a run holds it: its run_ttl_ms
// (ttl_ms for a run's document written before run_ttl_ms existed); none for acquire's locks.
std::optional<std::pair<Millis, std::string>> run_lease(Locker& locker, const LockSelector& which) {
  for (const auto& lock : locker.holders(which.program)) {
    if (!named_by(which, lock) || lock.command.empty()) continue;
    return std::pair{lock.run_ttl > Millis(0) ? lock.run_ttl : lock.ttl, lock.process};
  }
  return std::nullopt;
}

// A `renew --ttl` shorter than the run's own lease, of a run's lock, whoever calls: the run counts its lease
// from its own renewals, so a shorter one on the server would let another run start while its command runs
// (red team 8 F1: from outside the run, by --process or --token; red team 6 F2: from its command).
void refuse_shorter_than_run(Locker& locker, const LockSelector& which, const RenewOptions& options, Millis ttl,
                             const Log& log) {
  const auto run = run_lease(locker, which);
  if (!run || ttl >= run->first) return;
  if (inside_own_run(options.name, options.token, options.process) || held_by_own_run(locker, which, log)) {
    throw usage_error(fmt::format("--ttl {} is shorter than the TTL of the mongolock run whose command this is ({}); "
                                  "its lease would end on the server before the run stops the command: give at "
                                  "least {} or leave --ttl out",
                                  format_duration(ttl), format_duration(run->first), format_duration(run->first)));
  }
  throw usage_error(fmt::format("--ttl {} is shorter than the TTL ({}) of the mongolock run holding lock '{}' ({}); "
                                "the run counts its lease from its own renewals, so the lease would end on the "
                                "server while its command runs: give at least {} or leave --ttl out",
                                format_duration(ttl), format_duration(run->first), options.name, printable(run->second),
                                format_duration(run->first)));
}

int renew_command(const GlobalOptions& global, const RenewOptions& options, Log& log) {
  validate_lock_name(options.name);
  if (options.ttl) validate_ttl(*options.ttl);
  auto which = holder_selector(options.name, options.token, options.process);
  MongoStore store(global.store, log);
  Locker locker(store, log);
  const bool mark = waiters_queued(locker, options.name, log);
  const auto ttl = options.ttl ? *options.ttl : own_ttl(locker, which);
  if (options.ttl) refuse_shorter_than_run(locker, which, options, ttl, log);
  const auto expires = on_name_or_slot(
      locker, which, [&](const LockSelector& w) { return locker.renew(w, ttl, mark); },
      [](const std::optional<ServerTime>& e) { return e.has_value(); });
  if (!expires) {
    const auto holders = locker.holders(options.name);
    const auto now = store.clock().now();
    if (holders.size() == 1 && holders.front().expires_at <= now && !holders.front().released_at) {
      // Expired: by --token, that token's lock is not held any more (66); by identity, 65 as before.
      throw Error(options.token ? k_exit_token_gone : k_exit_not_holder,
                  fmt::format("lock '{}' expired {} ago; nothing was renewed (an expired lock "
                              "cannot be renewed: acquire it again)",
                              options.name, format_duration(now - holders.front().expires_at)));
    }
    refuse_not_holder(locker, options.name, which, "renewed");
  }
  log.debugf("lock '{}' renewed until {}", which.program, format_time(*expires));
  if (mark) log.debugf("marked lock '{}': waiters are queued, its release wakes them", which.program);
  return k_exit_ok;
}

int status_command(const GlobalOptions& global, const StatusOptions& options, Log& log) {
  validate_lock_name(options.name);
  MongoStore store(global.store, log);
  Locker locker(store, log);
  const auto locks = views(locker, locker.holders(options.name));
  const auto now = store.clock().now();
  const auto waiters = live_waiters(store.tickets({options.name}), now);
  const auto runs = store.runs_of_kind(options.name, std::nullopt, 1, RunKind::executed);
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
  // Every held name's last run: its summary and the runs since (two finds, and one update when a run
  // ended since the last list): 4 or 5 commands in all, for any number of locks.
  std::set<std::string> held;
  for (const auto& view : locks)
    held.insert(view.lock.name);
  LastRuns last_runs;
  for (auto& run : mongolock::last_runs(store, {held.begin(), held.end()}, log))
    last_runs.emplace(run.name, std::move(run));
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
  std::string refusal; // the first index the commands refuse: doctor fails with it, after the write check
  for (const auto& index : store.index_states()) {
    switch (index.state) {
    case MongoStore::IndexState::present:
      fmt::print("unique index {}: present\n", index.name);
      break;
    case MongoStore::IndexState::missing:
      fmt::print("unique index {}: missing (created by {})\n", index.name,
                 index.name == "program_1"      ? "the next acquire, or run 'mongolock init'"
                 : index.name == "name_1_seq_1" ? "the first waiter, --wait"
                                                : "the first --fence");
      break;
    case MongoStore::IndexState::unknown:
      fmt::print("unique index {}: unknown (listIndexes not authorized)\n", index.name);
      break;
    case MongoStore::IndexState::refused:
      fmt::print("unique index {}: refused (the commands that need it fail with 69 until it is dropped)\n", index.name);
      if (refusal.empty()) refusal = index.refusal;
      break;
    }
  }

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
  if (!refusal.empty()) {
    std::fflush(stdout);
    throw unavailable_error(refusal);
  }
  log.debugf("doctor finished");
  return k_exit_ok;
}

namespace {

// The rows `history` prints: every record one by one (--skipped), or the executed runs with the skipped
// attempts folded in (two finds: the runs, then the attempts since the oldest of them started).
std::vector<HistoryRow> history_rows(RunStore& store, const HistoryOptions& options, std::optional<ServerTime> since) {
  if (options.skipped) return one_row_each(store.runs_of_kind(options.name, since, options.limit, RunKind::all));
  const auto executed = store.runs_of_kind(options.name, since, options.limit, RunKind::executed);
  // When the limit cut the executed runs, attempts older than the oldest listed run's start belong to runs
  // not listed: not read.
  auto attempts_since = since;
  if (std::cmp_equal(executed.size(), options.limit)) {
    const auto& oldest = executed.back();
    attempts_since = std::max(since.value_or(ServerTime{}), oldest.started_at.value_or(oldest.ended_at));
  }
  const auto attempts = store.runs_of_kind(options.name, attempts_since, k_max_history_keep, RunKind::attempts);
  return fold_history(executed, attempts, static_cast<std::size_t>(options.limit));
}

} // namespace

int history_command(const GlobalOptions& global, const HistoryOptions& options, Log& log) {
  if (options.name) validate_lock_name(*options.name);
  if (options.limit < 1 || options.limit > k_max_history_keep) {
    throw usage_error(fmt::format("--limit {} is out of range; give 1 to {}", options.limit, k_max_history_keep));
  }
  MongoStore store(global.store, log);
  const auto now = store.clock().now();
  const auto since = options.since ? std::optional<ServerTime>(now - *options.since) : std::nullopt;
  const auto rows = history_rows(store, options, since);
  fmt::print("{}", options.json ? history_json(rows) : history_text(rows, options.name, now));
  return k_exit_ok;
}

int check_command(const GlobalOptions& global, const CheckOptions& options, Log& log) {
  if (options.names.empty()) throw usage_error("check needs a lock name: mongolock check NAME... --max-age DUR");
  for (const auto& name : options.names)
    validate_lock_name(name);
  if (!options.max_age) throw usage_error("check needs --max-age DUR: how recent a success must be, e.g. 26h");
  CheckPolicy policy{.max_age = *options.max_age};
  if (options.failed == "critical") {
    policy.on_failed = CheckState::critical;
  } else if (options.failed == "ok") {
    policy.on_failed = CheckState::ok;
  } else if (options.failed != "warning") {
    throw usage_error(fmt::format("--failed '{}' is not a state; give warning, critical or ok", options.failed));
  }
  std::vector<NameCheck> checks;
  try {
    MongoStore store(global.store, log);
    const auto now = store.clock().now();
    for (const auto& name : options.names)
      checks.push_back(
          check_name(name, store.runs_of_kind(name, std::nullopt, k_check_runs_read, RunKind::executed), now, policy));
  } catch (const Error& e) {
    if (e.exit_code() != k_exit_unavailable) throw;
    if (options.json) {
      fmt::print("{}", check_unknown_json(e.what()));
    } else {
      fmt::print("{}\n", check_unknown_line(e.what()));
    }
    return static_cast<int>(CheckState::unknown);
  }
  fmt::print("{}", options.json ? check_json(checks, policy) : check_line(checks, policy) + "\n");
  return static_cast<int>(worst_state(checks));
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
  store.ensure_runs_index();
  fmt::print("index name_1_ended_at_1 on the run history: ok\n");
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
