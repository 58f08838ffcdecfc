// What acquire and run share (internal to the commands: commands.cpp, run.cpp): request building, the
// held message, the interruptible sleep between attempts, --splay, and giving locks back after a run.
#pragma once

#include <mongolock/commands.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/log.hpp>

#include <optional>
#include <string>
#include <vector>

namespace mongolock {

inline constexpr int k_max_slots = 1000; // --slots: at most this many holders per name

// Checks --slots (1..k_max_slots) and --splay (at most k_max_splay). Throws Error (64) naming the option.
void validate_take(const TakeOptions& take);

// The request for one name of acquire or run: the take options, the takeover grace, and the instant
// takeover of a holder that provably died on this host (liveness.hpp). With `log`, -v says once per reason
// why a holder on this host is not taken over at once (holder_verdict()'s why_not).
[[nodiscard]] AcquireRequest make_request(const GlobalOptions& global, const TakeOptions& take, std::string name,
                                          std::string process, Millis ttl, const Log* log = nullptr);

// Reports who holds the lock that was not acquired (one line: the holder, or every slot's); `held_by`
// (when given) gets the first holder's host:pid, `held_lock` (when given) the _id of its lock document.
// Returns global.conflict_exit_code (75 unless -E).
int report_held(const GlobalOptions& global, Locker& locker, const AcquireOutcome& outcome, const Log& log,
                std::string* held_by = nullptr, std::string* held_lock = nullptr);

// Sleeps `pause` between attempts of --wait, waking early when a forwarded signal arrives (it is raised
// again, stays pending while blocked, and is handled after the wait). Returns false on a signal.
bool sleep_unless_signalled(Millis pause);

// --splay: sleeps this host's offset for `names` (-v prints it) and shortens `wait` by it, so that a --wait
// deadline counts from the start. Returns false when a forwarded signal ended the sleep (left pending).
bool splay_before_acquiring(Millis splay, const std::vector<std::string>& names, std::optional<Millis>& wait,
                            const Log& log);

// How giving back a run's locks went: every one released (or kept for its minimum hold), one found gone
// (its lease was lost), or one could not be released (server error; it expires on its own).
enum class RunRelease { released, gone, failed };

// Releases `locks` by _id and token; failures are reported on `log`, never thrown (the command has
// already ended). `lease_lost`: the loss was already reported, so a lock found gone is expected.
RunRelease release_after_run(Locker& locker, const std::vector<LockRecord>& locks, const Log& log,
                             bool lease_lost = false);

} // namespace mongolock
