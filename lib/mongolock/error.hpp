// Errors above the driver edge: one exception type that carries the exit code it maps to.
#pragma once

#include <mongolock/exit_codes.hpp>

#include <functional>
#include <stdexcept>
#include <string>

namespace mongolock {

// A failure that ends the command. what() is the one-line message printed after "mongolock: error: ";
// it names the problem and, where there is one, the way out. exit_code() is from exit_codes.hpp.
class Error : public std::runtime_error {
public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), m_code(code) {}
  [[nodiscard]] ExitCode exit_code() const noexcept { return m_code; }

private:
  ExitCode m_code;
};

// Shorthands for the common kinds.
[[nodiscard]] Error usage_error(const std::string& message);       // exit 64
[[nodiscard]] Error unavailable_error(const std::string& message); // exit 69
[[nodiscard]] Error internal_error(const std::string& message);    // exit 70

class Log;

// Runs `body` and returns its exit code; the one top-level error handler: an Error prints
// "mongolock: error: <what>" and returns its exit code; any other exception prints
// "mongolock: error: internal error: ..." and returns 70 (k_exit_internal). Never throws.
int guarded_main(const Log& log, const std::function<int()>& body) noexcept;

} // namespace mongolock
