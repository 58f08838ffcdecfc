#include <mongolock/uri.hpp>

#include <algorithm>

namespace mongolock {

namespace {

struct PasswordSpan {
  std::size_t begin = 0;
  std::size_t end = 0; // begin == end: no password
};

// Finds the password in scheme://user:password@hosts/...: the userinfo ends at the last '@' before the
// query ('?') or fragment ('#'), so a password with an unescaped '@' or '/' is still covered. In a
// malformed URI without "://" before that '@' ("alice:pw@host", "mongodb:/alice:pw@host"), the password
// is what follows the last ':' before the '@'.
PasswordSpan find_password(std::string_view uri) {
  const auto limit = std::min(uri.find_first_of("?#"), uri.size());
  const auto at = limit == 0 ? std::string_view::npos : uri.rfind('@', limit - 1);
  if (at == std::string_view::npos) return {};
  const auto scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos || scheme_end > at) {
    const auto colon = uri.rfind(':', at);
    return colon == std::string_view::npos ? PasswordSpan{} : PasswordSpan{colon + 1, at};
  }
  const auto start = scheme_end + 3;
  const auto colon = uri.find(':', start);
  if (colon == std::string_view::npos || colon > at) return {}; // a user name, no password
  return {colon + 1, at};
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void replace_all(std::string& text, std::string_view what, std::string_view with) {
  if (what.empty()) return;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + with.size())) {
    text.replace(pos, what.size(), with);
  }
}

} // namespace

std::string redact_uri(std::string_view uri) {
  const auto span = find_password(uri);
  std::string out(uri);
  if (span.begin != span.end) out.replace(span.begin, span.end - span.begin, "***");
  return out;
}

std::string uri_password(std::string_view uri) {
  const auto span = find_password(uri);
  return percent_decode(uri.substr(span.begin, span.end - span.begin));
}

std::string scrub_secrets(std::string message, std::string_view uri) {
  const auto span = find_password(uri);
  if (span.begin == span.end) return message;
  replace_all(message, uri, redact_uri(uri));
  replace_all(message, uri.substr(span.begin, span.end - span.begin), "***");
  replace_all(message, uri_password(uri), "***");
  return message;
}

} // namespace mongolock
