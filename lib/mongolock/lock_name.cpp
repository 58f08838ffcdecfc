#include <mongolock/error.hpp>
#include <mongolock/lock_name.hpp>
#include <mongolock/text.hpp>

#include <fmt/format.h>

namespace mongolock {

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
    if (is_control(code_point)) {
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
