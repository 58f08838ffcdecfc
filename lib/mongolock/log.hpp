// Human messages on stderr, with -q/-v levels. Data (tokens, JSON, status) goes to stdout elsewhere.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace mongolock {

enum class Verbosity { quiet, normal, verbose };

// What becomes of every message before it is printed: any URI in it redacted (redact_text(): any
// scheme's password, the secret options), then escaped to one printable line (printable(): control
// characters, C1 controls and invalid UTF-8 as \t, \n, \r or \xNN). The one path of every stderr line.
[[nodiscard]] std::string printable_message(std::string_view message);

// The longest message Log writes, in bytes before escaping; the rest is cut ("... (N more bytes)").
inline constexpr std::size_t k_max_message_bytes = 4096;

// Writes "mongolock: ..." lines to stderr, one line per message, each passed through printable_message()
// and cut at k_max_message_bytes.
// Passwords: text from the driver or server is scrubbed where it enters (scrub(), scrub_secrets());
// every line is also cleared of the raw configured URI and of any other URI's password, as a last guard. Our own words
// are never scrubbed, so a password that is an ordinary word ("error") cannot mangle them. Safe to use from several
// threads: each line is one write.
class Log {
public:
  explicit Log(Verbosity verbosity = Verbosity::normal, std::string uri = {});

  // `text` with the configured URI's password replaced by "***" (scrub_secrets()): for driver text.
  [[nodiscard]] std::string scrub(std::string text) const;
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
