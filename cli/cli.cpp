#include "cli.hpp"
#include "completion.hpp"
#include "config.hpp"

#include <mongolock/commands.hpp>
#include <mongolock/duration.hpp>
#include <mongolock/error.hpp>
#include <mongolock/file_read.hpp>
#include <mongolock/orphan.hpp>
#include <mongolock/process.hpp>
#include <mongolock/text.hpp>
#include <mongolock/uri.hpp>
#include <mongolock/version.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sys/stat.h>

namespace mongolock {

namespace {

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

// A boolean variable, read by CLI11's rule for flags (CLI::detail::to_flag_value, the rule of every other
// boolean variable, e.g. MONGOLOCK_JSON): 1-9, true, t, yes, y, on, enable, + are true; 0, false, f, no, n,
// off, disable, - are false (case-insensitive); a whole number by its sign. nullopt when unset or empty.
// Throws Error (64) naming the variable for anything else (MONGOLOCK_QUIET=maybe).
std::optional<bool> env_bool(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  bool result = false;
  if (!CLI::detail::lexical_cast(std::string(value), result)) {
    throw usage_error(
        fmt::format("{}='{}' is not a boolean; write 1 or 0 (true/false, yes/no, on/off)", name, printable(value)));
  }
  return result;
}

// True when something is at `path` (of any type: read_bounded_file() refuses what is not a regular file,
// rather than skipping it silently).
bool path_exists(const std::string& path) {
  struct stat st {};
  return !path.empty() && stat(path.c_str(), &st) == 0;
}

// The config file read when neither --config nor MONGOLOCK_CONFIG names one: the first of
// $XDG_CONFIG_HOME/mongolock/config (~/.config/mongolock/config) and /etc/mongolock.conf that exists; ""
// when there is none. Looked up once a process: whether `run` is defined alone (defines_run_alone()) and
// which file is applied (settle_globals()) must come from the same look, even if a file appears between them.
const std::string& default_config_file() {
  static const std::string found = [] {
    std::string xdg = env_set("XDG_CONFIG_HOME") ? std::getenv("XDG_CONFIG_HOME") : "";
    if (xdg.empty() && env_set("HOME")) xdg = std::string(std::getenv("HOME")) + "/.config";
    for (const auto& path :
         {xdg.empty() ? std::string() : xdg + "/mongolock/config", std::string("/etc/mongolock.conf")}) {
      if (path_exists(path)) return path;
    }
    return std::string();
  }();
  return found;
}

// Adds --long-name with its MONGOLOCK_LONG_NAME variable.
template <typename T>
CLI::Option* add_option(CLI::App* app, const std::string& flags, T& value, const std::string& help) {
  const auto long_name = flags.substr(flags.rfind('-') == std::string::npos ? 0 : flags.find("--") + 2);
  return app->add_option(flags, value, help)->envname(env_for(long_name));
}

// Adds the flag --long-name with its MONGOLOCK_LONG_NAME variable (1/true/yes/on or 0/false/no/off).
CLI::Option* add_flag(CLI::App* app, const std::string& flags, bool& value, const std::string& help) {
  const auto long_name = flags.substr(flags.rfind('-') == std::string::npos ? 0 : flags.find("--") + 2);
  return app->add_flag(flags, value, help)->envname(env_for(long_name));
}

// Where the options' values came from, so that an error names the source its value came from: the
// option for the command line, the variable for the environment, FILE:LINE for a config file.
struct Sources {
  std::vector<std::string> args;                          // the command line before any "--"
  std::map<const CLI::Option*, std::string> config_lines; // "FILE:LINE" of each option a config file set
};

// True when `args` give `option`: --long, --long=VALUE, or -s / -sVALUE.
bool on_command_line(const std::vector<std::string>& args, const CLI::Option& option) {
  for (const auto& arg : args) {
    for (const auto& l : option.get_lnames()) {
      if (arg == "--" + l || arg.starts_with("--" + l + "=")) return true;
    }
    for (const auto& s : option.get_snames()) {
      if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-' && arg.substr(1, s.size()) == s) return true;
    }
  }
  return false;
}

// Runs `check(what)` for the value of option `name` (e.g. "--ttl") of `cmd`, `what` naming where the value
// came from: the option (command line, or the default), its variable (MONGOLOCK_TTL), or its key (ttl) with
// the error prefixed by "FILE:LINE: " of the config file that set it.
template <typename Check>
auto from_source(const Sources& sources, const CLI::App* cmd, const std::string& name, const Check& check) {
  const auto* option = cmd->get_option_no_throw(name);
  if (option == nullptr || on_command_line(sources.args, *option)) return check(name);
  if (env_set(option->get_envname())) return check(option->get_envname());
  const auto line = sources.config_lines.find(option);
  if (line == sources.config_lines.end()) return check(name);
  try {
    return check(option->get_lnames().empty() ? name : option->get_lnames().front());
  } catch (const Error& e) {
    throw Error(e.exit_code(), fmt::format("{}: {}", line->second, e.what()));
  }
}

// The duration option `name` of `cmd` from `text`, errors naming its source (from_source()).
Millis duration_of(const Sources& sources, const CLI::App* cmd, const std::string& name, const std::string& text) {
  return from_source(sources, cmd, name, [&](const std::string& what) { return parse_duration(text, what); });
}

// Options are read as text and parsed after CLI11, so errors name the option and the format. Each command
// has its own, so that "[run] ttl" in a config file never sets acquire's TTL.
struct GlobalTexts {
  std::string connect_timeout = "5s";
  std::string grace = "2s";
};

// Optional texts are std::optional so that an empty value given on purpose (--ttl '') is an error, not
// "not given".
using Text = std::optional<std::string>;

struct TakeTexts {
  Text ttl;
  Text wait;
  Text min_hold;
  Text splay;
  bool fence = false;
  int slots = 1;
  bool no_push = false;
};

struct RunTexts {
  Text once_per;
  bool no_history = false;
  std::int64_t history_keep = HistoryPolicy{}.keep;
  std::string history_max_age = "30d";
  Text metrics_file;
  Text kill_grace;
  Text renew_interval;
  Text renew_deadline;
  Text timeout;
  std::string kill_after = "5s";
  std::string on_lost = "term";
};

// A whole number >= 1 from a variable's text, e.g. "10". Throws Error (64) naming `what`.
std::int64_t parse_count(std::string_view text, std::string_view what) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) {
    throw usage_error(fmt::format("{} '{}' is not a whole number of 1 or more", what, text));
  }
  return value;
}

