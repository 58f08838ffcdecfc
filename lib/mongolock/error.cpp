#include <mongolock/error.hpp>

namespace mongolock {

Error usage_error(const std::string& message) { return Error(k_exit_usage, message); }
Error unavailable_error(const std::string& message) { return Error(k_exit_unavailable, message); }
Error internal_error(const std::string& message) { return Error(k_exit_internal, message); }

} // namespace mongolock
