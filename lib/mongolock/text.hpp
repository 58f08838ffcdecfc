// Text that reaches a terminal or a log: UTF-8 decoding and escaping to one printable line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace mongolock {

// Decodes the UTF-8 sequence that starts at s[i] (RFC 3629: shortest form only, no surrogates, at most
// U+10FFFF). Returns its length in bytes and sets `code_point`, or returns 0 when it is not valid UTF-8
// (also when the sequence is cut off by the end of `s`). Requires i < s.size(). Never throws.
[[nodiscard]] std::size_t decode_utf8(std::string_view s, std::size_t i, char32_t& code_point);

// True for the code points that move a terminal instead of showing a character: the C0 controls
// U+0000-U+001F, DEL U+007F and the C1 controls U+0080-U+009F.
[[nodiscard]] constexpr bool is_control(char32_t code_point) {
  return code_point < 0x20 || (code_point >= 0x7f && code_point <= 0x9f);
}

// `text` as one printable line: tab, line feed and carriage return become "\t", "\n" and "\r"; every
// other control character (is_control(); a C1 control as each of its two UTF-8 bytes) and every byte
// that is not part of valid UTF-8 becomes "\xNN" (two lowercase hex digits). Valid printable UTF-8
// passes unchanged. Used on every message mongolock prints (Log), so that names, commands and file
// contents quoted in a message cannot inject terminal escapes or break the one-line format. Never throws
// (but std::bad_alloc).
[[nodiscard]] std::string printable(std::string_view text);

// Checks that `text` (a value that is stored and printed later, such as a holder identity) is valid UTF-8
// without control characters (is_control()). Throws Error (exit 64) naming `what` and the byte offset.
void validate_printable_text(std::string_view text, std::string_view what);

// Writes `value` in decimal at `out`, which must have room for 20 characters, and returns the end (no
// terminating NUL). No allocation and no locale: usable where only system calls are (a forked child, the
// executable's .preinit_array before libc's own initializer). Never throws.
char* write_decimal(char* out, unsigned long value) noexcept;

// "'a', 'b', 'c'" for messages: each item quoted, at most `max` of them, then "and N more" (a run of
// hundreds of names still says it in a short line).
[[nodiscard]] std::string quoted_list(const std::vector<std::string>& items, std::size_t max = 8);

} // namespace mongolock
