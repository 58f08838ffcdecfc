#include "cli.hpp"

#include <mongolock/commands.hpp>
#include <mongolock/duration.hpp>
#include <mongolock/error.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

namespace mongolock {

namespace {

constexpr const char* k_version = "0.1.0";

// Duration options are read as text and parsed after CLI11, so errors name the option and the format.
struct DurationText {
  std::string connect_timeout = "5s";
  std::string grace = "2s";
  std::string ttl;
  std::string kill_grace;
  std::string timeout;
  std::string kill_after = "5s";
};

Millis duration_or(const std::string& text, const char* what, Millis fallback) {
  return text.empty() ? fallback : parse_duration(text, what);
}

std::optional<Millis> optional_duration(const std::string& text, const char* what) {
  if (text.empty()) return std::nullopt;
  return parse_duration(text, what);
}

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

// Splits off the command of `run NAME -- CMD ARGS...` at the first "--", which CLI11 would otherwise mix
// with the names.
std::vector<std::string> split_command(std::vector<std::string>& args) {
  const auto dashes = std::find(args.begin(), args.end(), "--");
  if (dashes == args.end()) return {};
  std::vector<std::string> command(dashes + 1, args.end());
  args.erase(dashes, args.end());
  return command;
}

// The URI given with --uri (or MONGOLOCK_URI), found before parsing so that even a parse error cannot
// print its password.
std::string uri_in_arguments(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "--uri" && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind("--uri=", 0) == 0) return args[i].substr(6);
  }
  const char* env_uri = std::getenv("MONGOLOCK_URI");
  return env_uri != nullptr ? env_uri : "";
}

