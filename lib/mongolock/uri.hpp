// Keeping credentials out of every message: URI redaction and secret scrubbing.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mongolock {

// Returns `uri` with the password of its userinfo ("mongodb://user:PASS@host") and the values of secret
// options (tlsCertificateKeyFilePassword, sslClientCertificateKeyPassword, authMechanismProperties)
// replaced by "***".
// A URI without a password comes back unchanged. Never throws; works on malformed URIs too (without
// "://", the password is what follows the last ':' before the '@').
[[nodiscard]] std::string redact_uri(std::string_view uri);

// Returns `text` with every URI in it ("scheme://...", up to the next white space or control character)
// redacted as by redact_uri(): any scheme's password and the secret options, whatever URI was
// configured. The last guard of every message (Log), for URIs that reach a message from anywhere, e.g.
// CLI11 quoting an unexpected argument. Never throws (but std::bad_alloc).
[[nodiscard]] std::string redact_text(std::string_view text);

// The password in `uri`'s userinfo, percent-decoded, or "" when there is none.
[[nodiscard]] std::string uri_password(std::string_view uri);

// Returns `message` with every occurrence of the secrets of `uri` (the password and secret option values,
// as written and percent-decoded) replaced by "***", and the whole URI replaced by its redacted form. Used on every
// message that may quote driver or server text before it is printed.
[[nodiscard]] std::string scrub_secrets(std::string message, std::string_view uri);

// Where the connection string comes from. Each of the three layers (command line, environment, config
// file) may give a URI (--uri, MONGOLOCK_URI, uri) or a file to read it from (--uri-file,
// MONGOLOCK_URI_FILE, uri-file), not both.
struct UriLayer {
  std::optional<std::string> uri;
  std::optional<std::string> uri_file;
};

// The winner: kind none (no layer gives either: the default URI applies), uri (value is the URI) or
// uri_file (value is the path); `layer` and `setting` name where it came from, for messages.
struct UriSource {
  enum class Kind { none, uri, uri_file };
  Kind kind = Kind::none;
  std::string value;
  std::string layer;   // "command line", "environment" or "config file"
  std::string setting; // what gave it: "--uri", "MONGOLOCK_URI_FILE", "uri-file", ...
};

// The one precedence rule for the URI: the command line, else the environment, else the config file,
// each with its uri or its uri-file. Both in one layer (any of the three, also one that is not used) is
// an Error (exit 64) naming the layer and the two settings. The rule of man/mongolock.1 (CONFIGURATION).
[[nodiscard]] UriSource choose_uri_source(const UriLayer& command_line, const UriLayer& environment,
                                          const UriLayer& config_file);

} // namespace mongolock
