#include <mongolock/error.hpp>
#include <mongolock/lease.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace mongolock {

Millis lease_safety_margin(Millis ttl) { return std::max(Millis(200), ttl / 10); }

namespace {

// Smallest whole-second ttl whose room (ttl/3 - margin) holds `grace`: ttl * 7/30 >= grace, ttl >= 2s.
Millis min_ttl_for_grace(Millis grace) {
  const auto ttl = std::max(Millis(2000), Millis((grace.count() * 30 + 6) / 7));
  return std::chrono::ceil<std::chrono::seconds>(ttl);
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
  const auto room = ttl - t.renew_deadline - lease_safety_margin(ttl);
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
                    format_duration(min_ttl_for_grace(t.kill_grace))));
  }
  return t;
}

} // namespace mongolock
