#include <mongolock/error.hpp>
#include <mongolock/text.hpp>

#include <fmt/format.h>

namespace mongolock {

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

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  const auto escape = [&out](std::string_view bytes) {
    for (const char byte : bytes)
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(byte));
  };
  for (std::size_t i = 0; i < text.size();) {
    char32_t code_point = 0;
    const auto len = decode_utf8(text, i, code_point);
    if (len == 0) {
      escape(text.substr(i, 1));
      ++i;
      continue;
    }
    if (code_point == '\t') {
      out += "\\t";
    } else if (code_point == '\n') {
      out += "\\n";
    } else if (code_point == '\r') {
      out += "\\r";
    } else if (is_control(code_point)) {
      escape(text.substr(i, len));
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

void validate_printable_text(std::string_view text, std::string_view what) {
  for (std::size_t i = 0; i < text.size();) {
    char32_t code_point = 0;
    const auto len = decode_utf8(text, i, code_point);
    if (len == 0) throw usage_error(fmt::format("{} is not valid UTF-8 at byte {}", what, i));
    if (is_control(code_point)) {
      throw usage_error(fmt::format("{} contains control character 0x{:02x} at byte {}; use printable characters", what,
                                    static_cast<std::uint32_t>(code_point), i));
    }
    i += len;
  }
}

std::string quoted_list(const std::vector<std::string>& items, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < max; ++i)
    out += fmt::format("{}'{}'", out.empty() ? "" : ", ", items[i]);
  if (items.size() > max) out += fmt::format(" and {} more", items.size() - max);
  return out;
}

char* write_decimal(char* out, unsigned long value) noexcept {
  char digits[20];
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0);
  while (n > 0)
    *out++ = digits[--n];
  return out;
}

} // namespace mongolock
