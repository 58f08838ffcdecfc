// When a fleet's runs start: --splay spreads hosts whose crontabs fire in the same second.
#pragma once

#include <mongolock/duration.hpp>

#include <string_view>
#include <vector>

namespace mongolock {

// The longest --splay accepted: 1 day.
inline constexpr Millis k_max_splay{24LL * 3600 * 1000};

// The --splay offset of this host for `names`: a value in [0, splay) milliseconds derived from a 64-bit
// FNV-1a hash of the host name and the lock names (in the order given, '\0'-separated), so it is the same
// on every run of a host and spread across hosts (as Jenkins' `H` spreads its schedules). Millis(0) when
// splay is 0. Pure: no clock, no randomness.
[[nodiscard]] Millis splay_offset(std::string_view host, const std::vector<std::string>& names, Millis splay);

} // namespace mongolock
