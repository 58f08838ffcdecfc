#include "cli.hpp"

#include <mongolock/commands.hpp>
#include <mongolock/duration.hpp>
#include <mongolock/error.hpp>
#include <mongolock/uri.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

namespace mongolock {

namespace {

constexpr const char* k_version = "0.2.0";

// The environment variable of option --long-name: MONGOLOCK_LONG_NAME.
std::string env_for(std::string_view long_name) {
  std::string env = "MONGOLOCK_";
  for (const char c : long_name)
    env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

bool env_set(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  return value != nullptr && *value != '\0';
}

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The config file read by default: $MONGOLOCK_CONFIG, else the first of $XDG_CONFIG_HOME/mongolock/config
// (~/.config/mongolock/config) and /etc/mongolock.conf that exists.
std::string default_config_file() {
  if (env_set("MONGOLOCK_CONFIG")) {
    const std::string path = std::getenv("MONGOLOCK_CONFIG");
    if (!file_exists(path)) throw usage_error(fmt::format("MONGOLOCK_CONFIG names '{}', which is not a file", path));
    return path;
  }
  std::string xdg = env_set("XDG_CONFIG_HOME") ? std::getenv("XDG_CONFIG_HOME") : "";
  if (xdg.empty() && env_set("HOME")) xdg = std::string(std::getenv("HOME")) + "/.config";
  for (const auto& path :
       {xdg.empty() ? std::string() : xdg + "/mongolock/config", std::string("/etc/mongolock.conf")}) {
    if (file_exists(path)) return path;
  }
  return {};
}

// CLI11 applies a config file before the environment; dropping every config item whose environment
// variable is set gives the documented precedence: command line > environment > config file > default.
class EnvFirstConfig : public CLI::ConfigTOML {
public:
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override {
    auto values = CLI::ConfigTOML::from_config(input);
    std::erase_if(values, [](const CLI::ConfigItem& item) { return env_set(env_for(item.name)); });
    return values;
  }
};

// Adds --long-name with its MONGOLOCK_LONG_NAME variable.
template <typename T>
CLI::Option* add_option(CLI::App* app, const std::string& flags, T& value, const std::string& help) {
  const auto long_name = flags.substr(flags.rfind('-') == std::string::npos ? 0 : flags.find("--") + 2);
  return app->add_option(flags, value, help)->envname(env_for(long_name));
}

// Duration options are read as text and parsed after CLI11, so errors name the option and the format.
struct Texts {
  std::string connect_timeout = "5s";
  std::string grace = "2s";
  std::string ttl;
  std::string kill_grace;
  std::string renew_interval;
  std::string renew_deadline;
  std::string timeout;
  std::string kill_after = "5s";
  std::string wait;
  std::string min_hold;
  std::string on_lost = "term";
  std::string uri_file;
};

Millis duration_or(const std::string& text, const char* what, Millis fallback) {
  return text.empty() ? fallback : parse_duration(text, what);
}

std::optional<Millis> optional_duration(const std::string& text, const char* what) {
  if (text.empty()) return std::nullopt;
  return parse_duration(text, what);
}

TakeOptions take_options(const Texts& texts, bool fence, int slots) {
  TakeOptions take;
  if (!texts.wait.empty()) take.wait = texts.wait == "forever" ? k_wait_forever : parse_duration(texts.wait, "--wait");
  take.min_hold = duration_or(texts.min_hold, "--min-hold", Millis(0));
  take.fence = fence;
  take.slots = slots;
  return take;
}

void add_take_options(CLI::App* cmd, Texts& texts, bool& fence, int& slots) {
  add_option(cmd, "-w,--wait", texts.wait, "Keep trying this long while the lock is held (DUR or 'forever')");
  add_option(cmd, "--min-hold", texts.min_hold,
             "Keep the lock at least this long after acquiring it, even when released sooner");
  // No environment variable: MONGOLOCK_FENCE is what run exports to its command.
  cmd->add_flag("--fence", fence, "Allocate a fencing token (only ever grows per name)");
  add_option(cmd, "--slots", slots, "Semaphore: up to N holders share the name")->capture_default_str();
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

// Splits off the command of `run NAME... -- CMD ARGS...` at the first "--", which CLI11 would otherwise
// mix with the names.
std::vector<std::string> split_command(std::vector<std::string>& args) {
  const auto dashes = std::find(args.begin(), args.end(), "--");
  if (dashes == args.end()) return {};
  std::vector<std::string> command(dashes + 1, args.end());
  args.erase(dashes, args.end());
  return command;
}

// Reads the URI from --uri-file: the first line, without surrounding white space.
std::string read_uri_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw usage_error(fmt::format("cannot read --uri-file '{}': {}", path, std::strerror(errno)));
  std::string line;
  std::getline(in, line);
  const auto first = line.find_first_not_of(" \t\r");
  const auto last = line.find_last_not_of(" \t\r");
  if (first == std::string::npos) throw usage_error(fmt::format("--uri-file '{}' is empty", path));
  return line.substr(first, last - first + 1);
}

int run_cli(std::vector<std::string> args, Log& log) {
  CLI::App app{"mongolock: keep jobs from running twice at once across machines, with a lock in MongoDB.", "mongolock"};
  app.require_subcommand(1);
  app.fallthrough();
  app.set_version_flag("--version", k_version);
  app.config_formatter(std::make_shared<EnvFirstConfig>());
  app.set_config("--config", default_config_file(),
                 "Config file (default: $MONGOLOCK_CONFIG, ~/.config/mongolock/config, /etc/mongolock.conf)");
  app.footer("Precedence: command line > MONGOLOCK_* environment > config file > default.\n"
             "Exit codes: 0 ok, 1 status: free, 64 usage, 65 not the holder, 69 MongoDB unavailable, 70 internal,\n"
             "75 held (-E), 76 lease lost, 124 timeout, 126 cannot execute, 127 not found. See mongolock(1).");

  GlobalOptions global;
  Texts texts;
  bool verbose = false;
  bool quiet = false;
  add_option(&app, "--uri", global.store.uri, "MongoDB connection string")->capture_default_str();
  add_option(&app, "--uri-file", texts.uri_file,
             "Read the connection string from this file (keeps passwords out of ps)");
  add_option(&app, "--db", global.store.database, "Database of the locks collection")->capture_default_str();
  add_option(&app, "--collection", global.store.collection, "Collection of the lock documents")->capture_default_str();
  add_option(&app, "--connect-timeout", texts.connect_timeout, "Bound on connecting and server selection")
      ->capture_default_str();
  add_option(&app, "--grace", texts.grace, "Takeover grace: purge an expired lock only this long after it expired")
      ->capture_default_str();
  add_option(&app, "-E,--conflict-exit-code", global.conflict_exit_code, "Exit code when the lock is held")
      ->check(CLI::Range(0, 255))
      ->capture_default_str();
  // MONGOLOCK_VERBOSE / MONGOLOCK_QUIET are read after parsing: CLI11 would count "0" as given.
  auto* verbose_flag =
      app.add_flag("-v,--verbose", verbose, "Log each step with timings on stderr (MONGOLOCK_VERBOSE)");
  app.add_flag("-q,--quiet", quiet, "Print nothing but errors (MONGOLOCK_QUIET)")->excludes(verbose_flag);

  AcquireOptions acquire;
  bool acquire_fence = false;
  int acquire_slots = 1;
  auto* acquire_cmd = app.add_subcommand("acquire", "Take a lock and print its token (nothing renews it)");
  acquire_cmd->add_option("NAME", acquire.name, "Lock name")->required();
  add_option(acquire_cmd, "--ttl", texts.ttl, "Lease length (default 10m)");
  acquire_cmd->add_option("--process", acquire.process, "Holder identity (default: host:pid of the calling shell)");
  add_take_options(acquire_cmd, texts, acquire_fence, acquire_slots);

  ReleaseOptions release;
  auto* release_cmd = app.add_subcommand("release", "Release a lock held by this caller, a token or a process");
  release_cmd->add_option("NAME", release.name, "Lock name")->required();
  release_cmd->add_option("--token", release.token, "Release the acquisition with this token");
  release_cmd->add_option("--process", release.process, "Release the lock held by this holder (host:pid)");

  RenewOptions renew;
  auto* renew_cmd = app.add_subcommand("renew", "Extend a lock taken with acquire to now + TTL");
  renew_cmd->add_option("NAME", renew.name, "Lock name")->required();
  add_option(renew_cmd, "--ttl", texts.ttl, "New lease length from now (default 10m)");
  renew_cmd->add_option("--token", renew.token, "Renew the acquisition with this token");
  renew_cmd->add_option("--process", renew.process, "Renew the lock held by this holder (host:pid)");

  RunOptions run;
  bool run_fence = false;
  int run_slots = 1;
  auto* run_cmd =
      app.add_subcommand("run", "Run a command holding the locks: mongolock run NAME [NAME...] -- CMD [ARGS...]");
  run_cmd->add_option("NAME", run.names, "Lock names (all or none)")->required();
  add_option(run_cmd, "--ttl", texts.ttl, "Lease length (default 30s)");
  add_option(run_cmd, "--renew-interval", texts.renew_interval, "Time between renewals (default TTL/3)");
  add_option(run_cmd, "--renew-deadline", texts.renew_deadline,
             "The lease is lost when no renewal succeeded this long (default 2/3 TTL)");
  add_option(run_cmd, "--kill-grace", texts.kill_grace,
             "After a lost lease: SIGTERM to SIGKILL (default min(5s, what --ttl allows))");
  add_option(run_cmd, "--on-lost", texts.on_lost, "What a lost lease does to the command: term, kill or ignore")
      ->check(CLI::IsMember({"term", "kill", "ignore"}))
      ->capture_default_str();
  add_option(run_cmd, "--timeout", texts.timeout, "Stop the command after this long (exit 124)");
  add_option(run_cmd, "--kill-after", texts.kill_after, "After --timeout: SIGTERM to SIGKILL")->capture_default_str();
  add_take_options(run_cmd, texts, run_fence, run_slots);

  StatusOptions status;
  auto* status_cmd = app.add_subcommand("status", "Show a lock's holder and times; exit 0 when held, 1 when free");
  status_cmd->add_option("NAME", status.name, "Lock name")->required();
  status_cmd->add_flag("--json", status.json, "Print JSON");

  ListOptions list;
  auto* list_cmd = app.add_subcommand("list", "List every held lock");
  list_cmd->add_flag("--json", list.json, "Print JSON");

  BreakOptions brk;
  auto* break_cmd = app.add_subcommand("break", "Remove a lock whoever holds it (needs --force; logged)");
  break_cmd->add_option("NAME", brk.name, "Lock name")->required();
  break_cmd->add_flag("--force", brk.force, "Yes, remove someone else's lock");

  auto* doctor_cmd = app.add_subcommand("doctor", "Check the connection, server, clock offset, index and write access");
  auto* init_cmd = app.add_subcommand("init", "Create the indexes up front (unique program; TTL where supported)");

  const bool uri_on_command_line =
      uri_in_arguments(args) != "" && std::any_of(args.begin(), args.end(), [](const std::string& a) {
        return a == "--uri" || a.rfind("--uri=", 0) == 0;
      });
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
    throw usage_error(scrub_secrets(fmt::format("{}; see 'mongolock --help'", e.what()), global.store.uri));
  }

  if (!verbose && !quiet) {
    verbose = env_flag("MONGOLOCK_VERBOSE");
    quiet = !verbose && env_flag("MONGOLOCK_QUIET");
  }
  // --uri and --uri-file: the one from the stronger source wins; both on the command line is an error.
  const bool uri_file_on_command_line = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "--uri-file" || a.rfind("--uri-file=", 0) == 0;
  });
  if (uri_on_command_line && uri_file_on_command_line) {
    throw usage_error("--uri and --uri-file both given; use one of them");
  }
  if (!texts.uri_file.empty() && !uri_on_command_line) global.store.uri = read_uri_file(texts.uri_file);
  log = Log(verbose ? Verbosity::verbose : quiet ? Verbosity::quiet : Verbosity::normal, global.store.uri);
  if (uri_on_command_line && !uri_password(global.store.uri).empty()) {
    log.warning("the password in --uri is visible to other users (ps, shell history); use --uri-file or "
                "MONGOLOCK_URI instead");
  }
  global.store.connect_timeout = parse_duration(texts.connect_timeout, "--connect-timeout");
  global.takeover_grace = parse_duration(texts.grace, "--grace");
  global.store.count_commands = env_flag("MONGOLOCK_DEBUG_COMMANDS");
  if (!run.command.empty() && !run_cmd->parsed()) {
    throw usage_error("'--' and a command go with 'run' only: mongolock run NAME -- CMD [ARGS...]");
  }

