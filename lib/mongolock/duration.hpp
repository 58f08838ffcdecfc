// Durations as users write them: "500ms", "30s", "10m", "1h", "1h30m", "1.5s".
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace mongolock {

using Millis = std::chrono::milliseconds;

// Parses a duration made of one or more <number><unit> parts, units ms, s, m, h, d (e.g. "1h30m",
// "2.5s"). A bare number is refused (the unit is never guessed). Returns milliseconds, which must be
// at least 1ms (before rounding: 0.5ms is refused) and at most 365 days. Throws Error (exit 64) naming `what` (e.g.
// "--ttl") on bad input.
[[nodiscard]] Millis parse_duration(std::string_view text, std::string_view what);

// The longest duration that mongolock hands to the MongoDB driver (--connect-timeout: connectTimeoutMS and
// serverSelectionTimeoutMS): libmongoc keeps these as int32 milliseconds and aborts (a failed
// precondition in mongoc_async_run(), exit 134) at about 24.8 days; 24 days stays below that.
inline constexpr Millis k_max_driver_duration = std::chrono::hours(24 * 24);

// parse_duration(), and refused (Error, exit 64, naming `what`, the bound and `why`, e.g. "the MongoDB
// driver's limit") when longer than `bound`.
[[nodiscard]] Millis parse_duration_at_most(std::string_view text, std::string_view what, Millis bound,
                                            std::string_view why);

// Formats a duration for people: "850ms", "12s", "2.5s", "4m05s", "1h02m", "3d04h". Negative values get a
// leading '-'. Exact to the shown unit (rounded down).
[[nodiscard]] std::string format_duration(Millis d);

} // namespace mongolock
