#include <mongolock/error.hpp>
#include <mongolock/uri.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace mongolock {

namespace {

struct Span {
  std::size_t begin = 0;
  std::size_t end = 0;         // begin == end: nothing
  bool key_value_list = false; // an option value like "KEY:VALUE,KEY:VALUE"
};

// The last '@' in uri[from, to), or npos.
std::size_t last_at(std::string_view uri, std::size_t from, std::size_t to) {
  if (to <= from) return std::string_view::npos;
  const auto at = uri.rfind('@', to - 1);
  return at != std::string_view::npos && at >= from ? at : std::string_view::npos;
}

// Finds the password in scheme://user:password@hosts/...?options. Like libmongoc, the userinfo ends at
// the last '@' before the first '/' after "://" (or, without a '/', before the options: '?' or '#'), so a
// '?', '#' or '@' in the password is covered; when there is no '@' there (an unescaped '/' in the
// password, which libmongoc refuses and we quote in the error), at the last '@' before the options. In a
// malformed URI without "://" ("alice:pw@host", "mongodb:/alice:pw@host"), the password is what follows
// the last ':' before the last '@'.
Span find_password(std::string_view uri) {
  const auto scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) {
    const auto at = last_at(uri, 0, uri.size());
    const auto colon = at == std::string_view::npos ? at : uri.rfind(':', at);
    return colon == std::string_view::npos ? Span{} : Span{colon + 1, at};
  }
  const auto start = scheme_end + 3;
  const auto options = std::min(uri.find_first_of("?#", start), uri.size());
  const auto slash = uri.find('/', start);
  auto at = last_at(uri, start, slash == std::string_view::npos ? options : slash);
  if (at == std::string_view::npos) at = last_at(uri, start, options);
  if (at == std::string_view::npos) return {};
  const auto colon = uri.find(':', start);
  if (colon == std::string_view::npos || colon > at) return {}; // a user name, no password
  return {colon + 1, at};
}

// URI options whose values are secrets (matched without regard to case, as MongoDB does).
constexpr std::string_view k_secret_options[] = {"tlscertificatekeyfilepassword", "sslclientcertificatekeypassword",
                                                 "authmechanismproperties"};

bool is_secret_option(std::string_view key) {
  std::string lower(key);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return std::find(std::begin(k_secret_options), std::end(k_secret_options), lower) != std::end(k_secret_options);
}

// The values of secret options in the query (after the '?' that follows the hosts), as spans.
std::vector<Span> find_secret_options(std::string_view uri, std::size_t after) {
  std::vector<Span> spans;
  const auto question = uri.find('?', after);
  if (question == std::string_view::npos) return spans;
  for (std::size_t pos = question + 1; pos < uri.size();) {
    auto end = uri.find_first_of("&;", pos);
    if (end == std::string_view::npos) end = uri.size();
    const auto equals = uri.find('=', pos);
    if (equals != std::string_view::npos && equals < end && is_secret_option(uri.substr(pos, equals - pos)) &&
        equals + 1 < end) {
      spans.push_back({equals + 1, end, true});
    }
    pos = end + 1;
  }
  return spans;
}

// Every secret span of `uri`, in order: the password, then secret option values.
std::vector<Span> find_secrets(std::string_view uri) {
  std::vector<Span> spans;
  const auto password = find_password(uri);
  if (password.begin != password.end) spans.push_back(password);
  const auto options = find_secret_options(uri, password.end);
  spans.insert(spans.end(), options.begin(), options.end());
  return spans;
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
  std::string out(uri);
  const auto spans = find_secrets(uri);
  for (auto it = spans.rbegin(); it != spans.rend(); ++it)
    out.replace(it->begin, it->end - it->begin, "***");
  return out;
}

std::string redact_text(std::string_view text) {
  const auto is_scheme_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
           c == '.';
  };
  // A URI in free text ends at white space or a control character; quotes and punctuation around it stay
  // part of it, which redact_uri() leaves alone (they are not in the userinfo).
  const auto is_end = [](char c) { return static_cast<unsigned char>(c) <= ' ' || c == '\x7f'; };
  std::string out;
  std::size_t pos = 0;
  for (auto sep = text.find("://"); sep != std::string_view::npos; sep = text.find("://", pos)) {
    auto start = sep;
    while (start > pos && is_scheme_char(text[start - 1]))
      --start;
    auto end = sep + 3;
    while (end < text.size() && !is_end(text[end]))
      ++end;
    out.append(text.substr(pos, start - pos));
    out += redact_uri(text.substr(start, end - start));
    pos = end;
  }
  out.append(text.substr(pos));
  return out;
}

std::string uri_password(std::string_view uri) {
  const auto span = find_password(uri);
  return percent_decode(uri.substr(span.begin, span.end - span.begin));
}

std::string scrub_secrets(std::string message, std::string_view uri) {
  const auto spans = find_secrets(uri);
  if (spans.empty()) return message;
  replace_all(message, uri, redact_uri(uri));
  for (const auto& span : spans) {
    const auto raw = uri.substr(span.begin, span.end - span.begin);
    replace_all(message, raw, "***");
    const auto decoded = percent_decode(raw);
    replace_all(message, decoded, "***");
    // authMechanismProperties=KEY:VALUE,KEY:VALUE: each value is a secret of its own.
    for (std::size_t pos = 0; span.key_value_list && pos < decoded.size();) {
      auto end = decoded.find(',', pos);
      if (end == std::string::npos) end = decoded.size();
      const auto colon = decoded.find(':', pos);
      if (colon != std::string::npos && colon < end && end - colon > 4) {
        replace_all(message, std::string_view(decoded).substr(colon + 1, end - colon - 1), "***");
      }
      pos = end + 1;
    }
  }
  return message;
}

UriSource choose_uri_source(const UriLayer& command_line, const UriLayer& environment, const UriLayer& config_file) {
  struct Named {
    const UriLayer& layer;
    const char* name;
    const char* uri;
    const char* uri_file;
  };
  const Named layers[] = {{command_line, "command line", "--uri", "--uri-file"},
                          {environment, "environment", "MONGOLOCK_URI", "MONGOLOCK_URI_FILE"},
                          {config_file, "config file", "uri", "uri-file"}};
  for (const auto& l : layers) {
    if (l.layer.uri && l.layer.uri_file) {
      throw usage_error(fmt::format("{} and {} both given ({}); give one of them: the URI or the file that holds it",
                                    l.uri, l.uri_file, l.name));
    }
  }
  for (const auto& l : layers) {
    if (l.layer.uri) return UriSource{UriSource::Kind::uri, *l.layer.uri, l.name, l.uri};
    if (l.layer.uri_file) return UriSource{UriSource::Kind::uri_file, *l.layer.uri_file, l.name, l.uri_file};
  }
  return {};
}

} // namespace mongolock
