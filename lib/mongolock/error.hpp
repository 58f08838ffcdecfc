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
  Error(ExitCode code, const std::string& message, bool transient = false, bool refused = false)
      : std::runtime_error(message), m_code(code), m_transient(transient), m_refused(refused) {}
  [[nodiscard]] ExitCode exit_code() const noexcept { return m_code; }
  // True for a server that could not be reached or a read cut by the network (a server restarting, a
  // failover): nothing was changed on the server by the failed call, so a waiter may try again later.
  [[nodiscard]] bool transient() const noexcept { return m_transient; }
  // True for a write the server answered with an error, every copy of it that was sent (no driver retry
  // after a lost reply): nothing of it was applied and no copy can be applied later (red team 7, F6: a
  // renewal refused twice is a refusal, not a renewal of unknown outcome that pins the lease).
  [[nodiscard]] bool refused() const noexcept { return m_refused; }

private:
  ExitCode m_code;
  bool m_transient = false;
  bool m_refused = false;
};

// Shorthands for the common kinds.
[[nodiscard]] Error usage_error(const std::string& message);       // exit 64
[[nodiscard]] Error unavailable_error(const std::string& message); // exit 69
// Exit 69, transient(): the server could not be reached, or a call that changes nothing failed on the network.
[[nodiscard]] Error unreachable_error(const std::string& message);
// Exit 69, refused(): a write every copy of which the server answered with an error (not applied).
[[nodiscard]] Error refused_error(const std::string& message);
[[nodiscard]] Error internal_error(const std::string& message); // exit 70

class Log;

// Runs `body` and returns its exit code; the one top-level error handler: an Error prints
// "mongolock: error: <what>" and returns its exit code; any other exception prints
// "mongolock: error: internal error: ..." and returns 70 (k_exit_internal). Never throws.
int guarded_main(const Log& log, const std::function<int()>& body) noexcept;

} // namespace mongolock
