// Metrics for monitoring: the Prometheus text-format file of `run --metrics-file`, in node_exporter's
// textfile-collector convention (a *.prom file in its directory, replaced whole by a rename, so the
// collector never reads half of it).
#pragma once

#include <cstddef>

#include <mongolock/history.hpp>

#include <optional>
#include <string>
#include <vector>

namespace mongolock {

// One run's figures for one lock name.
struct RunMetrics {
  std::string name;               // the lock name (label "name")
  Outcome outcome = Outcome::ok;  // label "outcome" of mongolock_runs_total
  double ended_at = 0;            // Unix time, seconds (the server's clock when mongolock knew it)
  std::optional<double> duration; // seconds the command ran; nullopt when it did not start
  int exit_code = 0;              // mongolock's exit status
  double waited = 0;              // seconds it waited for its locks (--wait, --splay included)
};

// Checks, before the run, that `path` can be a metrics file: not empty, its directory exists and is a
// directory, and the path is not a directory. Throws Error (64) naming --metrics-file and the way out.
void validate_metrics_path(const std::string& path);

// Updates the metrics file at `path` with `runs` (one per lock name of one run), keeping the series of
// other names that are in it. Per name:
//   mongolock_runs_total{name,outcome}                 counter, every outcome (all of them, from 0)
//   mongolock_last_run_timestamp_seconds{name}         gauge: when the last run that was not skipped ended
//   mongolock_last_run_duration_seconds{name}          gauge: how long its command ran (0 when it did not start)
//   mongolock_last_run_exit_code{name}                 gauge: its exit status
//   mongolock_last_run_wait_seconds{name}              gauge: how long it waited for its locks
//   mongolock_last_success_timestamp_seconds{name}     gauge: when the last run with outcome ok ended
// A skipped run (and one not due) only counts in mongolock_runs_total: a fleet's skips never move the
// gauges of the run that held the lock. Counters continue from the file's values (a missing
// file starts them at 0). A file that cannot be read (over k_max_metrics_bytes, not a regular file, an
// I/O error) is not written at all (Error 70, one warning): never a reset of the other names' series. Several mongolock
// processes may update one file: an exclusive flock(2) on its directory serializes them; the lock is
// waited for 2s at most (anyone who can open the directory can hold it), then the file is not written
// (Error 70, reported as one warning). The new content is
// written to a temporary file in the same directory, fsync'ed and renamed over `path`. Throws Error (70)
// naming the file and the reason when it cannot be written; the caller reports that as a warning.
void write_metrics_file(const std::string& path, const std::vector<RunMetrics>& runs);

// The most a metrics file may hold for mongolock to update it: 16 MiB (about 30,000 job names' series;
// a host's textfile collector directory is read whole on every scrape).
inline constexpr std::size_t k_max_metrics_bytes = 16 * 1024 * 1024;

// The metrics text for `runs` on top of `previous` (the old file's text; lines it cannot read are dropped).
// Exposed for tests; write_metrics_file() writes exactly this. Never throws (but std::bad_alloc).
[[nodiscard]] std::string metrics_text(const std::string& previous, const std::vector<RunMetrics>& runs);

} // namespace mongolock
