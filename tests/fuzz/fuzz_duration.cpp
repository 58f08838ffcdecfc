// libFuzzer target: the duration parser. Any input either parses to 1ms..365d, which formats and parses
// again, or is refused with exit 64 and a message that prints as one line.
#include <mongolock/duration.hpp>
#include <mongolock/error.hpp>
#include <mongolock/log.hpp>
#include <mongolock/text.hpp>

#include <chrono>
#include <cstdint>
#include <string_view>

using namespace mongolock;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto ms = parse_duration(text, "--ttl");
    if (ms < Millis(1) || ms > std::chrono::hours(24 * 365)) __builtin_trap();
    if (parse_duration(format_duration(ms), "--ttl") > ms) __builtin_trap(); // formatting rounds down
  } catch (const Error& e) {
    if (e.exit_code() != k_exit_usage) __builtin_trap();
    validate_printable_text(printable_message(e.what()), "message"); // throws (and aborts the run) if not
  }
  return 0;
}