Millis duration_or(const Sources& sources, const CLI::App* cmd, const Text& text, const char* name, Millis fallback) {
  return text ? duration_of(sources, cmd, name, *text) : fallback;
}

std::optional<Millis> optional_duration(const Sources& sources, const CLI::App* cmd, const Text& text,
                                        const char* name) {
  if (!text) return std::nullopt;
  return duration_of(sources, cmd, name, *text);
}

TakeOptions take_options(const Sources& sources, const CLI::App* cmd, const TakeTexts& texts) {
  TakeOptions take;
  if (texts.wait) {
    take.wait = *texts.wait == "forever" ? k_wait_forever : duration_of(sources, cmd, "--wait", *texts.wait);
  }
  take.min_hold = duration_or(sources, cmd, texts.min_hold, "--min-hold", Millis(0));
  take.fence = texts.fence;
  take.slots = texts.slots;
  take.push = !texts.no_push;
  take.splay = duration_or(sources, cmd, texts.splay, "--splay", Millis(0));
  return take;
}

void add_take_options(CLI::App* cmd, TakeTexts& texts) {
  add_option(cmd, "-w,--wait", texts.wait, "Keep trying this long while the lock is held (DUR or 'forever')")
      ->type_name("DUR");
  add_option(cmd, "--min-hold", texts.min_hold,
             "Keep the lock at least this long after acquiring it, even when released sooner")
      ->type_name("DUR");
  // No environment variable: MONGOLOCK_FENCE is what run exports to its command.
  cmd->add_flag("--fence", texts.fence, "Allocate a fencing token (only ever grows per name)");
  add_option(cmd, "--slots", texts.slots, "Semaphore: up to N holders share the name")
      ->capture_default_str()
      ->type_name("N");
  add_flag(cmd, "--no-push", texts.no_push, "With --wait: poll only, without push wake-ups on release");
  add_option(cmd, "--splay", texts.splay,
             "First wait an offset in [0, DUR) fixed per host and name, to spread a fleet's cron runs")
      ->type_name("DUR");
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

// The global options that take a separate value ("--uri X").
bool takes_value(const std::string& arg) {
  static const std::vector<std::string> k_with_value{"--uri",        "--uri-file",           "--db",
                                                     "--collection", "--connect-timeout",    "--grace",
                                                     "-E",           "--conflict-exit-code", "--config"};
  return std::find(k_with_value.begin(), k_with_value.end(), arg) != k_with_value.end();
}

// The first word before any "--" that is neither an option nor a global option's value: what the user
// meant as the command. "" when there is none.
std::string command_word(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size() && args[i] != "--"; ++i) {
    if (args[i].starts_with("-")) {
      if (takes_value(args[i])) ++i;
      continue;
    }
    return args[i];
  }
  return "";
}

// Splits off the command of `run NAME... -- CMD ARGS...` at the first "--", which CLI11 would otherwise
// mix with the names. For every other command "--" stays: CLI11 takes it as the end of the options, so
// that `acquire -- NAME` reads NAME as the name whatever it looks like. nullopt when the command is not
// run or there is no "--"; an empty command for a trailing "--".
std::optional<std::vector<std::string>> split_command(std::vector<std::string>& args) {
  if (command_word(args) != "run") return std::nullopt;
  const auto dashes = std::find(args.begin(), args.end(), "--");
  if (dashes == args.end()) return std::nullopt;
  std::vector<std::string> command(dashes + 1, args.end());
  args.erase(dashes, args.end());
  return command;
}

