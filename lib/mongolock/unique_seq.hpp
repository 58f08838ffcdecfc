// One unique-insert allocator, for the numbers a unique index hands out: fencing tokens (highest + 1 per
// name, MongoStore::next_fence) and queue tickets' seq (WaitQueue::join: above every ticket, or for a
// replacing run below every one).
#pragma once

#include <mongolock/error.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

namespace mongolock {

// Reads a candidate with `next()` and tries `insert(candidate)`; `insert` returns false when a concurrent
// allocation took that value first (MongoDB error 11000: duplicate key on the unique index), and then the
// next candidate is read. Returns the value inserted. Throws Error (69) "could not <what>: <attempts>
// concurrent allocations won" when every attempt lost; errors of `next` and `insert` propagate.
template <typename Next, typename Insert>
std::int64_t allocate_unique(Next&& next, Insert&& insert, std::string_view what, int attempts = 100) {
  for (int attempt = 0; attempt < attempts; ++attempt) {
    const std::int64_t candidate = next();
    if (insert(candidate)) return candidate;
  }
  throw unavailable_error(fmt::format("could not {}: {} concurrent allocations won", what, attempts));
}

} // namespace mongolock
