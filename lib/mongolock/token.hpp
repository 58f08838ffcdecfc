// Lock tokens: the secret that proves which acquisition a lock document belongs to.
#pragma once

#include <string>
#include <string_view>

namespace mongolock {

inline constexpr std::size_t k_token_hex_length = 32; // 128 random bits as lowercase hex

// Returns a new token: 128 bits from getrandom(2), as 32 lowercase hex digits.
// Throws Error (exit 70) if the kernel gives no randomness.
[[nodiscard]] std::string make_token();

// True when `token` has the form make_token() produces.
[[nodiscard]] bool is_valid_token(std::string_view token);

} // namespace mongolock
