#include <mongolock/error.hpp>
#include <mongolock/lock_name.hpp>

#include <fmt/format.h>

namespace mongolock {

namespace {

// Length of the UTF-8 sequence starting at s[i], or 0 when it is not valid UTF-8.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  }
  return len;
}

} // namespace

void validate_lock_name(std::string_view name) {
  if (name.empty()) throw usage_error("empty lock name; give a name such as 'nightly-report'");
  if (name.size() > k_max_lock_name_bytes) {
    throw usage_error(fmt::format("lock name is {} bytes long; the limit is {}", name.size(), k_max_lock_name_bytes));
  }
  if (name.front() == '-') {
    throw usage_error(fmt::format("lock name '{}' starts with '-'; names may not look like options", name));
  }
  if (const auto hash = name.find('#'); hash != std::string_view::npos) {
    throw usage_error(fmt::format("lock name '{}' contains '#', which is reserved for semaphore slots; use another "
                                  "character such as '-'",
                                  name));
  }
  for (std::size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) {
      throw usage_error(
          fmt::format("lock name contains control character 0x{:02x} at byte {}; use printable characters", c, i));
    }
    const auto len = utf8_sequence_length(name, i);
    if (len == 0) throw usage_error(fmt::format("lock name is not valid UTF-8 at byte {}", i));
    i += len;
  }
}

} // namespace mongolock
