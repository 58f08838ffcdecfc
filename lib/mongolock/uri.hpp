// Keeping credentials out of every message: URI redaction and secret scrubbing.
#pragma once

#include <string>
#include <string_view>

namespace mongolock {

// Returns `uri` with the password of its userinfo ("mongodb://user:PASS@host") and the values of secret
// options (tlsCertificateKeyFilePassword, sslClientCertificateKeyPassword, authMechanismProperties)
// replaced by "***".
// A URI without a password comes back unchanged. Never throws; works on malformed URIs too (without
// "://", the password is what follows the last ':' before the '@').
[[nodiscard]] std::string redact_uri(std::string_view uri);

// The password in `uri`'s userinfo, percent-decoded, or "" when there is none.
[[nodiscard]] std::string uri_password(std::string_view uri);

// Returns `message` with every occurrence of the secrets of `uri` (the password and secret option values,
// as written and percent-decoded) replaced by "***", and the whole URI replaced by its redacted form. Used on every
// message that may quote driver or server text before it is printed.
[[nodiscard]] std::string scrub_secrets(std::string message, std::string_view uri);

} // namespace mongolock
