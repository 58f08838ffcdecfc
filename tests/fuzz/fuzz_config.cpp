// libFuzzer target: the config file parser (scan_config_text() + CLI11's TOML reader,
// parse_config_text()). Any text is either refused with exit 64 and a one-line "FILE:LINE: ..." message, or
// parsed into items that each have the line that sets them (our scan and CLI11 agree on every line).
#include "config.hpp"

#include <mongolock/error.hpp>
#include <mongolock/log.hpp>
#include <mongolock/text.hpp>

#include <algorithm>
#include <cstdint>
#include <string_view>

using namespace mongolock;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto items = parse_config_text(text, "f.conf");
    const auto lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
    for (const auto& located : items) {
      if (located.line == 0 || located.line > lines) __builtin_trap();
    }
  } catch (const Error& e) {
    if (e.exit_code() != k_exit_usage) __builtin_trap();
    const auto message = printable_message(e.what());
    validate_printable_text(message, "message");
    if (!std::string_view(message).starts_with("f.conf:")) __builtin_trap();
  }
  return 0;
}
