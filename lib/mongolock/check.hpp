// `mongolock check`: a cluster-wide dead-man's switch in the monitoring-plugin convention (Nagios,
// Icinga, Sensu, Zabbix agents): from the run history every host writes, whether a name's job has
// succeeded on any host within a period.
#pragma once

#include <mongolock/duration.hpp>
#include <mongolock/lock_store.hpp>
#include <mongolock/run_store.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mongolock {

// The plugin states; their values are check's exit codes (the monitoring-plugin convention:
// 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN).
enum class CheckState { ok = 0, warning = 1, critical = 2, unknown = 3 };

// "OK", "WARNING", "CRITICAL", "UNKNOWN".
[[nodiscard]] const char* check_state_name(CheckState state);

// How many of a name's newest runs check reads (one find): a success older than those (a name with more
// runs than this within --max-age) is not seen.
inline constexpr std::int64_t k_check_runs_read = 1000;

struct CheckPolicy {
  Millis max_age{0};                          // --max-age: a success must have ended within this (required)
  CheckState on_failed = CheckState::warning; // --failed: the state when the newest executed run failed
};

// One name's verdict: CRITICAL when no run succeeded within policy.max_age before `now` (server clock),
// else policy.on_failed when the newest executed run (not skipped, not not-due) did not succeed, else OK.
struct NameCheck {
  std::string name;
  CheckState state = CheckState::unknown;
  std::optional<RunRecord> last_success; // the newest run with outcome ok, if any among those read
  std::optional<RunRecord> last_run;     // the newest executed run, if any
  std::string text;                      // one clause, e.g. "'report' succeeded on web1 3h12m ago"
  std::optional<Millis> age;             // now - last_success->ended_at
};

// The verdict for `name` from `runs` (its history, newest first, as LockStore::runs returns it).
[[nodiscard]] NameCheck check_name(const std::string& name, const std::vector<RunRecord>& runs, ServerTime now,
                                   const CheckPolicy& policy);

// The worst state of `checks` (UNKNOWN counts as worst but CRITICAL: OK < WARNING < UNKNOWN < CRITICAL).
[[nodiscard]] CheckState worst_state(const std::vector<NameCheck>& checks);

// The plugin line: "MONGOLOCK STATE - clauses | perfdata", the clauses of the worst names first, joined by
// "; ". Perfdata per name (labels quoted, ' doubled): 'NAME_age'=Ns;;CRIT;0 (the last success's age in
// seconds, U when none) and 'NAME_duration'=Ns;;;0 (the newest executed run's, U when none). One line:
// every stored string is escaped (printable()), and a `|` in a name, host or outcome becomes `_` (it would
// start the perfdata), a `=` in a label too (Monitoring Plugins Development Guidelines).
[[nodiscard]] std::string check_line(const std::vector<NameCheck>& checks, const CheckPolicy& policy);

// The line for a server that cannot be read: "MONGOLOCK UNKNOWN - cannot read the run history: WHY".
[[nodiscard]] std::string check_unknown_line(const std::string& why);

} // namespace mongolock