// The arguments before the first "--": the only ones that can be options.
std::vector<std::string> option_part(const std::vector<std::string>& args) {
  return {args.begin(), std::find(args.begin(), args.end(), "--")};
}

struct VerbosityFlags {
  bool verbose = false; // -v/--verbose on the command line
  bool quiet = false;   // -q/--quiet on the command line
};

VerbosityFlags verbosity_flags(const std::vector<std::string>& args) {
  VerbosityFlags flags;
  for (const auto& a : args) {
    flags.verbose = flags.verbose || a == "--verbose";
    flags.quiet = flags.quiet || a == "--quiet";
    if (a.size() < 2 || a[0] != '-' || a[1] == '-') continue;
    // Short flags, possibly combined ("-vq"); -E and -w take the rest of the word as their value.
    for (std::size_t i = 1; i < a.size() && a[i] != 'E' && a[i] != 'w'; ++i) {
      flags.verbose = flags.verbose || a[i] == 'v';
      flags.quiet = flags.quiet || a[i] == 'q';
    }
  }
  return flags;
}

// -v/-q: the command line wins (both there is an error), then MONGOLOCK_VERBOSE/MONGOLOCK_QUIET (booleans,
// env_bool(): a value that is not one is refused even when the command line decides), then the config file
// (what CLI11 parsed when neither flag was on the command line).
Verbosity verbosity(VerbosityFlags flags, bool parsed_verbose, bool parsed_quiet) {
  auto [v, q] = flags;
  if (v && q) throw usage_error("-v/--verbose and -q/--quiet both given; use one of them");
  const auto env_verbose = env_bool("MONGOLOCK_VERBOSE");
  const auto env_quiet = env_bool("MONGOLOCK_QUIET");
  if (!v && !q && (env_verbose || env_quiet)) {
    v = env_verbose.value_or(false);
    q = !v && env_quiet.value_or(false);
  } else if (!v && !q) {
    v = parsed_verbose;
    q = !v && parsed_quiet;
  }
  return v ? Verbosity::verbose : q ? Verbosity::quiet : Verbosity::normal;
}

// The URI from --uri-file: the first line of the file, without surrounding white space. The file is read
// with a bound (read_bounded_file(): 64 KiB, `timeout`, a regular file or a pipe; a regular file writable
// by others or owned by another user is refused).
std::string read_uri_file(const std::string& path, const std::string& what, Millis timeout) {
  const auto text = read_bounded_file(path, what, FileKind::regular_or_pipe, timeout, FileTrust::private_to_user);
  const auto line = std::string_view(text).substr(0, text.find('\n'));
  const auto first = line.find_first_not_of(" \t\r");
  const auto last = line.find_last_not_of(" \t\r");
  if (first == std::string::npos)
    throw usage_error(fmt::format("{} '{}' has an empty first line; put the URI there", what, path));
  return std::string(line.substr(first, last - first + 1));
}

// The environment's URI layer: MONGOLOCK_URI and MONGOLOCK_URI_FILE, each when set and not empty.
UriLayer environment_uri_layer() {
  UriLayer layer;
  if (env_set("MONGOLOCK_URI")) layer.uri = std::getenv("MONGOLOCK_URI");
  if (env_set("MONGOLOCK_URI_FILE")) layer.uri_file = std::getenv("MONGOLOCK_URI_FILE");
  return layer;
}

// Everything the command line defines: the options of every command, the values CLI11 fills in, and the
// subcommands (to tell which one was parsed). One define_*() per command fills it in.
struct Cli {
  App app{"mongolock: keep jobs from running twice at once across machines, with a lock in MongoDB.", "mongolock"};
  Sources sources; // where the values came from, for errors
  // Global options. The config file is read after parsing (apply_config_file()), so that --help and
  // --version read no file; --uri and --uri-file: the three layers are resolved by choose_uri_source().
  Text config_path;
  GlobalOptions global;
  GlobalTexts texts;
  bool verbose = false;
  bool quiet = false;
  Text uri_text;
  Text uri_file_text;

  AcquireOptions acquire;
  TakeTexts acquire_texts;
  CLI::App* acquire_cmd = nullptr;
  ReleaseOptions release;
  CLI::App* release_cmd = nullptr;
  RenewOptions renew;
  Text renew_ttl;
  CLI::App* renew_cmd = nullptr;
  RunOptions run;
  TakeTexts run_take;
  RunTexts run_texts;
  CLI::App* run_cmd = nullptr;
  StatusOptions status;
  CLI::App* status_cmd = nullptr;
  ListOptions list;
  CLI::App* list_cmd = nullptr;
  HistoryOptions history;
  Text history_since;
  CLI::App* history_cmd = nullptr;
  CheckOptions check;
  Text check_max_age;
  CLI::App* check_cmd = nullptr;
  BreakOptions brk;
  CLI::App* break_cmd = nullptr;
  CLI::App* doctor_cmd = nullptr;
  std::string init_history_max_age = "30d";
  CLI::App* init_cmd = nullptr;
  std::string shell;
  CLI::App* completion_cmd = nullptr;
};

