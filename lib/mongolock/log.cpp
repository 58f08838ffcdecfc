#include <mongolock/log.hpp>
#include <mongolock/text.hpp>
#include <mongolock/uri.hpp>

#include <cstdio>

namespace mongolock {

std::string printable_message(std::string_view message) { return printable(redact_text(message)); }

Log::Log(Verbosity verbosity, std::string uri)
    : m_verbosity(verbosity), m_uri(std::move(uri)), m_start(std::chrono::steady_clock::now()) {}

std::string Log::scrub(std::string text) const { return scrub_secrets(std::move(text), m_uri); }

void Log::write(std::string_view prefix, std::string_view message) const {
  std::string body(message);
  if (!m_uri.empty() && m_uri != redact_uri(m_uri)) {
    for (auto pos = body.find(m_uri); pos != std::string::npos; pos = body.find(m_uri, pos)) {
      body.replace(pos, m_uri.size(), redact_uri(m_uri));
    }
  }
  // Bounded: a message quoting what came from outside (a server's reply, hundreds of names) stays short.
  if (body.size() > k_max_message_bytes) {
    const auto cut = body.size() - k_max_message_bytes;
    body.resize(k_max_message_bytes);
    body += fmt::format("... ({} more bytes)", cut);
  }
  const auto line = fmt::format("mongolock: {}{}\n", prefix, printable_message(body));
  // A failed write (EPIPE: the reader went away; SIGPIPE is ignored) loses the message, never the run.
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  std::clearerr(stderr);
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
