// The commands of mongolock, as library calls: the CLI parses arguments into these option structs and
// calls one function. Each returns the process exit code (exit_codes.hpp) or throws Error.
// Data (tokens, status) is written to stdout; messages go to the Log (stderr).
#pragma once

#include <mongolock/exit_codes.hpp>
#include <mongolock/lease.hpp>
#include <mongolock/log.hpp>
#include <mongolock/mongo_store.hpp>
#include <mongolock/supervisor.hpp>

#include <optional>
#include <string>
#include <vector>

namespace mongolock {

struct GlobalOptions {
  StoreConfig store;                                // --uri, --db, --collection, --connect-timeout
  int conflict_exit_code = k_exit_held;             // -E/--conflict-exit-code: exit code when the lock is held
  Millis takeover_grace = k_default_takeover_grace; // --grace: purge expired locks only this much later
};

struct AcquireOptions {
  std::string name;
  Millis ttl = k_default_acquire_ttl;
  std::optional<std::string> process; // --process; default "<host>:<parent pid>" (the calling shell)
};

struct ReleaseOptions {
  std::string name;
  std::optional<std::string> token;   // --token: release the acquisition with this token
  std::optional<std::string> process; // --process; default "<host>:<parent pid>"; unused with --token
};

struct RunOptions {
  std::string name;
  std::vector<std::string> command; // CMD ARGS..., executed directly (no shell)
  Millis ttl = k_default_run_ttl;
  std::optional<Millis> kill_grace; // --kill-grace; default from make_lease_timing()
  OnLost on_lost = OnLost::term;    // --on-lost
  std::optional<Millis> timeout;    // --timeout
  Millis kill_after{5000};          // --kill-after
};

struct StatusOptions {
  std::string name;
};

// mongolock acquire: takes the lock and prints its token. 0, or conflict_exit_code when held.
int acquire_command(const GlobalOptions& global, const AcquireOptions& options, Log& log);

// mongolock release: removes exactly one lock document. 0, or 65 when nothing was removed.
int release_command(const GlobalOptions& global, const ReleaseOptions& options, Log& log);

// mongolock run: holds the lock while the command runs. The command's exit code; conflict_exit_code when
// held; 76 when the lease was lost; 124 after --timeout; 126/127 when the command cannot start.
int run_command(const GlobalOptions& global, const RunOptions& options, Log& log);

// mongolock status: prints the lock's holder and times. 0 when held, 1 when free (or expired).
int status_command(const GlobalOptions& global, const StatusOptions& options, Log& log);

} // namespace mongolock
