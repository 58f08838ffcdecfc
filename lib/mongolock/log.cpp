#include <mongolock/log.hpp>
#include <mongolock/uri.hpp>

#include <cstdio>

namespace mongolock {

Log::Log(Verbosity verbosity, std::string uri)
    : m_verbosity(verbosity), m_uri(std::move(uri)), m_start(std::chrono::steady_clock::now()) {}

void Log::write(std::string_view prefix, std::string_view message) const {
  const auto line = scrub_secrets(fmt::format("mongolock: {}{}\n", prefix, message), m_uri);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void Log::info(std::string_view message) const {
  if (m_verbosity != Verbosity::quiet) write("", message);
}

void Log::warning(std::string_view message) const {
  if (m_verbosity != Verbosity::quiet) write("warning: ", message);
}

void Log::error(std::string_view message) const { write("error: ", message); }

void Log::diagnostic(std::string_view message) const { write("debug: ", message); }

void Log::debug(std::string_view message) const {
  if (m_verbosity != Verbosity::verbose) return;
  const auto elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m_start);
  write(fmt::format("[{:8.1f}ms] ", elapsed.count()), message);
}

} // namespace mongolock
