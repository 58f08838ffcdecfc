// libFuzzer target: URI redaction. Input: a URI, a newline, a message. Whatever the bytes: nothing
// crashes; scrub_secrets() leaves no trace of the URI's password (as written or decoded) in the message;
// a URI built with the input's password and planted in the message is redacted by redact_text(); and
// every printed message is one printable line.
#include <mongolock/log.hpp>
#include <mongolock/text.hpp>
#include <mongolock/uri.hpp>

#include <cstdint>
#include <string>
#include <string_view>

using namespace mongolock;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto newline = input.find('\n');
  const auto uri = input.substr(0, newline);
  const std::string message(newline == std::string_view::npos ? std::string_view() : input.substr(newline + 1));

  const auto password = uri_password(uri);
  const auto scrubbed = scrub_secrets(message, uri);
  if (!password.empty() && password.find('*') == std::string::npos && scrubbed.find(password) != std::string::npos) {
    __builtin_trap();
  }
  (void)redact_uri(uri);

  // A password of characters that need no escaping in a URI's userinfo, planted in free text.
  std::string planted;
  for (const char c : message) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
        c == '_' || c == '~' || c == '!' || c == '$' || c == '&' || c == '(' || c == ')' || c == '+' || c == ',' ||
        c == ';' || c == '=')
      planted += c;
  }
  if (!planted.empty()) {
    const auto text = "error: mongodb://user:" + planted + "@db.example:27017/?x=1 refused";
    if (redact_text(text) != "error: mongodb://user:***@db.example:27017/?x=1 refused") __builtin_trap();
  }

  validate_printable_text(printable_message(message), "message");
  validate_printable_text(printable_message(std::string(uri)), "message");
  return 0;
}