void define_global(Cli& c) {
  auto& app = c.app;
  app.require_subcommand(1);
  app.fallthrough();
  app.set_version_flag("--version", fmt::format("mongolock {} (libmongoc {})", k_version, driver_version()));
  app.add_option("--config", c.config_path,
                 "Config file (default: $MONGOLOCK_CONFIG, else the first of $XDG_CONFIG_HOME/mongolock/config "
                 "(~/.config/mongolock/config) and /etc/mongolock.conf)")
      ->configurable(false)
      ->type_name("PATH");
  app.footer(
      "Precedence: command line > MONGOLOCK_* environment > config file > default.\n"
      "URI: --uri or --uri-file > MONGOLOCK_URI or MONGOLOCK_URI_FILE > uri or uri-file in the config file\n"
      "(both in one place is an error). '--' ends the options; for run it starts the command.\n"
      "Exit codes: 0 ok, 1 status: free, 0-3 check: OK/WARNING/CRITICAL/UNKNOWN, 64 usage, 65 not the holder,\n"
      "66 not held any more by --token, 69 MongoDB unavailable, 70 internal, 75 held (-E), 76 lease lost,\n"
      "124 timeout, 126 cannot execute, 127 not found, 128+N run or --wait ended by signal N. See mongolock(1).");
  app.add_option("--uri", c.uri_text, "MongoDB connection string (MONGOLOCK_URI; default mongodb://127.0.0.1:27017)")
      ->type_name("URI");
  app.add_option("--uri-file", c.uri_file_text,
                 "Read the connection string from this file or pipe (MONGOLOCK_URI_FILE; keeps passwords out of ps)")
      ->type_name("PATH");
  add_option(&app, "--db", c.global.store.database, "Database of the locks collection")
      ->capture_default_str()
      ->type_name("NAME");
  add_option(&app, "--collection", c.global.store.collection, "Collection of the lock documents")
      ->capture_default_str()
      ->type_name("NAME");
  add_option(&app, "--connect-timeout", c.texts.connect_timeout, "Bound on connecting and server selection")
      ->capture_default_str()
      ->type_name("DUR");
  add_option(&app, "--grace", c.texts.grace, "Takeover grace: purge an expired lock only this long after it expired")
      ->capture_default_str()
      ->type_name("DUR");
  add_option(&app, "-E,--conflict-exit-code", c.global.conflict_exit_code, "Exit code when the lock is held")
      ->check(CLI::Range(0, 255))
      ->capture_default_str()
      ->type_name("N");
  // MONGOLOCK_VERBOSE / MONGOLOCK_QUIET and the precedence between -v and -q are handled after parsing
  // (verbosity()): CLI11 would count "0" as given, and its excludes() would not follow the precedence.
  app.add_flag("-v,--verbose", c.verbose, "Log each step with timings on stderr (MONGOLOCK_VERBOSE)");
  app.add_flag("-q,--quiet", c.quiet, "Print nothing but errors (MONGOLOCK_QUIET)");
}

void define_acquire_release_renew(Cli& c) {
  c.acquire_cmd = c.app.add_subcommand("acquire", "Take a lock and print its token (nothing renews it)");
  c.acquire_cmd->add_option("NAME", c.acquire.name, "Lock name")->required();
  add_option(c.acquire_cmd, "--ttl", c.acquire_texts.ttl, "Lease length (default 10m)")->type_name("DUR");
  c.acquire_cmd->add_option("--process", c.acquire.process, "Holder identity (default: host:pid of the calling shell)");
  add_take_options(c.acquire_cmd, c.acquire_texts);

  c.release_cmd = c.app.add_subcommand("release", "Release a lock held by this caller, a token or a process");
  c.release_cmd->add_option("NAME", c.release.name, "Lock name")->required();
  c.release_cmd->add_option("--token", c.release.token, "Release the acquisition with this token");
  c.release_cmd->add_option("--process", c.release.process, "Release the lock held by this holder (host:pid)");

  c.renew_cmd = c.app.add_subcommand("renew", "Extend a lock taken with acquire to now + TTL");
  c.renew_cmd->add_option("NAME", c.renew.name, "Lock name")->required();
  add_option(c.renew_cmd, "--ttl", c.renew_ttl,
             "New lease length from now (default: the lock's own, as acquire --ttl set it)")
      ->type_name("DUR");
  c.renew_cmd->add_option("--token", c.renew.token, "Renew the acquisition with this token");
  c.renew_cmd->add_option("--process", c.renew.process, "Renew the lock held by this holder (host:pid)");
}

