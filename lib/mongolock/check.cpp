#include <mongolock/check.hpp>
#include <mongolock/history.hpp>
#include <mongolock/text.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace mongolock {

namespace {

// A run whose outcome says how the job went: not skipped, not due, nor stopped for a newer run (replaced:
// the newer run's outcome counts).
bool executed(const RunRecord& run) {
  return run.outcome != outcome_name(Outcome::skipped) && run.outcome != outcome_name(Outcome::not_due) &&
         run.outcome != outcome_name(Outcome::replaced);
}

// The order in which states are worse: OK < WARNING < UNKNOWN < CRITICAL.
int severity(CheckState state) {
  switch (state) {
  case CheckState::ok:
    return 0;
  case CheckState::warning:
    return 1;
  case CheckState::unknown:
    return 2;
  case CheckState::critical:
    return 3;
  }
  return 3;
}

// Stored text for the plugin line: printable() (one line), and every '|' replaced by '_': '|' starts the
// perfdata in the monitoring-plugin format, so a '|' in a name or host would make agents misparse the line
// (Monitoring Plugins Development Guidelines, "Plugin Output").
std::string plugin_text(const std::string& text) {
  auto out = printable(text);
  std::replace(out.begin(), out.end(), '|', '_');
  return out;
}

// A perfdata label: plugin_text(), '=' replaced by '_' (a label may not hold '='), quoted with ' and a
// "'" doubled (the guidelines' rules for labels).
std::string quoted_label(const std::string& label) {
  std::string out = "'";
  for (const char c : plugin_text(label)) {
    out += c == '=' ? '_' : c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

// Seconds with millisecond precision, "U" (the plugin convention for an unknown value) when none.
std::string seconds(std::optional<Millis> d) {
  if (!d) return "U";
  const auto ms = std::max<Millis::rep>(d->count(), 0);
  return fmt::format("{}.{:03}s", ms / 1000, ms % 1000);
}

std::string clause(const NameCheck& c, ServerTime now, const CheckPolicy& policy) {
  const auto name = fmt::format("'{}'", plugin_text(c.name));
  const auto success =
      c.last_success ? fmt::format("{} {} ago", plugin_text(c.last_success->host), format_duration(*c.age)) : "never";
  if (!c.last_success || *c.age > policy.max_age) {
    if (!c.last_run) return fmt::format("{} has never run", name);
    return fmt::format("{} has not succeeded within {} (last success: {}; last run: {} on {} {} ago)", name,
                       format_duration(policy.max_age), success, plugin_text(c.last_run->outcome),
                       plugin_text(c.last_run->host), format_duration(now - c.last_run->ended_at));
  }
  if (c.last_run && c.last_run->outcome != outcome_name(Outcome::ok)) {
    return fmt::format("{} {} on {} {} ago (exit {}; last success: {})", name, plugin_text(c.last_run->outcome),
                       plugin_text(c.last_run->host), format_duration(now - c.last_run->ended_at),
                       c.last_run->exit_code, success);
  }
  return fmt::format("{} succeeded on {}", name, success);
}

} // namespace

const char* check_state_name(CheckState state) {
  switch (state) {
  case CheckState::ok:
    return "OK";
  case CheckState::warning:
    return "WARNING";
  case CheckState::critical:
    return "CRITICAL";
  case CheckState::unknown:
    return "UNKNOWN";
  }
  return "UNKNOWN";
}

NameCheck check_name(const std::string& name, const std::vector<RunRecord>& runs, ServerTime now,
                     const CheckPolicy& policy) {
  NameCheck c;
  c.name = name;
  for (const auto& run : runs) {
    if (!c.last_run && executed(run)) c.last_run = run;
    if (!c.last_success && run.outcome == outcome_name(Outcome::ok)) c.last_success = run;
    if (c.last_run && c.last_success) break;
  }
  if (c.last_success) c.age = now - c.last_success->ended_at;
  if (!c.last_success || *c.age > policy.max_age) {
    c.state = CheckState::critical;
  } else if (c.last_run && c.last_run->outcome != outcome_name(Outcome::ok)) {
    c.state = policy.on_failed;
  } else {
    c.state = CheckState::ok;
  }
  c.text = clause(c, now, policy);
  return c;
}

CheckState worst_state(const std::vector<NameCheck>& checks) {
  auto worst = CheckState::ok;
  for (const auto& c : checks) {
    if (severity(c.state) > severity(worst)) worst = c.state;
  }
  return worst;
}

std::string check_line(const std::vector<NameCheck>& checks, const CheckPolicy& policy) {
  auto ordered = checks;
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const NameCheck& a, const NameCheck& b) { return severity(a.state) > severity(b.state); });
  std::string text;
  std::string perfdata;
  for (const auto& c : ordered) {
    text += (text.empty() ? "" : "; ") + c.text;
  }
  for (const auto& c : checks) {
    std::optional<Millis> duration; // (GCC 12 warns on a conditional optional here)
    if (c.last_run && c.last_run->duration) duration = *c.last_run->duration;
    perfdata += fmt::format(" {}={};;{};0 {}={};;;0", quoted_label(c.name + "_age"), seconds(c.age),
                            policy.max_age.count() / 1000, quoted_label(c.name + "_duration"), seconds(duration));
  }
  return fmt::format("MONGOLOCK {} - {} |{}", check_state_name(worst_state(checks)), text, perfdata);
}

std::string check_unknown_line(const std::string& why) {
  return fmt::format("MONGOLOCK UNKNOWN - cannot read the run history: {}", plugin_text(why));
}

} // namespace mongolock
