// The process exit codes of mongolock: the one place they are defined.
// The same table is in man/mongolock.1 (EXIT STATUS) and README.md. Codes 64-78 follow BSD sysexits.h;
// 124/126/127 follow GNU timeout(1) and POSIX shells.
#pragma once

namespace mongolock {

enum ExitCode : int {
  k_exit_ok = 0,               // success
  k_exit_not_held = 1,         // status: the lock is free
  k_exit_usage = 64,           // bad option, name, duration, URI or missing command (EX_USAGE)
  k_exit_not_holder = 65,      // release/renew refused: held by another holder, or (without --token) not held;
                               // nothing changed (EX_DATAERR)
  k_exit_token_gone = 66,      // release/renew --token refused: the lock of that token is not held any more
                               // (released, or expired) and no other holder holds the name; nothing changed
                               // (issue 27: a retry after a release whose reply was lost)
  k_exit_unavailable = 69,     // MongoDB unavailable: connection, server selection (no primary), auth, server
                               // error; or a write whose outcome is unknown (the message says what to check)
  k_exit_internal = 70,        // internal error (EX_SOFTWARE)
  k_exit_held = 75,            // lock held by another holder (EX_TEMPFAIL); -E/--conflict-exit-code overrides; also
                               // run --replace stopped for (or not run before) a newer replacing run
  k_exit_lease_lost = 76,      // run: the lease was lost while CMD ran; CMD was stopped
  k_exit_timeout = 124,        // run --timeout: CMD ran too long and was stopped (as GNU timeout)
  k_exit_cannot_execute = 126, // run: CMD exists but cannot be executed
  k_exit_not_found = 127,      // run: CMD not found
};

// `check` exits with the monitoring-plugin states instead (check.hpp, CheckState): 0 OK, 1 WARNING,
// 2 CRITICAL, 3 UNKNOWN; a usage error is 64 as for every command.

// Exit status for a child killed by signal `signo`: 128 + signo, as POSIX shells report it.
constexpr int exit_code_for_signal(int signo) { return 128 + signo; }

} // namespace mongolock
