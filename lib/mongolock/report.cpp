#include <mongolock/identity.hpp>
#include <mongolock/liveness.hpp>
#include <mongolock/process.hpp>
#include <mongolock/report.hpp>
#include <mongolock/text.hpp>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <charconv>
#include <signal.h>

namespace mongolock {

namespace {

using Json = nlohmann::ordered_json;

Json time_or_null(ServerTime t) { return t == ServerTime{} ? Json(nullptr) : Json(format_time(t)); }

Json to_json(const LockView& view) {
  const auto& lock = view.lock;
  Json j;
  j["name"] = lock.name;
  j["program"] = lock.program;
  j["slot"] = lock.slot > 0 ? Json(lock.slot) : Json(nullptr);
  j["state"] = lock_state(view);
  if (!lock.malformed.empty()) j["malformed"] = lock.malformed;
  j["holder"] = lock.process;
  j["pid_ns"] = lock.pid_ns.empty() ? Json(nullptr) : Json(lock.pid_ns);
  j["host"] = lock.host;
  j["user"] = lock.user;
  j["command"] = lock.command.empty() ? Json(nullptr) : Json(lock.command);
  j["acquired_at"] = format_time(lock.acquired_at);
  j["renewed_at"] = format_time(lock.renewed_at);
  j["expires_at"] = format_time(lock.expires_at);
  j["expires_in_ms"] = (lock.expires_at - view.now).count();
  j["ttl_ms"] = lock.ttl.count();
  j["hold_until"] = time_or_null(lock.hold_until);
  j["released_at"] = lock.released_at ? Json(format_time(*lock.released_at)) : Json(nullptr);
  j["fence"] = lock.fence ? Json(*lock.fence) : Json(nullptr);
  j["holder_alive"] = view.holder_alive ? Json(*view.holder_alive) : Json(nullptr);
  return j;
}

std::string relative(ServerTime t, ServerTime now) {
  return t >= now ? fmt::format("in {}", format_duration(t - now)) : fmt::format("{} ago", format_duration(now - t));
}

Json to_json(const QueuedWaiter& waiter) {
  Json j;
  j["position"] = waiter.position;
  j["waiter"] = waiter.ticket.process;
  j["waiting_since"] = format_time(waiter.ticket.since);
  j["ticket_expires_at"] = format_time(waiter.ticket.expires_at);
  return j;
}

Json waiters_json(const std::vector<QueuedWaiter>& waiters, const std::string& name) {
  Json j = Json::array();
  for (const auto& waiter : waiters) {
    if (waiter.ticket.name == name) j.push_back(to_json(waiter));
  }
  return j;
}

std::string alive_text(const std::optional<bool>& alive) { return alive ? (*alive ? "yes" : "no (dead)") : "-"; }

// {"count", "hosts", "host_names"}: skipped attempts folded into a run (history.hpp: SkipFold).
Json skips_json(const SkipFold& fold) {
  Json j;
  j["count"] = fold.count;
  j["hosts"] = fold.hosts;
  j["host_names"] = fold.names;
  return j;
}

Json to_json(const RunRecord& run) {
  Json j;
  j["name"] = run.name;
  j["process"] = run.process;
  j["pid_ns"] = run.pid_ns.empty() ? Json(nullptr) : Json(run.pid_ns);
  j["host"] = run.host;
  j["user"] = run.user;
  j["command"] = run.command;
  j["started_at"] = run.started_at ? Json(format_time(*run.started_at)) : Json(nullptr);
  j["ended_at"] = format_time(run.ended_at);
  j["duration_ms"] = run.duration ? Json(run.duration->count()) : Json(nullptr);
  j["waited_ms"] = run.waited.count();
  j["outcome"] = run.outcome;
  j["exit_code"] = run.exit_code;
  j["signal"] = run.signal.empty() ? Json(nullptr) : Json(run.signal);
  j["held_by"] = run.held_by.empty() ? Json(nullptr) : Json(run.held_by);
  j["fence"] = run.fence ? Json(*run.fence) : Json(nullptr);
  j["skips"] = skips_json(SkipFold{.count = run.skips, .hosts = run.skip_hosts, .names = run.skipped_on});
  return j;
}

// A history row: its run, with the skipped attempts folded into it.
Json to_json(const HistoryRow& row) {
  auto j = to_json(row.run);
  j["skips"] = skips_json(row.skips);
  return j;
}

Json last_run_json(const std::optional<RunRecord>& run) { return run ? to_json(*run) : Json(nullptr); }

// "2026-11-23 04:00:01": a table's time column (UTC, to the second).
std::string table_time(ServerTime t) {
  return fmt::format("{:%Y-%m-%d %H:%M:%S}", std::chrono::floor<std::chrono::seconds>(t));
}

// "skipped on 198 hosts (a, b, c, d, e, …)", "skipped 198 times on 1 host (web-1)": the attempts folded
// into a history line.
std::string skips_text(const SkipFold& fold) {
  const auto hosts = fmt::format("{} host{}", fold.hosts, fold.hosts == 1 ? "" : "s");
  auto text =
      fold.count == fold.hosts ? "skipped on " + hosts : fmt::format("skipped {} times on {}", fold.count, hosts);
  if (fold.names.empty()) return text;
  std::string names;
  for (const auto& name : fold.names)
    names += (names.empty() ? "" : ", ") + printable(name);
  if (std::cmp_greater(fold.hosts, fold.names.size())) names += ", \u2026";
  return text + " (" + names + ")";
}

// "held by web-1:4242, SIGTERM, waited 3s, skipped on 198 hosts (…)": what else a history line says.
std::string run_note(const HistoryRow& row) {
  const auto& run = row.run;
  std::string note;
  const auto add = [&note](const std::string& part) { note += (note.empty() ? "" : ", ") + part; };
  if (!run.held_by.empty()) {
    add((run.outcome == outcome_name(Outcome::replaced) ? "replaced by " : "held by ") + printable(run.held_by));
  }
  if (!run.signal.empty()) add("SIG" + printable(run.signal));
  if (run.waited >= Millis(1000)) add("waited " + format_duration(run.waited));
  // A group of skipped attempts says how many; one attempt alone is its own line.
  const bool group = run.outcome == outcome_name(Outcome::skipped);
  if (row.skips.count > (group ? 1 : 0)) add(skips_text(row.skips));
  return note;
}

} // namespace

std::string lock_state(const LockView& view) {
  if (!view.lock.malformed.empty()) return "malformed";
  if (view.lock.expires_at <= view.now) return "expired";
  return view.lock.released_at ? "released" : "held";
}

bool is_live(const LockView& view) { return !view.lock.malformed.empty() || view.lock.expires_at > view.now; }

std::optional<bool> holder_alive_here(const std::string& holder, std::optional<std::int64_t> start) {
  const auto colon = holder.rfind(':');
  if (colon == std::string::npos || holder.substr(0, colon) != host_name()) return std::nullopt;
  int pid = 0;
  const auto digits = std::string_view(holder).substr(colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (ec != std::errc() || end != digits.data() + digits.size() || pid <= 0) return std::nullopt;
  if (start && proc_is_own()) {
    if (const auto now_start = process_start(pid)) return *now_start == *start;
  }
  return kill(pid, 0) == 0 || errno == EPERM;
}

std::string status_text(const std::string& name, const std::vector<LockView>& locks,
                        const std::vector<QueuedWaiter>& waiters, ServerTime now,
                        const std::optional<RunRecord>& last_run) {
  std::string out;
  if (locks.empty()) out = fmt::format("name: {}\nstate: free\n", name);
  for (const auto& view : locks) {
    const auto& lock = view.lock;
    if (!out.empty()) out += "\n";
    out += fmt::format("name: {}\n", printable(lock.name));
    if (lock.slot > 0) out += fmt::format("slot: {}\n", lock.slot);
    out += fmt::format("state: {}\nholder: {}\n", lock_state(view), printable(holder_label(lock.process, lock.pid_ns)));
    if (!lock.malformed.empty()) {
      out += fmt::format("malformed: {} (it never expires; 'mongolock break {} --force' removes it)\n", lock.malformed,
                         printable(lock.program));
    }
    if (view.holder_alive) out += fmt::format("holder alive: {}\n", alive_text(view.holder_alive));
    if (!lock.user.empty()) out += fmt::format("user: {}\n", printable(lock.user));
    if (!lock.command.empty()) out += fmt::format("command: {}\n", printable(lock.command));
    out += fmt::format("acquired: {} ({})\n", format_time(lock.acquired_at), relative(lock.acquired_at, view.now));
    out += fmt::format("renewed: {} ({})\n", format_time(lock.renewed_at), relative(lock.renewed_at, view.now));
    out += fmt::format("expires: {} ({})\n", format_time(lock.expires_at), relative(lock.expires_at, view.now));
    out += fmt::format("ttl: {}\n", format_duration(lock.ttl));
    if (lock.hold_until != ServerTime{}) {
      out += fmt::format("minimum hold until: {} ({})\n", format_time(lock.hold_until),
                         relative(lock.hold_until, view.now));
    }
    if (lock.released_at) out += fmt::format("released: {}\n", format_time(*lock.released_at));
    if (lock.fence) out += fmt::format("fence: {}\n", *lock.fence);
  }
  if (!waiters.empty()) {
    out += fmt::format("\nwaiters: {}\n", waiters.size());
    for (const auto& waiter : waiters) {
      out += fmt::format("  {}. {}, waiting since {} ({})\n", waiter.position, printable(waiter.ticket.process),
                         format_time(waiter.ticket.since), relative(waiter.ticket.since, now));
    }
  }
  if (last_run) {
    const auto& run = *last_run;
    out += fmt::format("\nlast run: {} on {}, ended {} ({}){}, exit {}\n", printable(run.outcome),
                       printable(holder_label(run.process, run.pid_ns)), format_time(run.ended_at),
                       relative(run.ended_at, now),
                       run.duration ? ", took " + format_duration(*run.duration) : std::string(), run.exit_code);
  }
  return out;
}

std::string status_json(const std::string& name, const std::vector<LockView>& locks,
                        const std::vector<QueuedWaiter>& waiters, const std::optional<RunRecord>& last_run) {
  Json j;
  j["name"] = name;
  bool held = false;
  for (const auto& view : locks)
    held = held || is_live(view);
  j["state"] = held ? "held" : "free";
  j["locks"] = Json::array();
  for (const auto& view : locks)
    j["locks"].push_back(to_json(view));
  j["waiters"] = waiters_json(waiters, name);
  j["last_run"] = last_run_json(last_run);
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

static std::string locks_table(const std::vector<LockView>& locks, const LastRuns& last_runs);

std::string list_text(const std::vector<LockView>& locks, const std::vector<QueuedWaiter>& waiters, ServerTime now,
                      const LastRuns& last_runs) {
  std::string out = locks.empty() ? "no locks held\n" : locks_table(locks, last_runs);
  if (waiters.empty()) return out;
  std::size_t name_width = 11, waiter_width = 6;
  for (const auto& waiter : waiters) {
    name_width = std::max(name_width, printable(waiter.ticket.name).size());
    waiter_width = std::max(waiter_width, printable(waiter.ticket.process).size());
  }
  out +=
      fmt::format("\n{:<{}}  {:<3}  {:<{}}  {}\n", "WAITING FOR", name_width, "POS", "WAITER", waiter_width, "SINCE");
  for (const auto& waiter : waiters) {
    out += fmt::format("{:<{}}  {:<3}  {:<{}}  {} ({})\n", printable(waiter.ticket.name), name_width, waiter.position,
                       printable(waiter.ticket.process), waiter_width, format_time(waiter.ticket.since),
                       relative(waiter.ticket.since, now));
  }
  return out;
}

static std::string locks_table(const std::vector<LockView>& locks, const LastRuns& last_runs) {
  std::size_t name_width = 4, holder_width = 6;
  for (const auto& view : locks) {
    name_width = std::max(name_width, printable(view.lock.program).size());
    holder_width = std::max(holder_width, printable(holder_label(view.lock.process, view.lock.pid_ns)).size());
  }
  std::string out = fmt::format("{:<{}}  {:<{}}  {:<24}  {:<12}  {:<9}  {}\n", "NAME", name_width, "HOLDER",
                                holder_width, "ACQUIRED", "EXPIRES", "ALIVE", "LAST RUN");
  for (const auto& view : locks) {
    const auto& lock = view.lock;
    const auto last = last_runs.find(lock.name);
    const auto last_text = last == last_runs.end() ? std::string("-")
                                                   : fmt::format("{} {}", printable(last->second.outcome),
                                                                 relative(last->second.ended_at, view.now));
    out += fmt::format("{:<{}}  {:<{}}  {:<24}  {:<12}  {:<9}  {}\n", printable(lock.program), name_width,
                       printable(holder_label(lock.process, lock.pid_ns)), holder_width, format_time(lock.acquired_at),
                       relative(lock.expires_at, view.now), alive_text(view.holder_alive), last_text);
  }
  return out;
}

std::string list_json(const std::vector<LockView>& locks, const std::vector<QueuedWaiter>& waiters,
                      const LastRuns& last_runs) {
  Json j = Json::array();
  for (const auto& view : locks) {
    auto lock = to_json(view);
    lock["waiters"] = waiters_json(waiters, view.lock.name);
    const auto last = last_runs.find(view.lock.name);
    lock["last_run"] = last == last_runs.end() ? Json(nullptr) : to_json(last->second);
    j.push_back(std::move(lock));
  }
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string history_text(const std::vector<HistoryRow>& rows, const std::optional<std::string>& name, ServerTime now) {
  if (rows.empty()) {
    return name ? fmt::format("no runs recorded for '{}'\n", printable(*name)) : std::string("no runs recorded\n");
  }
  std::size_t name_width = 4, process_width = 8, outcome_width = 7;
  for (const auto& row : rows) {
    const auto& run = row.run;
    name_width = std::max(name_width, printable(run.name).size());
    process_width = std::max(process_width, printable(holder_label(run.process, run.pid_ns)).size());
    outcome_width = std::max(outcome_width, printable(run.outcome).size());
  }
  std::string out =
      fmt::format("{:<19}  {:<{}}  {:<{}}  {:<8}  {:<{}}  {:<4}  {}\n", "STARTED (UTC)", "NAME", name_width, "HOST:PID",
                  process_width, "DURATION", "OUTCOME", outcome_width, "EXIT", "NOTE");
  for (const auto& row : rows) {
    const auto& run = row.run;
    const auto line = fmt::format("{:<19}  {:<{}}  {:<{}}  {:<8}  {:<{}}  {:<4}  {}",
                                  table_time(run.started_at.value_or(run.ended_at)), printable(run.name), name_width,
                                  printable(holder_label(run.process, run.pid_ns)), process_width,
                                  run.duration ? format_duration(*run.duration) : std::string("-"),
                                  printable(run.outcome), outcome_width, run.exit_code, run_note(row));
    out += line.substr(0, line.find_last_not_of(' ') + 1) + "\n";
  }
  const auto summary = summarize(rows);
  out += fmt::format("{} run{}: {} ok, {} failed, {} skipped", summary.runs, summary.runs == 1 ? "" : "s", summary.ok,
                     summary.failures, summary.skipped);
  if (summary.not_due > 0) out += fmt::format(", {} not due", summary.not_due);
  if (summary.replaced > 0) out += fmt::format(", {} replaced", summary.replaced);
  if (summary.median_duration) {
    out += fmt::format("; duration median {}, max {}", format_duration(*summary.median_duration),
                       format_duration(*summary.max_duration));
  }
  out += fmt::format("; newest ended {}\n", relative(rows.front().run.ended_at, now));
  return out;
}

std::string check_json(const std::vector<NameCheck>& checks, const CheckPolicy& policy) {
  Json j;
  const auto state = worst_state(checks);
  j["state"] = check_state_name(state);
  j["exit_code"] = static_cast<int>(state);
  j["max_age_ms"] = policy.max_age.count();
  j["names"] = Json::array();
  for (const auto& c : checks) {
    Json n;
    n["name"] = c.name;
    n["state"] = check_state_name(c.state);
    n["age_ms"] = c.age ? Json(c.age->count()) : Json(nullptr);
    n["last_success"] = c.last_success ? to_json(*c.last_success) : Json(nullptr);
    n["last_run"] = c.last_run ? to_json(*c.last_run) : Json(nullptr);
    n["text"] = c.text;
    j["names"].push_back(std::move(n));
  }
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string check_unknown_json(const std::string& why) {
  Json j;
  j["state"] = check_state_name(CheckState::unknown);
  j["exit_code"] = static_cast<int>(CheckState::unknown);
  j["error"] = why;
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string history_json(const std::vector<HistoryRow>& rows) {
  Json j;
  j["runs"] = Json::array();
  for (const auto& row : rows)
    j["runs"].push_back(to_json(row));
  const auto summary = summarize(rows);
  Json sum;
  sum["runs"] = summary.runs;
  sum["ok"] = summary.ok;
  sum["failures"] = summary.failures;
  sum["skipped"] = summary.skipped;
  sum["not_due"] = summary.not_due;
  sum["replaced"] = summary.replaced;
  sum["median_duration_ms"] = summary.median_duration ? Json(summary.median_duration->count()) : Json(nullptr);
  sum["max_duration_ms"] = summary.max_duration ? Json(summary.max_duration->count()) : Json(nullptr);
  j["summary"] = sum;
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

} // namespace mongolock
