// Lease timing for `run`: when to renew, when to give up, and how long a stopped command may take.
//
// The invariant this file keeps: a command under `run` is dead before its lease can expire on the
// server. The lease is extended to (send time of the last successful renewal) + ttl. If no renewal has
// succeeded for renew_deadline since that send time, the command gets SIGTERM, then SIGKILL after
// kill_grace, so it is dead by renew_deadline + kill_grace, which must stay a safety margin below ttl.
#pragma once

#include <mongolock/duration.hpp>

#include <optional>

namespace mongolock {

inline constexpr Millis k_min_ttl{1000};                // below this, network round trips eat the lease
inline constexpr Millis k_default_run_ttl{30'000};      // run --ttl
inline constexpr Millis k_default_acquire_ttl{600'000}; // acquire --ttl (nothing renews it)
inline constexpr Millis k_default_kill_grace{5000};     // SIGTERM to SIGKILL
inline constexpr Millis k_default_takeover_grace{2000}; // expired locks are purged only this much later

struct LeaseTiming {
  Millis ttl;            // lease length; each renewal sets expires_at = send time + ttl (server clock)
  Millis renew_interval; // time between renewals: ttl / 3
  Millis renew_deadline; // lease counted lost when no renewal succeeded this long after the last: 2/3 ttl
  Millis kill_grace;     // SIGTERM to SIGKILL when the lease is lost
};

// The safety margin kept between the command's latest death and the lease's expiry:
// max(200ms, ttl / 10), for clock-rate differences, scheduling delays and reaping.
[[nodiscard]] Millis lease_safety_margin(Millis ttl);

// Lease timing for `ttl`: renew interval (default ttl/3), renew deadline (default 2/3 ttl) and kill grace
// (default min(5s, what the margin leaves)). Throws Error (exit 64), saying which value to change, when
// ttl < k_min_ttl, renew_interval >= renew_deadline (a failed renewal could not be retried), or
// renew_deadline + kill_grace + lease_safety_margin(ttl) > ttl (the command could outlive the lease).
[[nodiscard]] LeaseTiming make_lease_timing(Millis ttl, std::optional<Millis> kill_grace = std::nullopt,
                                            std::optional<Millis> renew_interval = std::nullopt,
                                            std::optional<Millis> renew_deadline = std::nullopt);

// Throws Error (exit 64) when ttl < k_min_ttl; used for leases nobody renews (acquire, renew).
void validate_ttl(Millis ttl);

} // namespace mongolock