int run_cli(std::vector<std::string> args, Log& log) {
  CLI::App app{"mongolock: keep jobs from running twice at once across machines, with a lock in MongoDB.", "mongolock"};
  app.require_subcommand(1);
  app.fallthrough();
  app.set_version_flag("--version", k_version);
  app.footer("Exit codes: 0 ok, 1 status: free, 64 usage, 65 not the holder, 69 MongoDB unavailable, 70 internal,\n"
             "75 held (-E), 76 lease lost, 124 timeout, 126 cannot execute, 127 not found. See mongolock(1).");

  GlobalOptions global;
  DurationText durations;
  bool verbose = false;
  bool quiet = false;
  app.add_option("--uri", global.store.uri, "MongoDB connection string")
      ->envname("MONGOLOCK_URI")
      ->capture_default_str();
  app.add_option("--db", global.store.database, "Database of the locks collection")
      ->envname("MONGOLOCK_DB")
      ->capture_default_str();
  app.add_option("--collection", global.store.collection, "Collection of the lock documents")
      ->envname("MONGOLOCK_COLLECTION")
      ->capture_default_str();
  app.add_option("--connect-timeout", durations.connect_timeout, "Bound on connecting and server selection")
      ->envname("MONGOLOCK_CONNECT_TIMEOUT")
      ->capture_default_str();
  app.add_option("--grace", durations.grace, "Takeover grace: purge an expired lock only this long after it expired")
      ->envname("MONGOLOCK_GRACE")
      ->capture_default_str();
  app.add_option("-E,--conflict-exit-code", global.conflict_exit_code, "Exit code when the lock is held")
      ->envname("MONGOLOCK_CONFLICT_EXIT_CODE")
      ->check(CLI::Range(0, 255))
      ->capture_default_str();
  auto* verbose_flag =
      app.add_flag("-v,--verbose", verbose, "Log each step with timings on stderr")->envname("MONGOLOCK_VERBOSE");
  app.add_flag("-q,--quiet", quiet, "Print nothing but errors")->envname("MONGOLOCK_QUIET")->excludes(verbose_flag);

  AcquireOptions acquire;
  auto* acquire_cmd = app.add_subcommand("acquire", "Take a lock and print its token (nothing renews it)");
  acquire_cmd->add_option("NAME", acquire.name, "Lock name")->required();
  acquire_cmd->add_option("--ttl", durations.ttl, "Lease length (default 10m)");
  acquire_cmd->add_option("--process", acquire.process, "Holder identity (default: host:pid of the calling shell)");

  ReleaseOptions release;
  auto* release_cmd = app.add_subcommand("release", "Release a lock held by this caller, a token or a process");
  release_cmd->add_option("NAME", release.name, "Lock name")->required();
  release_cmd->add_option("--token", release.token, "Release the acquisition with this token");
  release_cmd->add_option("--process", release.process, "Release the lock held by this holder (host:pid)");

  RunOptions run;
  std::string on_lost = "term";
  auto* run_cmd =
      app.add_subcommand("run", "Run a command while holding the lock: mongolock run NAME -- CMD [ARGS...]");
  run_cmd->add_option("NAME", run.name, "Lock name")->required();
  run_cmd->add_option("--ttl", durations.ttl, "Lease length, renewed every TTL/3 (default 30s)");
  run_cmd->add_option("--kill-grace", durations.kill_grace,
                      "After a lost lease: SIGTERM to SIGKILL (default min(5s, what --ttl allows))");
  run_cmd->add_option("--on-lost", on_lost, "What a lost lease does to the command: term, kill or ignore")
      ->check(CLI::IsMember({"term", "kill", "ignore"}))
      ->capture_default_str();
  run_cmd->add_option("--timeout", durations.timeout, "Stop the command after this long (exit 124)");
  run_cmd->add_option("--kill-after", durations.kill_after, "After --timeout: SIGTERM to SIGKILL")
      ->capture_default_str();

  StatusOptions status;
  auto* status_cmd = app.add_subcommand("status", "Show a lock's holder and times; exit 0 when held, 1 when free");
  status_cmd->add_option("NAME", status.name, "Lock name")->required();

  run.command = split_command(args);
  std::reverse(args.begin(), args.end()); // CLI11 takes the arguments in reverse order
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw usage_error(fmt::format("{}; see 'mongolock --help'", e.what()));
  }

  log = Log(verbose ? Verbosity::verbose : quiet ? Verbosity::quiet : Verbosity::normal, global.store.uri);
  global.store.connect_timeout = parse_duration(durations.connect_timeout, "--connect-timeout");
  global.takeover_grace = parse_duration(durations.grace, "--grace");
  global.store.count_commands = env_flag("MONGOLOCK_DEBUG_COMMANDS");
  if (!run.command.empty() && !run_cmd->parsed()) {
    throw usage_error("'--' and a command go with 'run' only: mongolock run NAME -- CMD [ARGS...]");
  }

  if (acquire_cmd->parsed()) {
    acquire.ttl = duration_or(durations.ttl, "--ttl", k_default_acquire_ttl);
    return acquire_command(global, acquire, log);
  }
  if (release_cmd->parsed()) return release_command(global, release, log);
  if (run_cmd->parsed()) {
    run.ttl = duration_or(durations.ttl, "--ttl", k_default_run_ttl);
    run.kill_grace = optional_duration(durations.kill_grace, "--kill-grace");
    run.timeout = optional_duration(durations.timeout, "--timeout");
    run.kill_after = parse_duration(durations.kill_after, "--kill-after");
    run.on_lost = on_lost == "kill" ? OnLost::kill : on_lost == "ignore" ? OnLost::ignore : OnLost::term;
    return run_command(global, run, log);
  }
  if (status_cmd->parsed()) return status_command(global, status, log);
  throw internal_error("no command was parsed");
}

} // namespace

int cli_main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Log log(Verbosity::normal, uri_in_arguments(args));
  try {
    return run_cli(std::move(args), log);
  } catch (const Error& e) {
    log.error(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    log.error(fmt::format("internal error: {}", e.what()));
    return k_exit_internal;
  }
}

} // namespace mongolock
