#include <mongolock/error.hpp>
#include <mongolock/history.hpp>
#include <mongolock/text.hpp>
#include <mongolock/uri.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <utility>

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

bool is_attempt(std::string_view outcome) {
  return outcome == outcome_name(Outcome::skipped) || outcome == outcome_name(Outcome::not_due);
}

namespace {

// Adds `attempt`'s host to `fold` (`seen`: the hosts counted so far).
void add_skip(SkipFold& fold, std::set<std::string>& seen, const RunRecord& attempt) {
  ++fold.count;
  if (seen.insert(attempt.host).second) ++fold.hosts;
}

// The fold's sample of host names: the first k_skip_host_sample of `seen` (sorted).
void sample_hosts(SkipFold& fold, const std::set<std::string>& seen) {
  fold.names.clear();
  for (const auto& host : seen) {
    if (fold.names.size() == k_skip_host_sample) break;
    fold.names.push_back(host);
  }
}

// Before a purge may delete attempts of `name`: the executed runs they name get the count of every
// attempt still stored, when higher than the one they stored (attempts written after the holder counted).
// Three commands: the attempts, the runs, one update (only of the runs whose count grows).
void close_runs(RunStore& store, const std::string& name) {
  const auto attempts = store.runs_of_kind(name, std::nullopt, k_max_history_keep, RunKind::attempts);
  std::map<std::string, std::pair<SkipFold, std::set<std::string>>> by_lock;
  for (const auto& attempt : attempts) {
    if (attempt.outcome != outcome_name(Outcome::skipped) || attempt.held_lock.empty()) continue;
    auto& [fold, seen] = by_lock[attempt.held_lock];
    add_skip(fold, seen, attempt);
  }
  std::vector<std::string> locks;
  for (const auto& entry : by_lock)
    locks.push_back(entry.first);
  std::vector<RunRecord> grown;
  for (auto run : store.runs_holding(name, locks)) {
    auto& [fold, seen] = by_lock[run.lock];
    if (fold.count <= run.skips) continue;
    for (const auto& host : run.skipped_on)
      seen.insert(host);
    sample_hosts(fold, seen);
    run.skips = fold.count;
    run.skip_hosts = std::max({fold.hosts, run.skip_hosts, static_cast<std::int64_t>(seen.size())});
    run.skipped_on = fold.names;
    grown.push_back(std::move(run));
  }
  if (!grown.empty()) store.update_skips(grown);
}

} // namespace

void purge_history(RunStore& store, const std::vector<RunRecord>& runs, const HistoryPolicy& policy, ServerTime now,
                   const Log& log) {
  try {
    std::int64_t deleted = 0;
    for (const auto& run : runs) {
      close_runs(store, run.name);
      deleted += store.purge_runs(run.name, policy.keep, now - policy.max_age, now);
    }
    log.debugf("purged {} old run(s) from the history (keeping {} executed runs and {} skipped or not-due "
               "attempts per name, none older than {})",
               deleted, policy.keep, policy.keep, format_duration(policy.max_age));
  } catch (const Error& e) {
    log.warning(fmt::format("old runs were not purged from the history ({}); a later run tries again", e.what()));
  }
}

bool record_runs(RunStore& store, std::vector<RunRecord> runs, const HistoryPolicy& policy, ServerTime now,
                 const Log& log, std::vector<RunRecord>* deferred) {
  if (!policy.enabled || runs.empty()) return false;
  const bool executed = !is_attempt(runs.front().outcome);
  try {
    store.insert_runs(runs);
    log.debugf("recorded the run in the history of '{}' ({})", runs.front().name, runs.front().outcome);
  } catch (const Error& e) {
    log.warning(fmt::format("the run was not recorded in the history ({}); its exit status is unchanged", e.what()));
    return false;
  }
  // An attempt stops here: a skipped run of a fleet costs the server one write for the history, no purge.
  if (!executed || !one_in(policy.purge_every)) return true;
  if (deferred != nullptr) {
    *deferred = std::move(runs);
  } else {
    purge_history(store, runs, policy, now, log);
  }
  return true;
}

