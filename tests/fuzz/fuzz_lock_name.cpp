// libFuzzer target: lock-name rules. An accepted name is 1..200 bytes of printable UTF-8 without a
// leading '-' or a '#'; a refused one gets exit 64 and a message that prints as one line.
#include <mongolock/error.hpp>
#include <mongolock/lock_name.hpp>
#include <mongolock/log.hpp>
#include <mongolock/text.hpp>

#include <cstdint>
#include <string_view>

using namespace mongolock;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view name(reinterpret_cast<const char*>(data), size);
  try {
    validate_lock_name(name);
    if (name.empty() || name.size() > k_max_lock_name_bytes || name.front() == '-' ||
        name.find('#') != std::string_view::npos || printable(name) != name) {
      __builtin_trap();
    }
  } catch (const Error& e) {
    if (e.exit_code() != k_exit_usage) __builtin_trap();
    validate_printable_text(printable_message(e.what()), "message");
  }
  return 0;
}