void define_run(Cli& c) {
  auto* run_cmd =
      c.app.add_subcommand("run", "Run a command holding the locks: mongolock run NAME [NAME...] -- CMD [ARGS...]");
  c.run_cmd = run_cmd;
  auto& texts = c.run_texts;
  run_cmd->add_option("NAME", c.run.names, "Lock names (all or none)")->required();
  add_option(run_cmd, "--ttl", c.run_take.ttl, "Lease length (default 30s)")->type_name("DUR");
  add_option(run_cmd, "--renew-interval", texts.renew_interval, "Time between renewals (default TTL/3)")
      ->type_name("DUR");
  add_option(run_cmd, "--renew-deadline", texts.renew_deadline,
             "The lease is lost when no renewal succeeded this long (default 2/3 TTL)")
      ->type_name("DUR");
  add_option(run_cmd, "--kill-grace", texts.kill_grace,
             "After a lost lease: SIGTERM to SIGKILL (default min(5s, what --ttl allows))")
      ->type_name("DUR");
  add_option(run_cmd, "--on-lost", texts.on_lost, "What a lost lease does to the command: term, kill or ignore")
      ->check(CLI::IsMember({"term", "kill", "ignore"}))
      ->capture_default_str()
      ->type_name("ACTION");
  add_option(run_cmd, "--timeout", texts.timeout, "Stop the command after this long (exit 124)")->type_name("DUR");
  add_option(run_cmd, "--kill-after", texts.kill_after, "After --timeout: SIGTERM to SIGKILL")
      ->capture_default_str()
      ->type_name("DUR");
  add_option(run_cmd, "--lost-exit-code", c.run.lost_exit_code,
             "Exit code when the lease was lost (default 76; the history's outcome tells it from the job's own)")
      ->check(CLI::Range(0, 255))
      ->capture_default_str()
      ->type_name("N");
  run_cmd
      ->add_flag("--no-new-privs", c.run.no_new_privs,
                 "Start the command with no_new_privs: setuid programs gain nothing, so it stays killable")
      ->envname("MONGOLOCK_NO_NEW_PRIVS");
  add_take_options(run_cmd, c.run_take);
  add_option(run_cmd, "--once-per", texts.once_per,
             "Do not run (exit 0) when a run of the names succeeded on any host within DUR")
      ->type_name("DUR");
  add_flag(run_cmd, "--replace", c.run.replace,
           "The newest run wins: stop a holder started with --replace, then run first (waits until taken)");
  add_flag(run_cmd, "--pass-uri", c.run.pass_uri,
           "Pass MONGOLOCK_URI to the command even when it holds a password (it is removed otherwise)");
  add_flag(run_cmd, "--no-history", texts.no_history, "Do not record this run in the run history");
  add_option(run_cmd, "--history-keep", texts.history_keep, "Run history: keep at most N runs per name")
      ->capture_default_str()
      ->type_name("N");
  add_option(run_cmd, "--history-max-age", texts.history_max_age, "Run history: delete runs older than this")
      ->capture_default_str()
      ->type_name("DUR");
  add_option(run_cmd, "--metrics-file", texts.metrics_file,
             "After the run, update this Prometheus textfile (node_exporter textfile collector)")
      ->type_name("PATH");
}

void define_reports(Cli& c) {
  c.status_cmd = c.app.add_subcommand("status", "Show a lock's holder and times; exit 0 when held, 1 when free");
  c.status_cmd->add_option("NAME", c.status.name, "Lock name")->required();
  add_flag(c.status_cmd, "--json", c.status.json, "Print JSON");

  c.list_cmd = c.app.add_subcommand("list", "List every held lock");
  add_flag(c.list_cmd, "--json", c.list.json, "Print JSON");
  add_flag(c.list_cmd, "--names", c.list.names, "Print only the names of the held locks, one per line");

  c.history_cmd = c.app.add_subcommand("history", "Show the recorded runs, newest first, with a summary");
  c.history_cmd->add_option("NAME", c.history.name, "Lock name (default: every name)");
  add_option(c.history_cmd, "--limit", c.history.limit, "Show at most N runs")->capture_default_str()->type_name("N");
  add_option(c.history_cmd, "--since", c.history_since, "Only runs that ended within DUR before now")->type_name("DUR");
  add_flag(c.history_cmd, "--skipped", c.history.skipped,
           "List every skipped attempt on its own line (default: folded into the run that held the lock)");
  add_flag(c.history_cmd, "--json", c.history.json, "Print JSON");

  c.check_cmd = c.app.add_subcommand(
      "check", "Monitoring plugin: has a run of each NAME succeeded on any host within --max-age? (exit 0-3)");
  c.check_cmd->add_option("NAME", c.check.names, "Lock names (the worst state wins)")->required();
  add_option(c.check_cmd, "--max-age", c.check_max_age, "A success must have ended within this, e.g. 26h")
      ->type_name("DUR");
  add_option(c.check_cmd, "--failed", c.check.failed,
             "The state when the newest executed run failed: warning, critical or ok")
      ->check(CLI::IsMember({"warning", "critical", "ok"}))
      ->capture_default_str()
      ->type_name("STATE");
  add_flag(c.check_cmd, "--json", c.check.json, "Print JSON");
}

