#include <mongolock/duration.hpp>
#include <mongolock/error.hpp>

#include <fmt/format.h>

#include <charconv>
#include <cmath>

namespace mongolock {

namespace {

constexpr auto k_max_duration = std::chrono::hours(24 * 365);

// Milliseconds per unit, or 0 for an unknown unit.
double unit_millis(std::string_view unit) {
  if (unit == "ms") return 1;
  if (unit == "s") return 1000;
  if (unit == "m") return 60'000;
  if (unit == "h") return 3'600'000;
  if (unit == "d") return 86'400'000;
  return 0;
}

} // namespace

Millis parse_duration(std::string_view text, std::string_view what) {
  const auto fail = [&](std::string_view why) {
    return usage_error(fmt::format("invalid {} '{}': {}; write e.g. 500ms, 30s, 10m, 1h30m", what, text, why));
  };
  if (text.empty()) throw fail("empty duration");
  double total = 0;
  std::string_view rest = text;
  while (!rest.empty()) {
    std::size_t digits = 0;
    while (digits < rest.size() && ((rest[digits] >= '0' && rest[digits] <= '9') || rest[digits] == '.'))
      ++digits;
    if (digits == 0) throw fail(rest[0] == '-' ? "must be positive" : "expected a number");
    double number = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + digits, number);
    if (ec != std::errc() || end != rest.data() + digits) throw fail("malformed number");
    rest.remove_prefix(digits);
    std::size_t letters = 0;
    while (letters < rest.size() && rest[letters] >= 'a' && rest[letters] <= 'z')
      ++letters;
    if (letters == 0) throw fail("missing unit (ms, s, m, h or d)");
    const double per_unit = unit_millis(rest.substr(0, letters));
    if (per_unit == 0) throw fail(fmt::format("unknown unit '{}'", rest.substr(0, letters)));
    rest.remove_prefix(letters);
    total += number * per_unit;
    if (total > static_cast<double>(Millis(k_max_duration).count())) throw fail("longer than 365 days");
  }
  // Under 1ms is refused before rounding: 0.5ms is not 1ms.
  if (total < 1 - 1e-9) throw fail("must be at least 1ms");
  return Millis(static_cast<Millis::rep>(std::llround(total)));
}

Millis parse_duration_at_most(std::string_view text, std::string_view what, Millis bound, std::string_view why) {
  const auto value = parse_duration(text, what);
  if (value > bound) {
    throw usage_error(fmt::format("invalid {} '{}': longer than {} ({}); give at most {}", what, text,
                                  format_duration(bound), why, format_duration(bound)));
  }
  return value;
}

std::string format_duration(Millis d) {
  if (d < Millis(0)) return "-" + format_duration(-d);
  const auto ms = d.count();
  if (ms < 1000) return fmt::format("{}ms", ms);
  if (ms < 10'000 && ms % 1000 != 0) return fmt::format("{}.{}s", ms / 1000, (ms % 1000) / 100);
  const auto s = ms / 1000;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return s % 60 ? fmt::format("{}m{:02}s", s / 60, s % 60) : fmt::format("{}m", s / 60);
  if (s < 86'400)
    return (s / 60) % 60 ? fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60) : fmt::format("{}h", s / 3600);
  return (s / 3600) % 24 ? fmt::format("{}d{:02}h", s / 86'400, (s / 3600) % 24) : fmt::format("{}d", s / 86'400);
}

} // namespace mongolock
