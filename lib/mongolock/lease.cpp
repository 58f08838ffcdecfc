#include <mongolock/error.hpp>
#include <mongolock/lease.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace mongolock {

Millis lease_safety_margin(Millis ttl) { return std::max(Millis(200), ttl / 10); }

namespace {

// Rounds `d` up to what format_duration() shows exactly, so a suggested value means what it says.
Millis round_up_for_display(Millis d) {
  using namespace std::chrono;
  if (d >= hours(24)) return ceil<hours>(d);
  if (d >= hours(1)) return ceil<minutes>(d);
  if (d >= seconds(10)) return ceil<seconds>(d);
  if (d >= seconds(1)) return ceil<duration<Millis::rep, std::deci>>(d);
  return d;
}

// The room a ttl leaves for the kill grace: ttl - renew deadline - safety margin.
Millis room_for_grace(Millis ttl, std::optional<Millis> renew_deadline) {
  return ttl - renew_deadline.value_or(ttl * 2 / 3) - lease_safety_margin(ttl);
}

// The smallest ttl (as displayed) whose room holds `grace`; the room grows with the ttl.
Millis min_ttl_for_grace(Millis grace, std::optional<Millis> renew_deadline) {
  // Closed-form estimate (room = ttl*7/30 or ttl/3 - 200ms by default; ttl - D - max(200ms, ttl/10) with a
  // fixed deadline D), then a few 1ms steps for integer rounding.
  auto ttl = renew_deadline ? std::max(*renew_deadline + grace + Millis(200), (*renew_deadline + grace) * 10 / 9)
                            : std::max(grace * 30 / 7, (grace + Millis(200)) * 3);
  ttl = std::max(ttl, k_min_ttl);
  while (room_for_grace(ttl, renew_deadline) < grace)
    ttl += Millis(1);
  return round_up_for_display(ttl);
}

} // namespace

void validate_ttl(Millis ttl) {
  if (ttl < k_min_ttl) {
    throw usage_error(
        fmt::format("--ttl {} is too short; the minimum is {}", format_duration(ttl), format_duration(k_min_ttl)));
  }
}

LeaseTiming make_lease_timing(Millis ttl, std::optional<Millis> kill_grace, std::optional<Millis> renew_interval,
                              std::optional<Millis> renew_deadline) {
  validate_ttl(ttl);
  LeaseTiming t{ttl, renew_interval.value_or(ttl / 3), renew_deadline.value_or(ttl * 2 / 3), Millis(0)};
  if (t.renew_interval >= t.renew_deadline) {
    throw usage_error(fmt::format("--renew-interval {} must be shorter than --renew-deadline {}, so that a failed "
                                  "renewal is retried before the lease counts as lost",
                                  format_duration(t.renew_interval), format_duration(t.renew_deadline)));
  }
  const auto room = room_for_grace(ttl, t.renew_deadline);
  if (renew_deadline && room <= Millis(0)) {
    throw usage_error(fmt::format("--renew-deadline {} leaves no time to stop the command within --ttl {}; keep it "
                                  "below {}",
                                  format_duration(t.renew_deadline), format_duration(ttl),
                                  format_duration(ttl - lease_safety_margin(ttl))));
  }
  t.kill_grace = kill_grace.value_or(std::min(k_default_kill_grace, room));
  if (t.kill_grace <= Millis(0) && !kill_grace) {
    throw usage_error(
        fmt::format("--ttl {} leaves no time to stop the command; use a longer --ttl", format_duration(ttl)));
  }
  if (t.kill_grace > room) {
    throw usage_error(
        fmt::format("--kill-grace {} is too long for --ttl {}: a command stopped after a lost lease could outlive the "
                    "lease; use --kill-grace {} or less, or a --ttl of at least {}",
                    format_duration(t.kill_grace), format_duration(ttl), format_duration(room),
                    format_duration(min_ttl_for_grace(t.kill_grace, renew_deadline))));
  }
  return t;
}

} // namespace mongolock
