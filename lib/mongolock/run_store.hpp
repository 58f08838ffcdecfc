// The run store: the run history's interface to MongoDB (history.hpp writes and reads it; MongoStore and
// MemoryStore implement it beside LockStore). Documents in their own collection "<collection>_runs" and the
// last run of each name in "<collection>_lastrun"; no policy (retention and folding are history.cpp's).
#pragma once

#include <mongolock/clock.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mongolock {

// One ended `mongolock run` of one lock name: a document in "<collection>_runs", the run history
// (history.hpp). A run of several names has one record per name, written in one command. Field names in
// MongoDB are in brackets.
struct RunRecord {
  std::string id;                       // [_id] ObjectId as 24 hex digits
  std::string name;                     // [name] the lock name (index "name_1_ended_at_1")
  std::string process;                  // [process] the run, "<host>:<pid>" of mongolock
  std::string host;                     // [host] the run's host name
  std::string pid_ns;                   // [pid_ns] mongolock's PID namespace, "pid:[INODE]" (liveness.hpp); ""
                                        // when unknown (older versions): with `process`, tells apart runs of
                                        // containers that share a host name and pid (identity.hpp holder_label())
  std::string user;                     // [user] the run's user name
  std::vector<std::string> command;     // [command] argv: redacted and bounded (recorded_command())
  std::optional<ServerTime> started_at; // [started_at] server clock, UTC: when the command started; unset when
                                        // it never started (skipped, not-executable, not-due, interrupted)
  ServerTime ended_at{};                // [ended_at] server clock, UTC: when the whole job had ended, or when
                                        // the run gave up
  std::optional<Millis> duration;       // [duration_ms] ended_at - started_at, milliseconds; unset with started_at
  Millis waited{0};                     // [waited_ms] time spent waiting for the lock (--wait), milliseconds
  std::string outcome;                  // [outcome] ok, failed, timeout, lease-lost, not-executable, skipped,
                                        // not-due
                                        // (history.hpp: outcome_name()); as stored, maybe another client's text
  int exit_code = 0;                    // [exit_code] mongolock's exit status for this run
  std::string signal;                   // [signal] the signal that ended the command, e.g. "TERM"; "" when none
  std::string held_by; // [held_by] skipped: the holder that kept the lock; replaced: the replacing run; "<host>:<pid>"
  std::optional<std::int64_t> fence;    // [fence] the fencing token the run held, with --fence
  std::string lock;                     // [lock] executed: the _id of the lock document the run held (of its
                                        // first slot); "" when unknown (older versions, not executed)
  std::string held_lock;                // [held_lock] skipped: the _id of the holder's lock document; the run
                                        // whose `lock` it is held the lock (history folds the skip into it)
  std::int64_t skips = 0;               // [skips] executed: skipped attempts that named this run's lock, as
                                        // counted by the purge before it deleted them (history.hpp: SkipFold);
                                        // absent until then (history counts the attempts still stored)
  std::int64_t skip_hosts = 0;          // [skip_hosts] executed: how many hosts those attempts came from
  std::vector<std::string> skipped_on;  // [skipped_on] executed: up to k_skip_host_sample of those hosts
  std::optional<ServerTime> keep_until; // [keep_until] server clock, UTC: a `run --once-per` success, its end plus
                                        // the period; no purge deletes it before then, whatever retention
                                        // another run asks (red team 8 F2: a run of another name with a shorter
                                        // --history-max-age deleted it, and the job ran again in its period)
};

// Which runs a read of the history returns: every record, only the runs whose command was due (executed:
// ok, failed, timeout, lease-lost, not-executable and outcomes this version does not know) or only the
// attempts that did not run it (skipped, not-due).
enum class RunKind { all, executed, attempts };

// Every method is one server command unless it says otherwise; errors of the server or the connection are
// thrown as Error with exit code 69; nothing here retries.
class RunStore {
public:
  virtual ~RunStore() = default;

  // The server's clock, as LockStore::clock() (the same clock in a store that implements both).
  virtual const ServerClock& clock() = 0;

  // Inserts `runs` (1 or more) in one insert command, assigning each id. Needs no index.
  virtual void insert_runs(std::vector<RunRecord>& records) = 0;

  // The runs of `name` (of every name when nullopt) that ended at or after `since` (when given), newest
  // first (by ended_at, then _id), at most `limit` (>= 1). Empty when the collection does not exist.
  [[nodiscard]] virtual std::vector<RunRecord> runs(std::optional<std::string_view> name,
                                                    std::optional<ServerTime> since, std::int64_t limit) = 0;

  // As runs(), only the records of `kind` (RunKind::all: the same). The default filters runs() on the client
  // (stores that do not filter on the server); MongoStore filters on the server.
  [[nodiscard]] virtual std::vector<RunRecord>
  runs_of_kind(std::optional<std::string_view> name, std::optional<ServerTime> since, std::int64_t limit, RunKind kind);

  // The executed runs of `name` whose `lock` is one of `locks`, any order; only _id, name, lock, skips,
  // skip_hosts and skipped_on are read. One find. Empty when `locks` is empty.
  [[nodiscard]] virtual std::vector<RunRecord> runs_holding(std::string_view name,
                                                            const std::vector<std::string>& locks);

  // Raises skips and skip_hosts of each of `runs` (by _id) to its values where they are lower ($max: two
  // purges counting at once never lower a count) and sets its skipped_on (a sample of host names: of two
  // such purges, the last one's). One update command, filtered by _id alone (served by FerretDB SQLite's
  // primary key, not a scan). The default does nothing.
  virtual void update_skips(const std::vector<RunRecord>& runs);

  // Stores `runs` (executed runs) as their names' last run in "<collection>_lastrun", each only if it
  // ended after the one stored (a newer one stays; a lost race between two readers is not an error). Written
  // by the reads that need it (history.hpp: last_runs(), for `list`), never by a run. One update command.
  // The default does nothing.
  virtual void record_last_runs(const std::vector<RunRecord>& runs);

  // The last runs stored by record_last_runs() of `names` (those that have one), in one find; each may be
  // older than the name's newest executed run (executed_since() finds those). The default reads
  // runs_of_kind(name, executed, 1) per name.
  [[nodiscard]] virtual std::vector<RunRecord> last_runs(const std::vector<std::string>& names);

  // The executed runs of each name in `since` that ended after its time (every executed run of the name, at
  // most k_max_history_keep, when nullopt), any order. One find (MongoStore: one $or branch per name, each
  // served by the index name_1_ended_at_1). Empty when `since` is empty. The default reads runs_of_kind()
  // per name.
  [[nodiscard]] virtual std::vector<RunRecord>
  executed_since(const std::vector<std::pair<std::string, std::optional<ServerTime>>>& since);

  // Deletes every run (of any name) that ended before `ended_before`, then the runs of `name` beyond its
  // `keep` newest (keep >= 1); neither deletes a run whose keep_until is after `now` (server clock, UTC). The
  // first call creates the index on (name, ended_at) (createIndexes). Returns the number deleted. Several
  // writers may purge at once: each delete only removes what is out of bounds.
  [[nodiscard]] virtual std::int64_t purge_runs(std::string_view name, std::int64_t keep, ServerTime ended_before,
                                                ServerTime now) = 0;
};

} // namespace mongolock
