// The run history: what became of each `mongolock run` (which host, when, how long, how it ended), kept
// in "<collection>_runs" (RunRecord, lock_store.hpp) so that `history`, `status` and `list` can answer
// "did the job run last night, where, and did it succeed?".
#pragma once

#include <mongolock/lock_store.hpp>
#include <mongolock/log.hpp>
#include <mongolock/run_store.hpp>

#include <cstddef>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mongolock {

// How a run ended. Stored and printed by name (outcome_name()).
enum class Outcome {
  ok,             // the command exited 0 and the lease held to the end
  failed,         // the command exited non-zero or died of a signal (or a signal stopped the run before it started)
  timeout,        // --timeout stopped the command (exit 124)
  lease_lost,     // the lease was lost while the command ran (exit 76, or the command's own with --on-lost ignore)
  not_executable, // the command could not be started (exit 126/127)
  skipped,        // the lock was held: the command did not run (exit 75 or -E; also a signal while waiting)
  not_due,        // run --once-per: a run of the name succeeded within the period: the command did not run (exit 0)
  replaced,       // run --replace: a newer replacing run came; the command was stopped (exit 75 or -E)
  error,          // mongolock itself failed (e.g. MongoDB unavailable, exit 69): metrics only, nothing is stored
};

// "ok", "failed", "timeout", "lease-lost", "not-executable", "skipped", "not-due", "replaced", "error".
[[nodiscard]] std::string_view outcome_name(Outcome outcome);

// Every outcome, in the order above (for metrics: one series each).
[[nodiscard]] const std::vector<Outcome>& all_outcomes();

// What a run keeps of its history and for how long. Rule from the issue: at most `keep` runs per name and
// none older than `max_age`; the writer purges (FerretDB v1 has no TTL indexes), but only on about one run
// in `purge_every`, so that a run costs one extra command.
struct HistoryPolicy {
  bool enabled = true;                     // --no-history: false
  std::int64_t keep = 100;                 // --history-keep N: runs kept per name (1..100000)
  Millis max_age{30LL * 24 * 3600 * 1000}; // --history-max-age DUR: runs older are deleted (30 days)
  std::int64_t purge_every = 10;           // MONGOLOCK_HISTORY_PURGE_EVERY: purge on 1 run in N
};

inline constexpr std::int64_t k_max_history_keep = 100'000;

// Checks `policy`'s bounds: keep in 1..k_max_history_keep, purge_every >= 1. Throws Error (64) naming the
// option and the range.
void validate_history_policy(const HistoryPolicy& policy);

// Command and arguments as a run records them: each argument redacted as every message is (URI passwords,
// redact_text(); the configured URI's secrets, scrub_secrets()), at most 256 bytes each (cut on a UTF-8
// boundary, "…" appended) and at most 32 of them (then "… N more"). Control bytes stay: printing escapes them.
[[nodiscard]] std::vector<std::string> recorded_command(const std::vector<std::string>& argv,
                                                        std::string_view configured_uri);

// True for the outcomes of attempts that did not run the command (skipped, not-due): bounded apart from
// the executed runs, folded into the run that held the lock by `history`.
[[nodiscard]] bool is_attempt(std::string_view outcome);

// How many hosts' names an executed run keeps of the attempts skipped while it held the lock.
inline constexpr std::size_t k_skip_host_sample = 5;

// Stores `runs` (one record per lock name of one run) with one insert: the run's only history command
// on its way out (issue 30: the fold of its skipped attempts is done by the reads, `history` and
// `list`, and by the purge). On about one call in policy.purge_every (chosen at random) an executed run
// then purges (purge_history(); with `deferred`, the runs are left there for the caller to purge later) each
// name's executed runs beyond policy.keep, its attempts beyond policy.keep (bounded apart, so that skips never
// push an executed run out) and every run older than policy.max_age (at `now`, server clock). An attempt
// never purges (a skipped run: 2 writes in all, the refused lock insert and this). Nothing happens when the
// policy is disabled or `runs` is empty. Never throws: a failure is one warning line on `log` (the run's
// exit status does not change, except run --once-per's: run.cpp). Returns whether the runs were stored
// (false also when the policy is disabled or `runs` is empty).
bool record_runs(RunStore& store, std::vector<RunRecord> runs, const HistoryPolicy& policy, ServerTime now,
                 const Log& log, std::vector<RunRecord>* deferred = nullptr);