void define_admin(Cli& c) {
  c.break_cmd = c.app.add_subcommand("break", "Remove a lock whoever holds it (needs --force; logged)");
  c.break_cmd->add_option("NAME", c.brk.name, "Lock name")->required();
  // Only ever from the command line: a config file or variable must not disarm this.
  c.break_cmd->add_flag("--force", c.brk.force, "Yes, remove someone else's lock")->configurable(false);

  c.doctor_cmd = c.app.add_subcommand("doctor", "Check the connection, server, clock offset, index and write access");
  c.init_cmd = c.app.add_subcommand("init", "Create the indexes up front (unique program; TTL where supported)");
  add_option(c.init_cmd, "--history-max-age", c.init_history_max_age,
             "The run history's TTL index deletes runs this long after they ended")
      ->capture_default_str()
      ->type_name("DUR");

  c.completion_cmd = c.app.add_subcommand("completion", "Print the shell completion script for bash, zsh or fish");
  c.completion_cmd->add_option("SHELL", c.shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember(completion_shells()));
}

// "MONGOLOCK_X='VALUE': " when CLI11's `message` is about an option whose value came from its variable
// (CLI11 names only the option: "--slots: ..." for MONGOLOCK_SLOTS=abc), else "".
std::string variable_of(const Cli& c, const std::string& message) {
  std::vector<const CLI::App*> apps{&c.app};
  for (const auto* sub : c.app.get_subcommands())
    apps.push_back(sub);
  for (const auto* app : apps) {
    for (const auto* option : app->get_options()) {
      const auto& env = option->get_envname();
      if (env.empty() || !env_set(env) || on_command_line(c.sources.args, *option)) continue;
      for (const auto& l : option->get_lnames()) {
        const auto at = message.find("--" + l);
        const auto end = at + l.size() + 2;
        if (at == std::string::npos ||
            (end < message.size() &&
             (std::isalnum(static_cast<unsigned char>(message[end])) != 0 || message[end] == '-')))
          continue;
        return fmt::format("{}='{}': ", env, printable(std::getenv(env.c_str())));
      }
    }
  }
  return "";
}

// The arguments that no option or positional took, in the order given, as one message.
std::string extras_message(const CLI::App& app) {
  std::vector<std::string> extras;
  for (const auto& arg : app.remaining(false))
    if (arg != "--") extras.push_back(arg); // the "--" that ended the options is no extra argument
  for (const auto* sub : app.get_subcommands()) {
    for (const auto& arg : sub->remaining(false))
      if (arg != "--") extras.push_back(arg);
  }
  return fmt::format("{} not expected: {}", extras.size() > 1 ? "the following arguments were" : "the argument was",
                     fmt::join(extras, " "));
}

// Parses `args` (run's command already split off); turns CLI11's errors into one-line usage errors.
// Returns an exit code when parsing itself answered (--help, --version), else nullopt.
std::optional<int> parse(Cli& c, std::vector<std::string> args, bool has_command) {
  const auto word = command_word(args);
  const auto subcommands = c.app.get_subcommands([&](const CLI::App* sub) { return sub->get_name() == word; });
  const bool unknown = !word.empty() && subcommands.empty();
  // The variables of the flags of this command line (global and the command's) by the one boolean rule,
  // an error naming the variable (CLI11's own error names only the option: "--json = maybe").
  for (const auto* app : {static_cast<CLI::App*>(&c.app), subcommands.empty() ? nullptr : subcommands.front()}) {
    if (app == nullptr) continue;
    for (const auto* option : app->get_options()) {
      if (option->get_expected_max() == 0 && !option->get_envname().empty())
        (void)env_bool(option->get_envname().c_str());
    }
  }
  std::reverse(args.begin(), args.end()); // CLI11 takes the arguments in reverse order
  try {
    c.app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return c.app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return c.app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return c.app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    // CLI11 lists the extra arguments in reverse ("not expected: 5s --ttl"): in the order given instead.
    throw usage_error(fmt::format("{}; see 'mongolock --help'", extras_message(c.app)));
  } catch (const CLI::ParseError& e) {
    // (Log redacts any URI in these messages and escapes what is not printable.)
    if (unknown && c.app.get_subcommands().empty()) {
      throw usage_error(fmt::format("unknown command '{}'; the commands are acquire, release, renew, run, status, "
                                    "list, history, check, break, doctor, init and completion (see 'mongolock "
                                    "--help')",
                                    word));
    }
    if (has_command && c.run_cmd->parsed() && c.run.names.empty()) {
      throw usage_error("run has no lock name: after run, the first '--' starts the command, so "
                        "'run -- NAME -- CMD' runs 'NAME -- CMD' without a name; write mongolock run NAME -- CMD "
                        "(a lock name never starts with '-', so it never needs a '--' before it)");
    }
    throw usage_error(fmt::format("{}{}; see 'mongolock --help'", variable_of(c, e.what()), e.what()));
  }
  return std::nullopt;
}

