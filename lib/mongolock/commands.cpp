#include <mongolock/commands.hpp>
#include <mongolock/error.hpp>
#include <mongolock/identity.hpp>
#include <mongolock/lock_name.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/process.hpp>
#include <mongolock/token.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <unistd.h>

namespace mongolock {

namespace {

// The holder identity of acquire and release: the calling process (the shell that runs mongolock), so
// that `mongolock acquire x` and a later `mongolock release x` in one script name the same holder.
std::string caller_identity(const std::optional<std::string>& override_process) {
  if (override_process) {
    if (override_process->empty()) throw usage_error("--process is empty; give a holder such as host:1234");
    return *override_process;
  }
  return holder_identity(getppid());
}

AcquireRequest make_request(const GlobalOptions& global, std::string name, std::string process, Millis ttl) {
  return AcquireRequest{std::move(name), std::move(process), user_name(), ttl, global.takeover_grace, {}};
}

int report_held(const GlobalOptions& global, Locker& locker, const std::string& name, const Log& log) {
  const auto holder = locker.holder(name);
  // The holder may have released in between; the name was held when we tried, so it still counts as held.
  log.info(holder ? fmt::format("lock '{}' is {}", name, locker.describe_holder(*holder))
                  : fmt::format("lock '{}' is held (its holder released it just now; try again)", name));
  return global.conflict_exit_code;
}

// Refuses a release or renew: says who holds the lock instead, if anyone. Exit 65.
[[noreturn]] void refuse_not_holder(Locker& locker, const std::string& name, const std::string& as_whom) {
  const auto holder = locker.holder(name);
  if (!holder) throw Error(k_exit_not_holder, fmt::format("lock '{}' is not held; nothing was released", name));
  throw Error(k_exit_not_holder,
              fmt::format("lock '{}' is {}, not by {}; nothing was released (name the holder with --token or "
                          "--process)",
                          name, locker.describe_holder(*holder), as_whom));
}

// A terminating signal that arrived while the lock was being acquired, if any (consumed).
std::optional<int> pending_signal(const SignalBlock& signals) {
  sigset_t forwarded;
  sigemptyset(&forwarded);
  for (const int s : forwarded_signals())
    sigaddset(&forwarded, s);
  sigset_t pending;
  sigpending(&pending);
  for (const int s : forwarded_signals()) {
    if (sigismember(&pending, s) && sigismember(&signals.blocked(), s)) {
      const timespec zero{0, 0};
      if (sigtimedwait(&forwarded, nullptr, &zero) > 0) return s;
    }
  }
  return std::nullopt;
}

std::string command_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Releases the lock a run holds; a failure is reported, never thrown (the command has already ended).
// Returns false when the lock could not be released.
bool release_after_run(Locker& locker, const LockRecord& lock, const Log& log) {
  try {
    if (locker.release(LockSelector{lock.program, lock.id, lock.token, std::nullopt})) {
      log.debugf("released lock '{}'", lock.program);
      return true;
    }
    log.error(fmt::format("lock '{}' was no longer held when the command ended: the lease was lost", lock.program));
  } catch (const Error& e) {
    log.error(fmt::format("could not release lock '{}' ({}); it stays held until it expires at {}", lock.program,
                          e.what(), format_time(lock.expires_at)));
  }
  return false;
}

} // namespace

int acquire_command(const GlobalOptions& global, const AcquireOptions& options, Log& log) {
  validate_lock_name(options.name);
  validate_ttl(options.ttl);
  const auto process = caller_identity(options.process);
  MongoStore store(global.store, log);
  Locker locker(store, log);
  const auto lock = locker.try_acquire(make_request(global, options.name, process, options.ttl));
  if (!lock) return report_held(global, locker, options.name, log);
  fmt::print("{}\n", lock->token);
  std::fflush(stdout);
  log.debugf("acquired lock '{}' as {} until {}", lock->program, lock->process, format_time(lock->expires_at));
  return k_exit_ok;
}

int release_command(const GlobalOptions& global, const ReleaseOptions& options, Log& log) {
  validate_lock_name(options.name);
  if (options.token && !is_valid_token(*options.token)) {
    throw usage_error(
        fmt::format("--token '{}' is not a mongolock token (32 hex digits, as printed by acquire)", *options.token));
  }
  const auto process = options.token ? std::optional<std::string>() : caller_identity(options.process);
  MongoStore store(global.store, log);
  Locker locker(store, log);
  if (locker.release(LockSelector{options.name, std::nullopt, options.token, process})) {
    log.debugf("released lock '{}'", options.name);
    return k_exit_ok;
  }
  refuse_not_holder(locker, options.name, options.token ? "the given token" : *process);
}

int run_command(const GlobalOptions& global, const RunOptions& options, Log& log) {
  validate_lock_name(options.name);
  if (options.command.empty() || options.command.front().empty()) {
    throw usage_error("run needs a command: mongolock run NAME -- CMD [ARGS...]");
  }
  RunPolicy policy{make_lease_timing(options.ttl, options.kill_grace), options.on_lost, options.timeout,
                   options.kill_after};

  // Signals are read from a signalfd from here on: a SIGTERM during the acquisition is not lost, and
  // the heartbeat thread and the command start with them blocked/restored as they should.
  const SignalBlock signals;
  auto config = global.store;
  // Each command must give up well within the renewal deadline so the heartbeat can retry.
  config.operation_timeout = std::clamp(options.ttl / 3, Millis(1000), config.operation_timeout);
  MongoStore store(config, log);
  Locker locker(store, log);
  auto request = make_request(global, options.name, holder_identity(getpid()), options.ttl);
  request.command = command_name(options.command.front());
  auto lock = locker.try_acquire(request);
  if (!lock) return report_held(global, locker, options.name, log);
  log.debugf("acquired lock '{}' as {} until {}", lock->program, lock->process, format_time(lock->expires_at));

  if (const auto signo = pending_signal(signals)) {
    log.info(
        fmt::format("received {} before the command started; releasing '{}'", sigabbrev_np(*signo), lock->program));
    release_after_run(locker, *lock, log);
    return exit_code_for_signal(*signo);
  }

  ChildSpec spec{
      options.command,
      {{"MONGOLOCK_NAME", lock->program}, {"MONGOLOCK_TOKEN", lock->token}, {"MONGOLOCK_PROCESS", lock->process}},
      signals.previous()};
  std::optional<Child> child;
  try {
    child.emplace(Child::spawn(spec));
  } catch (const Error&) {
    release_after_run(locker, *lock, log);
    throw;
  }
  log.debugf("started {} (pid {})", options.command.front(), child->pid());
  const auto outcome = supervise(locker, *lock, *child, signals, policy, log);
  log.debugf("command exited with status {}", outcome.command_status);

  if (outcome.lease_lost) {
    if (policy.on_lost == OnLost::ignore) {
      release_after_run(locker, *lock, log); // normally finds nothing; never touches another holder's lock
      return outcome.command_status;
    }
    return k_exit_lease_lost;
  }
  const bool released = release_after_run(locker, *lock, log);
  if (outcome.timed_out) return k_exit_timeout;
  if (!released && outcome.command_status == 0) return k_exit_lease_lost;
  return outcome.command_status;
}

int status_command(const GlobalOptions& global, const StatusOptions& options, Log& log) {
  validate_lock_name(options.name);
  MongoStore store(global.store, log);
  Locker locker(store, log);
  const auto lock = locker.holder(options.name);
  const auto now = store.clock().now();
  if (!lock) {
    fmt::print("name: {}\nstate: free\n", options.name);
    return k_exit_not_held;
  }
  const auto left = lock->expires_at - now;
  fmt::print("name: {}\nstate: {}\nholder: {}\n", lock->program, left > Millis(0) ? "held" : "expired", lock->process);
  if (!lock->user.empty()) fmt::print("user: {}\n", lock->user);
  if (!lock->command.empty()) fmt::print("command: {}\n", lock->command);
  fmt::print("acquired: {} ({} ago)\n", format_time(lock->acquired_at), format_duration(now - lock->acquired_at));
  fmt::print("renewed: {} ({} ago)\n", format_time(lock->renewed_at), format_duration(now - lock->renewed_at));
  fmt::print("expires: {} ({})\n", format_time(lock->expires_at),
             left > Millis(0) ? fmt::format("in {}", format_duration(left))
                              : fmt::format("{} ago", format_duration(-left)));
  fmt::print("ttl: {}\n", format_duration(lock->ttl));
  if (lock->fence) fmt::print("fence: {}\n", *lock->fence);
  return left > Millis(0) ? k_exit_ok : k_exit_not_held;
}

} // namespace mongolock
