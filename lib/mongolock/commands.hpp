// The commands of mongolock, as library calls: the CLI parses arguments into these option structs and
// calls one function. Each returns the process exit code (exit_codes.hpp) or throws Error.
// Data (tokens, status, JSON) is written to stdout; messages go to the Log (stderr).
#pragma once

#include <mongolock/exit_codes.hpp>
#include <mongolock/history.hpp>
#include <mongolock/lease.hpp>
#include <mongolock/log.hpp>
#include <mongolock/mongo_store.hpp>
#include <mongolock/supervisor.hpp>

#include <optional>
#include <string>
#include <vector>

namespace mongolock {

inline constexpr Millis k_wait_forever = Millis::max();

struct GlobalOptions {
  StoreConfig store;                                // --uri, --db, --collection, --connect-timeout
  int conflict_exit_code = k_exit_held;             // -E/--conflict-exit-code: exit code when the lock is held
  Millis takeover_grace = k_default_takeover_grace; // --grace: purge expired locks only this much later
};

// Options of the commands that take locks (acquire, run).
struct TakeOptions {
  std::optional<Millis> wait; // --wait: keep trying this long (k_wait_forever: forever); nullopt: once
  Millis min_hold{0};         // --min-hold: keep the lock at least this long after acquiring it
  bool fence = false;         // --fence: allocate a fencing token
  int slots = 1;              // --slots N: up to N holders share the name
  bool push = true;           // --no-push: a waiter polls, without push wake-ups (tests; servers that cannot tail)
  Millis splay{0};            // --splay: first wait this host's offset in [0, splay) (schedule.hpp); 0: none
};

struct AcquireOptions {
  std::string name;
  Millis ttl = k_default_acquire_ttl;
  std::optional<std::string> process; // --process; default "<host>:<parent pid>" (the calling shell)
  TakeOptions take;
};

struct ReleaseOptions {
  std::string name;
  std::optional<std::string> token;   // --token: release the acquisition with this token
  std::optional<std::string> process; // --process; default "<host>:<parent pid>"; unused with --token
};

struct RenewOptions {
  std::string name;
  std::optional<Millis> ttl;          // --ttl: the lease runs this long from now; default: the lock's own
                                      // TTL (its ttl_ms, as acquire --ttl set it), k_default_acquire_ttl without one
  std::optional<std::string> token;   // --token
  std::optional<std::string> process; // --process; default "<host>:<parent pid>"; unused with --token
};

struct RunOptions {
  std::vector<std::string> names;   // one or more; taken all or none, in sorted order
  std::vector<std::string> command; // CMD ARGS..., executed directly (no shell)
  Millis ttl = k_default_run_ttl;
  std::optional<Millis> kill_grace;     // --kill-grace; default from make_lease_timing()
  std::optional<Millis> renew_interval; // --renew-interval; default ttl/3
  std::optional<Millis> renew_deadline; // --renew-deadline; default 2/3 ttl
  OnLost on_lost = OnLost::term;        // --on-lost
  std::optional<Millis> timeout;        // --timeout
  Millis kill_after{5000};              // --kill-after
  TakeOptions take;
  HistoryPolicy history;                   // --no-history, --history-keep, --history-max-age
  std::optional<std::string> metrics_file; // --metrics-file: Prometheus textfile updated after the run
  int lost_exit_code = k_exit_lease_lost;  // --lost-exit-code: exit code when the lease was lost (0..255)
  bool no_new_privs = false;               // --no-new-privs: the command starts with PR_SET_NO_NEW_PRIVS
  std::optional<Millis> once_per;          // --once-per: not run when a run of every name succeeded within this period
  bool replace = false;                    // --replace: the newest run wins (stops a holder started with --replace)
  bool pass_uri = false; // --pass-uri: the job inherits MONGOLOCK_URI even when it holds a password (removed otherwise)
};

struct StatusOptions {
  std::string name;
  bool json = false;
};

struct ListOptions {
  bool json = false;
  bool names = false; // --names: only the names of the held locks, one per line, each once (for completion)
};

struct HistoryOptions {
  std::optional<std::string> name; // only this lock name's runs; every name when unset
  std::int64_t limit = 20;         // --limit N: at most this many runs, newest first (1..k_max_history_keep)
  std::optional<Millis> since;     // --since DUR: only runs that ended within DUR before now
  bool skipped = false;            // --skipped: every skipped and not-due attempt on its own line, instead
                                   // of folded into the run that held the lock (history.hpp: fold_history())
  bool json = false;
};

struct CheckOptions {
  std::vector<std::string> names; // one or more; the worst state wins
  std::optional<Millis> max_age;  // --max-age: required
  std::string failed = "warning"; // --failed: the state when the newest executed run failed (warning,
                                  // critical or ok)
  bool json = false;
};

struct InitOptions {
  Millis history_max_age = HistoryPolicy{}.max_age; // --history-max-age: the runs' TTL index (where supported)
};

struct BreakOptions {
  std::string name;
  bool force = false; // --force: required, breaking someone else's lock is deliberate
};

// mongolock acquire: takes the lock and prints its token ("TOKEN FENCE" with --fence).
// 0, or conflict_exit_code when held (after --wait).
int acquire_command(const GlobalOptions& global, const AcquireOptions& options, Log& log);

// mongolock release: removes exactly one lock document (or, within its minimum hold, marks it released).
// 0, or 65 when nothing was released (another holder holds it, or without --token nobody does); 66 with --token
// when that token's lock is not held any more (released, or expired) and nobody else holds the name.
int release_command(const GlobalOptions& global, const ReleaseOptions& options, Log& log);

// mongolock renew: extends a live lock to now + ttl (default: the lock's own TTL). 0, or 65 when not the holder (or
// expired); with --token 66 when that token's lock is not held any more and nobody else holds the name.
int renew_command(const GlobalOptions& global, const RenewOptions& options, Log& log);

// mongolock run: holds the locks while the command runs. The command's exit code; conflict_exit_code when
// held; 76 when the lease was lost; 124 after --timeout; 126/127 when the command cannot start. Records
// the run in the history (history.hpp, unless disabled) and in the metrics file (when given); neither changes
// the exit code (a failure is a warning). A usage error (64) records nothing; an Error thrown after the
// options were checked is counted in the metrics file as outcome "error" and thrown on.
int run_command(const GlobalOptions& global, const RunOptions& options, Log& log);

// mongolock status: prints the lock's holder(s) and times. 0 when held, 1 when free (or expired).
int status_command(const GlobalOptions& global, const StatusOptions& options, Log& log);

// mongolock list: prints every held, unexpired lock. 0.
int list_command(const GlobalOptions& global, const ListOptions& options, Log& log);

// mongolock break: removes every document of the lock, whoever holds it, and logs who did it (stderr and
// syslog). 64 without --force; 0 when something was removed; 65 when the lock was not held.
int break_command(const GlobalOptions& global, const BreakOptions& options, Log& log);

// mongolock doctor: connection, server version, clock offset, index, write access. 0 when all is well,
// 69 with the reason otherwise.
int doctor_command(const GlobalOptions& global, Log& log);

// mongolock history: the runs recorded, newest first, as a table with a summary line or as JSON
// (mongolock(1), JSON OUTPUT). 0, also when there are none ("no runs recorded ...").
int history_command(const GlobalOptions& global, const HistoryOptions& options, Log& log);

// mongolock check: the monitoring-plugin line "MONGOLOCK STATE - text | perfdata" (check.hpp) on stdout
// (or JSON) and its exit code: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (the server could not be read:
// one line, no exception). Bad options are a usage error (64), as for every command.
int check_command(const GlobalOptions& global, const CheckOptions& options, Log& log);

// mongolock init: creates the unique index and, where the server supports it, TTL indexes on the locks'
// expires_at (garbage collection only) and on the runs' ended_at (options.history_max_age). 0, or 69 when
// the unique index cannot be created.
int init_command(const GlobalOptions& global, const InitOptions& options, Log& log);

} // namespace mongolock
