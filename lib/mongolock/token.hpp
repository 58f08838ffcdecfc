// Lock tokens: the secret that proves which acquisition a lock document belongs to.
#pragma once

#include <string>
#include <string_view>

namespace mongolock {

inline constexpr std::size_t k_token_hex_length = 32; // 128 random bits as lowercase hex

// Returns a new token: 128 bits from getrandom(2), as 32 lowercase hex digits.
// Throws Error (exit 70) if the kernel gives no randomness.
[[nodiscard]] std::string make_token();

// Returns a new MongoDB ObjectId as 24 lowercase hex digits: 4 bytes of seconds since the epoch (UTC,
// this host's clock), then 8 random bytes (getrandom(2)), so ids made on one host sort by creation second
// and never collide in practice. Used for documents whose id must be known before they are written (a
// run's history record: MONGOLOCK_RUN_ID). Throws Error (exit 70) if the kernel gives no randomness.
[[nodiscard]] std::string make_object_id();

// True when `token` has the form make_token() produces.
[[nodiscard]] bool is_valid_token(std::string_view token);

} // namespace mongolock
