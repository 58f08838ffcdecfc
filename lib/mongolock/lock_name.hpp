// Lock names: what a user may call a lock.
#pragma once

#include <cstddef>
#include <string_view>

namespace mongolock {

// Longest lock name in bytes. Well under MongoDB's 1024-byte index key limit (older servers) so the
// unique index on `program` can always hold it, with room for a slot suffix.
inline constexpr std::size_t k_max_lock_name_bytes = 200;

// Checks a lock name: 1 to k_max_lock_name_bytes bytes of valid UTF-8, no NUL or other control
// characters (they hide in logs and terminals), no leading '-' (it would read as an option) and no '#'
// (reserved: slot K of a semaphore NAME is stored as "NAME#K").
// Throws Error (exit 64) naming the problem and the rule.
void validate_lock_name(std::string_view name);

} // namespace mongolock
