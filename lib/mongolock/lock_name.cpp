#include <mongolock/error.hpp>
#include <mongolock/lock_name.hpp>

#include <fmt/format.h>

namespace mongolock {

namespace {

// Decodes the UTF-8 sequence starting at s[i] (RFC 3629: shortest form only, no surrogates, at most
// U+10FFFF). Returns its length and sets `code_point`, or returns 0 when it is not valid UTF-8.
std::size_t decode_utf8(std::string_view s, std::size_t i, char32_t& code_point) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t len = 0;
  char32_t min = 0;
  if (c < 0x80) {
    code_point = c;
    return 1;
  } else if ((c >> 5) == 0x6) {
    len = 2, min = 0x80, code_point = c & 0x1f;
  } else if ((c >> 4) == 0xe) {
    len = 3, min = 0x800, code_point = c & 0x0f;
  } else if ((c >> 3) == 0x1e) {
    len = 4, min = 0x10000, code_point = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    const auto next = static_cast<unsigned char>(s[i + k]);
    if ((next & 0xc0) != 0x80) return 0;
    code_point = (code_point << 6) | (next & 0x3f);
  }
  if (code_point < min || code_point > 0x10ffff || (code_point >= 0xd800 && code_point <= 0xdfff)) return 0;
  return len;
}

} // namespace

void validate_lock_name(std::string_view name) {
  if (name.empty()) throw usage_error("empty lock name; give a name such as 'nightly-report'");
  if (name.size() > k_max_lock_name_bytes) {
    throw usage_error(fmt::format("lock name is {} bytes long; the limit is {}", name.size(), k_max_lock_name_bytes));
  }
  // Encoding and control characters first: the messages below quote the name.
  for (std::size_t i = 0; i < name.size();) {
    char32_t code_point = 0;
    const auto len = decode_utf8(name, i, code_point);
    if (len == 0) throw usage_error(fmt::format("lock name is not valid UTF-8 at byte {}", i));
    if (code_point < 0x20 || (code_point >= 0x7f && code_point <= 0x9f)) {
      throw usage_error(fmt::format("lock name contains control character 0x{:02x} at byte {}; use printable "
                                    "characters",
                                    static_cast<std::uint32_t>(code_point), i));
    }
    i += len;
  }
  if (name.front() == '-') {
    throw usage_error(fmt::format("lock name '{}' starts with '-'; names may not look like options", name));
  }
  if (name.find('#') != std::string_view::npos) {
    throw usage_error(fmt::format("lock name '{}' contains '#', which is reserved for semaphore slots; use another "
                                  "character such as '-'",
                                  name));
  }
}

} // namespace mongolock