// --connect-timeout, which the driver takes as int32 milliseconds: refused above k_max_driver_duration.
Millis connect_timeout(const Cli& c) {
  return from_source(c.sources, &c.app, "--connect-timeout", [&](const std::string& what) {
    return parse_duration_at_most(c.texts.connect_timeout, what, k_max_driver_duration, "the MongoDB driver's limit");
  });
}

// After parsing: the config file (below the command line and the environment), the verbosity, the URI
// from its three layers, and the checks of values that are stored or printed later. Replaces `log`.
void settle_globals(Cli& c, VerbosityFlags flags, Log& log) {
  // The config file's read is bounded by the connect timeout as the command line or the environment
  // give it (the file cannot bound its own read).
  const auto file_timeout = connect_timeout(c);
  UriLayer file_uri;
  if (c.config_path) {
    file_uri = apply_config_file(c.app, *c.config_path, "--config file", file_timeout, c.sources.config_lines);
  } else if (env_set("MONGOLOCK_CONFIG")) {
    file_uri = apply_config_file(c.app, std::getenv("MONGOLOCK_CONFIG"), "config file (MONGOLOCK_CONFIG)", file_timeout,
                                 c.sources.config_lines);
  } else if (const auto& path = default_config_file(); !path.empty()) {
    file_uri = apply_config_file(c.app, path, "config file", file_timeout, c.sources.config_lines);
  }
  auto& global = c.global;
  const auto level = verbosity(flags, c.verbose, c.quiet);
  global.store.connect_timeout = connect_timeout(c);
  global.takeover_grace = duration_of(c.sources, &c.app, "--grace", c.texts.grace);
  global.store.count_commands = env_bool("MONGOLOCK_DEBUG_COMMANDS").value_or(false);

  const auto uri_source = choose_uri_source({c.uri_text, c.uri_file_text}, environment_uri_layer(), file_uri);
  if (uri_source.kind == UriSource::Kind::uri) global.store.uri = uri_source.value;
  if (uri_source.kind == UriSource::Kind::uri_file) {
    const auto what = uri_source.setting == "uri-file" ? "uri-file of the config file" : uri_source.setting;
    global.store.uri = read_uri_file(uri_source.value, what, global.store.connect_timeout);
  }
  log = Log(level, global.store.uri);
  if (uri_source.setting == "--uri" && !uri_password(global.store.uri).empty()) {
    log.warning("the password in --uri is visible to other users (ps, shell history); use --uri-file or "
                "MONGOLOCK_URI instead");
  }
  // Values that are stored or printed on stdout later (status, list, doctor): printable text only.
  for (const auto* process : {&c.acquire.process, &c.release.process, &c.renew.process}) {
    if (*process) validate_printable_text(**process, "--process");
  }
  validate_printable_text(global.store.database, "--db");
  validate_printable_text(global.store.collection, "--collection");
}

// run's options from their texts, then the run.
int run_run(Cli& c, Log& log) {
  auto& run = c.run;
  const auto& texts = c.run_texts;
  const auto& src = c.sources;
  const auto* cmd = c.run_cmd;
  run.ttl = duration_or(src, cmd, c.run_take.ttl, "--ttl", k_default_run_ttl);
  run.kill_grace = optional_duration(src, cmd, texts.kill_grace, "--kill-grace");
  run.renew_interval = optional_duration(src, cmd, texts.renew_interval, "--renew-interval");
  run.renew_deadline = optional_duration(src, cmd, texts.renew_deadline, "--renew-deadline");
  run.timeout = optional_duration(src, cmd, texts.timeout, "--timeout");
  run.kill_after = duration_of(src, cmd, "--kill-after", texts.kill_after);
  run.on_lost = texts.on_lost == "kill" ? OnLost::kill : texts.on_lost == "ignore" ? OnLost::ignore : OnLost::term;
  run.take = take_options(src, cmd, c.run_take);
  run.once_per = optional_duration(src, cmd, texts.once_per, "--once-per");
  run.history.enabled = !texts.no_history;
  run.history.keep = from_source(src, cmd, "--history-keep", [&](const std::string& what) {
    if (texts.history_keep < 1 || texts.history_keep > k_max_history_keep) {
      throw usage_error(
          fmt::format("{} {} is out of range; give 1 to {}", what, texts.history_keep, k_max_history_keep));
    }
    return texts.history_keep;
  });
  run.history.max_age = duration_of(src, cmd, "--history-max-age", texts.history_max_age);
  if (env_set("MONGOLOCK_HISTORY_PURGE_EVERY")) {
    run.history.purge_every =
        parse_count(std::getenv("MONGOLOCK_HISTORY_PURGE_EVERY"), "MONGOLOCK_HISTORY_PURGE_EVERY");
  }
  if (texts.metrics_file) {
    validate_printable_text(*texts.metrics_file, "--metrics-file");
    run.metrics_file = texts.metrics_file;
  }
  return run_command(c.global, run, log);
}