  if (acquire_cmd->parsed()) {
    acquire.ttl = duration_or(texts.ttl, "--ttl", k_default_acquire_ttl);
    acquire.take = take_options(texts, acquire_fence, acquire_slots);
    return acquire_command(global, acquire, log);
  }
  if (release_cmd->parsed()) return release_command(global, release, log);
  if (renew_cmd->parsed()) {
    renew.ttl = duration_or(texts.ttl, "--ttl", k_default_acquire_ttl);
    return renew_command(global, renew, log);
  }
  if (run_cmd->parsed()) {
    run.ttl = duration_or(texts.ttl, "--ttl", k_default_run_ttl);
    run.kill_grace = optional_duration(texts.kill_grace, "--kill-grace");
    run.renew_interval = optional_duration(texts.renew_interval, "--renew-interval");
    run.renew_deadline = optional_duration(texts.renew_deadline, "--renew-deadline");
    run.timeout = optional_duration(texts.timeout, "--timeout");
    run.kill_after = parse_duration(texts.kill_after, "--kill-after");
    run.on_lost = texts.on_lost == "kill" ? OnLost::kill : texts.on_lost == "ignore" ? OnLost::ignore : OnLost::term;
    run.take = take_options(texts, run_fence, run_slots);
    return run_command(global, run, log);
  }
  if (status_cmd->parsed()) return status_command(global, status, log);
  if (list_cmd->parsed()) return list_command(global, list, log);
  if (break_cmd->parsed()) return break_command(global, brk, log);
  if (doctor_cmd->parsed()) return doctor_command(global, log);
  if (init_cmd->parsed()) return init_command(global, log);
  throw internal_error("no command was parsed");
}

} // namespace

int cli_main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Log log(Verbosity::normal, uri_in_arguments(args));
  return guarded_main(log, [&] { return run_cli(std::move(args), log); });
}

} // namespace mongolock