// run --once-per's decision, made while holding every lock of the run (so no two hosts both decide to run; the
// simulator runs it too): when a run of each lock's name succeeded (outcome ok, on any host) within `period`
// before now (store's server clock), the line to print ("'report' succeeded on web1 3h12m ago (--once-per
// 23h); not run", naming the name whose last success is oldest); nullopt when the command is due. One find
// per name on the runs collection (at most k_max_history_keep runs of the period). Throws Error (69) when
// the server fails: the caller releases the locks.
[[nodiscard]] std::optional<std::string> succeeded_within(RunStore& store, const std::vector<LockRecord>& locks,
                                                          Millis period);

// The last executed run of each of `names` that has one (for `list`), read where the read pays for it:
// the "<collection>_lastrun" summaries (RunStore::last_runs(), one find), the executed runs that ended
// after each (RunStore::executed_since(), one find: a name without a summary reads its executed runs, at
// most --history-keep), and when some are newer, the summaries brought up to date
// (RunStore::record_last_runs(), one update; a failure only leaves that to the next read). Two runs of one
// name that ended in the same millisecond: the first one read stays. Throws Error (69) when a read fails.
[[nodiscard]] std::vector<RunRecord> last_runs(RunStore& store, const std::vector<std::string>& names, const Log& log);

// The purge record_runs() does now and then, for the names of `runs` (at `now`, server clock): first the
// executed runs of each name get the count of the skipped attempts that named their lock, when higher than
// the one they stored (RunStore::update_skips()), so that the count survives the attempts. Never throws:
// a failure is one warning line on `log`.
void purge_history(RunStore& store, const std::vector<RunRecord>& runs, const HistoryPolicy& policy, ServerTime now,
                   const Log& log);

// The skipped attempts folded into one line of `history`: those that named one run's lock (held_lock), or,
// for attempts whose holder has no executed run listed, those that named one holder.
struct SkipFold {
  std::int64_t count = 0;         // attempts
  std::int64_t hosts = 0;         // distinct hosts they came from
  std::vector<std::string> names; // up to k_skip_host_sample of those hosts, sorted
};

// One line of `history` by default: an executed run with the attempts skipped while it held the lock, or
// a group of skipped attempts whose holder's run is not listed (`run` is the newest of them), or one
// not-due attempt.
struct HistoryRow {
  RunRecord run;
  SkipFold skips;
};

// The default view of `history` from `executed` (newest first, as LockStore::runs_of_kind() returns them)
// and the `attempts` read beside them: each skipped attempt is folded into the executed run whose `lock`
// is its held_lock (the count is the larger of the run's stored `skips` and the attempts still stored:
// attempts written after the holder counted, or purged since), else into a group of its holder
// (held_lock, or held_by when older versions wrote none); not-due attempts stay one row each. Newest
// (ended_at) first, at most `limit` rows.
[[nodiscard]] std::vector<HistoryRow> fold_history(const std::vector<RunRecord>& executed,
                                                   const std::vector<RunRecord>& attempts, std::size_t limit);

// Every record as its own row (history --skipped): no folding.
[[nodiscard]] std::vector<HistoryRow> one_row_each(const std::vector<RunRecord>& runs);

// The summary line of `history`: counts by outcome and the durations of the runs whose command ran.
struct HistorySummary {
  std::int64_t runs = 0; // executed runs and attempts (folded skips included)
  std::int64_t ok = 0;
  std::int64_t failures = 0; // failed, timeout, lease-lost, not-executable (and outcomes this version does not know)
  std::int64_t skipped = 0;
  std::int64_t not_due = 0;              // run --once-per found a recent success and did not run the command
  std::int64_t replaced = 0;             // run --replace: stopped for a newer run
  std::optional<Millis> median_duration; // of the runs with a duration (an even count: the mean of the middle two)
  std::optional<Millis> max_duration;
};

// Counts every row's run and its folded skips (a row of 198 folded skips counts 198 skipped runs).
[[nodiscard]] HistorySummary summarize(const std::vector<HistoryRow>& rows);

} // namespace mongolock