std::vector<RunRecord> last_runs(RunStore& store, const std::vector<std::string>& names, const Log& log) {
  if (names.empty()) return {};
  std::map<std::string, RunRecord> last;
  for (auto& run : store.last_runs(names))
    last.insert_or_assign(run.name, std::move(run));
  std::vector<std::pair<std::string, std::optional<ServerTime>>> since;
  since.reserve(names.size());
  for (const auto& name : names) {
    const auto stored = last.find(name);
    since.emplace_back(name, stored == last.end() ? std::nullopt : std::optional(stored->second.ended_at));
  }
  // Runs that ended since each summary: the newest of each name replaces it (ties by _id, newest first).
  std::map<std::string, RunRecord> newer;
  for (auto& run : store.executed_since(since)) {
    const auto stored = last.find(run.name);
    if (stored != last.end() && run.ended_at <= stored->second.ended_at) continue;
    const auto found = newer.find(run.name);
    if (found == newer.end()) {
      newer.emplace(run.name, std::move(run));
    } else if (run.ended_at > found->second.ended_at ||
               (run.ended_at == found->second.ended_at && run.id > found->second.id)) {
      found->second = std::move(run);
    }
  }
  std::vector<RunRecord> updated;
  for (auto& [name, run] : newer) {
    updated.push_back(run);
    last.insert_or_assign(name, std::move(run));
  }
  if (!updated.empty()) {
    try {
      store.record_last_runs(updated);
    } catch (const Error& e) {
      log.debugf("the names' last runs were not stored ({}); the next read finds them again", e.what());
    }
  }
  std::vector<RunRecord> out;
  out.reserve(last.size());
  for (auto& entry : last)
    out.push_back(std::move(entry.second));
  return out;
}

std::vector<HistoryRow> fold_history(const std::vector<RunRecord>& executed, const std::vector<RunRecord>& attempts,
                                     std::size_t limit) {
  // Executed runs by (name, lock), so that each attempt finds the run that held the lock it met.
  std::map<std::pair<std::string, std::string>, std::size_t> by_lock;
  std::vector<HistoryRow> rows;
  std::vector<std::set<std::string>> seen;
  for (const auto& run : executed) {
    if (!run.lock.empty()) by_lock.emplace(std::pair{run.name, run.lock}, rows.size());
    rows.push_back(HistoryRow{.run = run, .skips = {}});
    seen.emplace_back();
  }
  // Groups of attempts whose run is not listed: one per (name, holder), the newest attempt first.
  std::map<std::pair<std::string, std::string>, std::size_t> by_holder;
  for (const auto& attempt : attempts) {
    if (attempt.outcome != outcome_name(Outcome::skipped)) {
      rows.push_back(HistoryRow{.run = attempt, .skips = {}});
      seen.emplace_back();
      continue;
    }
    if (const auto run = by_lock.find({attempt.name, attempt.held_lock});
        !attempt.held_lock.empty() && run != by_lock.end()) {
      add_skip(rows[run->second].skips, seen[run->second], attempt);
      continue;
    }
    const auto key = std::pair{attempt.name, attempt.held_lock.empty() ? "by " + attempt.held_by : attempt.held_lock};
    auto group = by_holder.find(key);
    if (group == by_holder.end()) {
      group = by_holder.emplace(key, rows.size()).first;
      rows.push_back(HistoryRow{.run = attempt, .skips = {}});
      seen.emplace_back();
    } else if (attempt.ended_at > rows[group->second].run.ended_at) {
      rows[group->second].run = attempt;
    }
    add_skip(rows[group->second].skips, seen[group->second], attempt);
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto& row = rows[i];
    // The run's own count (taken when it ended) covers attempts purged since; the stored attempts cover
    // those written after it counted. Hosts: the sample it kept and those seen now.
    for (const auto& host : row.run.skipped_on)
      seen[i].insert(host);
    row.skips.count = std::max(row.skips.count, row.run.skips);
    row.skips.hosts = std::max({row.skips.hosts, row.run.skip_hosts, static_cast<std::int64_t>(seen[i].size())});
    sample_hosts(row.skips, seen[i]);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const HistoryRow& a, const HistoryRow& b) {
    return a.run.ended_at != b.run.ended_at ? a.run.ended_at > b.run.ended_at : a.run.id > b.run.id;
  });
  if (rows.size() > limit) rows.resize(limit);
  return rows;
}

