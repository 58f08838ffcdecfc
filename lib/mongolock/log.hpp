// Human messages on stderr, with -q/-v levels. Data (tokens, JSON, status) goes to stdout elsewhere.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <string>
#include <string_view>

namespace mongolock {

enum class Verbosity { quiet, normal, verbose };

// Writes "mongolock: ..." lines to stderr. Every message is passed through scrub_secrets() for the
// configured URI, so a password never reaches the terminal or a log. Safe to use from several threads:
// each line is one write.
class Log {
public:
  explicit Log(Verbosity verbosity = Verbosity::normal, std::string uri = {});

  void set_uri(std::string uri) { m_uri = std::move(uri); }
  [[nodiscard]] Verbosity verbosity() const { return m_verbosity; }

  void info(std::string_view message) const;       // not with -q
  void warning(std::string_view message) const;    // "warning: ...", not with -q
  void error(std::string_view message) const;      // "error: ...", always
  void debug(std::string_view message) const;      // only with -v, prefixed with the time since start
  void diagnostic(std::string_view message) const; // "debug: ...", always (asked for by a debug variable)

  template <typename... Args> void debugf(fmt::format_string<Args...> format, Args&&... args) const {
    if (m_verbosity == Verbosity::verbose) debug(fmt::format(format, std::forward<Args>(args)...));
  }

private:
  void write(std::string_view prefix, std::string_view message) const;

  Verbosity m_verbosity;
  std::string m_uri;
  std::chrono::steady_clock::time_point m_start;
};

} // namespace mongolock
