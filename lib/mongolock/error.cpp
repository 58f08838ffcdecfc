#include <mongolock/error.hpp>
#include <mongolock/log.hpp>

#include <fmt/format.h>

namespace mongolock {

Error usage_error(const std::string& message) { return Error(k_exit_usage, message); }
Error unavailable_error(const std::string& message) { return Error(k_exit_unavailable, message); }
Error unreachable_error(const std::string& message) { return Error(k_exit_unavailable, message, true); }
Error refused_error(const std::string& message) { return Error(k_exit_unavailable, message, false, true); }
Error internal_error(const std::string& message) { return Error(k_exit_internal, message); }

int guarded_main(const Log& log, const std::function<int()>& body) noexcept {
  try {
    return body();
  } catch (const Error& e) {
    log.error(e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    log.error(fmt::format("internal error: {}", e.what()));
  } catch (...) {
    log.error("internal error: unknown exception");
  }
  return k_exit_internal;
}

} // namespace mongolock