// Whether `cmd` was defined (run_cli() may define run alone) and named on this command line.
bool was_parsed(const CLI::App* cmd) { return cmd != nullptr && cmd->parsed(); }

// The one command that was parsed.
int dispatch(Cli& c, Log& log) {
  const auto& global = c.global;
  if (was_parsed(c.acquire_cmd)) {
    c.acquire.ttl = duration_or(c.sources, c.acquire_cmd, c.acquire_texts.ttl, "--ttl", k_default_acquire_ttl);
    c.acquire.take = take_options(c.sources, c.acquire_cmd, c.acquire_texts);
    return acquire_command(global, c.acquire, log);
  }
  if (was_parsed(c.release_cmd)) return release_command(global, c.release, log);
  if (was_parsed(c.renew_cmd)) {
    c.renew.ttl = optional_duration(c.sources, c.renew_cmd, c.renew_ttl, "--ttl");
    return renew_command(global, c.renew, log);
  }
  if (was_parsed(c.run_cmd)) return run_run(c, log);
  if (was_parsed(c.status_cmd)) return status_command(global, c.status, log);
  if (was_parsed(c.list_cmd)) return list_command(global, c.list, log);
  if (was_parsed(c.break_cmd)) return break_command(global, c.brk, log);
  if (was_parsed(c.doctor_cmd)) return doctor_command(global, log);
  if (was_parsed(c.history_cmd)) {
    c.history.since = optional_duration(c.sources, c.history_cmd, c.history_since, "--since");
    from_source(c.sources, c.history_cmd, "--limit", [&](const std::string& what) {
      if (c.history.limit < 1 || c.history.limit > k_max_history_keep) {
        throw usage_error(
            fmt::format("{} {} is out of range; give 1 to {}", what, c.history.limit, k_max_history_keep));
      }
      return 0;
    });
    return history_command(global, c.history, log);
  }
  if (was_parsed(c.check_cmd)) {
    c.check.max_age = optional_duration(c.sources, c.check_cmd, c.check_max_age, "--max-age");
    return check_command(global, c.check, log);
  }
  if (was_parsed(c.init_cmd)) {
    const auto max_age = duration_of(c.sources, c.init_cmd, "--history-max-age", c.init_history_max_age);
    return init_command(global, InitOptions{max_age}, log);
  }
  throw internal_error("no command was parsed");
}

// Whether `run` alone needs defining for this command line: the command is run, nothing asks for help (which
// lists every command), and no config file is in play (its sections name every command, and one for any
// command is checked: config.cpp). Defining every command costs ~0.2 ms more than run alone, on the one-shot's path
// (issue 30).
bool defines_run_alone(const std::vector<std::string>& args) {
  if (command_word(args) != "run") return false;
  for (const auto& arg : option_part(args)) {
    if (arg == "-h" || arg == "--help" || arg == "--help-all" || arg == "--config" || arg.starts_with("--config="))
      return false;
  }
  return !env_set("MONGOLOCK_CONFIG") && default_config_file().empty();
}

int run_cli(std::vector<std::string> args, Log& log) {
  Cli c;
  define_global(c);
  if (defines_run_alone(args)) {
    define_run(c);
  } else {
    define_acquire_release_renew(c);
    define_run(c);
    define_reports(c);
    define_admin(c);
  }
  // What the command line itself says, before parse() consumes args (run's command excluded).
  const auto command = split_command(args);
  c.run.command = command.value_or(std::vector<std::string>{});
  const auto flags = verbosity_flags(option_part(args));
  c.sources.args = option_part(args);
  if (const auto answered = parse(c, std::move(args), command.has_value())) return *answered;
  // The completion script comes from the definition alone: no config file, no server.
  if (was_parsed(c.completion_cmd)) {
    fmt::print("{}", completion_script(c.app, c.shell, {"release", "renew", "status", "break", "history"}));
    return k_exit_ok;
  }
  settle_globals(c, flags, log);
  return dispatch(c, log);
}

} // namespace

int cli_main(int argc, char** argv) {
  reset_inherited_signals(); // SIGCHLD default, job control unblocked: before anything can fork
  std::vector<std::string> args(argv + 1, argv + argc);
  Log log(Verbosity::normal, uri_in_arguments(args));
  if (args.size() == 2 && args[0] == k_release_orphaned_command) {
    // Executed by a run's guardian after mongolock died (orphan.hpp); not a command for users.
    return guarded_main(log, [&] { return release_orphaned(args[1], log); });
  }
  return guarded_main(log, [&] { return run_cli(std::move(args), log); });
}

} // namespace mongolock
