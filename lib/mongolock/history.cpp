#include <mongolock/error.hpp>
#include <mongolock/history.hpp>
#include <mongolock/text.hpp>
#include <mongolock/uri.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace mongolock {

namespace {

constexpr std::size_t k_max_recorded_argument = 256; // bytes of one recorded argument
constexpr std::size_t k_max_recorded_arguments = 32; // recorded arguments, argv[0] included

// The longest prefix of `s` of at most `limit` bytes that does not cut a valid UTF-8 sequence in two.
std::string_view utf8_prefix(std::string_view s, std::size_t limit) {
  std::size_t end = 0;
  while (end < s.size()) {
    char32_t code_point = 0;
    const auto length = std::max<std::size_t>(decode_utf8(s, end, code_point), 1); // an invalid byte alone
    if (end + length > limit) break;
    end += length;
  }
  return s.substr(0, end);
}

bool one_in(std::int64_t n) {
  if (n <= 1) return true;
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return std::uniform_int_distribution<std::int64_t>(1, n)(generator) == 1;
}

} // namespace

std::string_view outcome_name(Outcome outcome) {
  switch (outcome) {
  case Outcome::ok:
    return "ok";
  case Outcome::failed:
    return "failed";
  case Outcome::timeout:
    return "timeout";
  case Outcome::lease_lost:
    return "lease-lost";
  case Outcome::not_executable:
    return "not-executable";
  case Outcome::skipped:
    return "skipped";
  case Outcome::not_due:
    return "not-due";
  case Outcome::replaced:
    return "replaced";
  case Outcome::error:
    return "error";
  }
  return "error";
}

const std::vector<Outcome>& all_outcomes() {
  static const std::vector<Outcome> k_all{Outcome::ok,         Outcome::failed,         Outcome::timeout,
                                          Outcome::lease_lost, Outcome::not_executable, Outcome::skipped,
                                          Outcome::not_due,    Outcome::replaced,       Outcome::error};
  return k_all;
}

void validate_history_policy(const HistoryPolicy& policy) {
  if (policy.keep < 1 || policy.keep > k_max_history_keep) {
    throw usage_error(fmt::format("--history-keep {} is out of range; give 1 to {}", policy.keep, k_max_history_keep));
  }
  if (policy.purge_every < 1) {
    throw usage_error(fmt::format("MONGOLOCK_HISTORY_PURGE_EVERY {} is out of range; give 1 or more (1: purge on "
                                  "every run)",
                                  policy.purge_every));
  }
}

std::vector<std::string> recorded_command(const std::vector<std::string>& argv, std::string_view configured_uri) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (i + 1 == k_max_recorded_arguments && argv.size() > k_max_recorded_arguments) {
      out.push_back(fmt::format("\u2026 {} more", argv.size() - i));
      break;
    }
    auto redacted = scrub_secrets(redact_text(argv[i]), configured_uri);
    if (redacted.size() > k_max_recorded_argument) {
      redacted = std::string(utf8_prefix(redacted, k_max_recorded_argument - 3)) + "\u2026";
    }
    out.push_back(std::move(redacted));
  }
  return out;
}

void record_runs(LockStore& store, std::vector<RunRecord> runs, const HistoryPolicy& policy, ServerTime now,
                 const Log& log) {
  if (!policy.enabled || runs.empty()) return;
  try {
    store.insert_runs(runs);
    log.debugf("recorded the run in the history of '{}' ({})", runs.front().name, runs.front().outcome);
  } catch (const Error& e) {
    log.warning(fmt::format("the run was not recorded in the history ({}); its exit status is unchanged", e.what()));
    return;
  }
  if (!one_in(policy.purge_every)) return;
  try {
    std::int64_t deleted = 0;
    for (const auto& run : runs)
      deleted += store.purge_runs(run.name, policy.keep, now - policy.max_age);
    log.debugf("purged {} old run(s) from the history (keeping {} per name, none older than {})", deleted, policy.keep,
               format_duration(policy.max_age));
  } catch (const Error& e) {
    log.warning(fmt::format("old runs were not purged from the history ({}); a later run tries again", e.what()));
  }
}

HistorySummary summarize(const std::vector<RunRecord>& runs) {
  HistorySummary summary;
  std::vector<Millis> durations;
  for (const auto& run : runs) {
    ++summary.runs;
    if (run.outcome == outcome_name(Outcome::ok)) {
      ++summary.ok;
    } else if (run.outcome == outcome_name(Outcome::skipped)) {
      ++summary.skipped;
    } else if (run.outcome == outcome_name(Outcome::not_due)) {
      ++summary.not_due;
    } else if (run.outcome == outcome_name(Outcome::replaced)) {
      ++summary.replaced;
    } else {
      ++summary.failures;
    }
    if (run.duration) durations.push_back(*run.duration);
  }
  if (durations.empty()) return summary;
  std::sort(durations.begin(), durations.end());
  const auto middle = durations.size() / 2;
  summary.median_duration =
      durations.size() % 2 == 1 ? durations[middle] : (durations[middle - 1] + durations[middle]) / 2;
  summary.max_duration = durations.back();
  return summary;
}

} // namespace mongolock