std::vector<HistoryRow> one_row_each(const std::vector<RunRecord>& runs) {
  std::vector<HistoryRow> rows;
  rows.reserve(runs.size());
  for (const auto& run : runs)
    rows.push_back(HistoryRow{.run = run, .skips = {}});
  return rows;
}

HistorySummary summarize(const std::vector<HistoryRow>& rows) {
  HistorySummary summary;
  std::vector<Millis> durations;
  for (const auto& row : rows) {
    const auto& run = row.run;
    if (run.outcome == outcome_name(Outcome::skipped)) {
      const auto count = std::max<std::int64_t>(row.skips.count, 1); // a group counts its attempts
      summary.runs += count;
      summary.skipped += count;
      continue;
    }
    ++summary.runs;
    summary.runs += row.skips.count;
    summary.skipped += row.skips.count;
    if (run.outcome == outcome_name(Outcome::ok)) {
      ++summary.ok;
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

// --- RunStore's defaults for stores that do not filter the history on the server (run_store.hpp) ------

std::vector<RunRecord> RunStore::runs_of_kind(std::optional<std::string_view> name, std::optional<ServerTime> since,
                                              std::int64_t limit, RunKind kind) {
  if (kind == RunKind::all) return runs(name, since, limit);
  auto out = runs(name, since, k_max_history_keep);
  std::erase_if(out, [kind](const RunRecord& run) { return is_attempt(run.outcome) != (kind == RunKind::attempts); });
  if (std::cmp_greater(out.size(), limit)) out.resize(static_cast<std::size_t>(std::max<std::int64_t>(limit, 1)));
  return out;
}

std::vector<RunRecord> RunStore::runs_holding(std::string_view name, const std::vector<std::string>& locks) {
  auto out = runs_of_kind(name, std::nullopt, k_max_history_keep, RunKind::executed);
  std::erase_if(out, [&locks](const RunRecord& run) {
    return run.lock.empty() || std::find(locks.begin(), locks.end(), run.lock) == locks.end();
  });
  return out;
}

void RunStore::update_skips(const std::vector<RunRecord>& /*runs*/) {}

void RunStore::record_last_runs(const std::vector<RunRecord>& /*runs*/) {}

std::vector<RunRecord>
RunStore::executed_since(const std::vector<std::pair<std::string, std::optional<ServerTime>>>& since) {
  std::vector<RunRecord> out;
  for (const auto& [name, after] : since) {
    for (auto& run : runs_of_kind(name, after, k_max_history_keep, RunKind::executed)) {
      if (!after || run.ended_at > *after) out.push_back(std::move(run));
    }
  }
  return out;
}

std::vector<RunRecord> RunStore::last_runs(const std::vector<std::string>& names) {
  std::vector<RunRecord> out;
  for (const auto& name : names) {
    auto runs = runs_of_kind(name, std::nullopt, 1, RunKind::executed);
    if (!runs.empty()) out.push_back(std::move(runs.front()));
  }
  return out;
}

std::optional<std::string> succeeded_within(RunStore& store, const std::vector<LockRecord>& locks, Millis period) {
  const auto now = store.clock().now();
  std::optional<RunRecord> oldest;
  for (const auto& lock : locks) {
    std::optional<RunRecord> newest;
    for (auto& run : store.runs_of_kind(lock.name, now - period, k_max_history_keep, RunKind::executed)) {
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

} // namespace mongolock
