#include <mongolock/error.hpp>
#include <mongolock/token.hpp>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <sys/random.h>

namespace mongolock {

std::string make_token() {
  std::array<unsigned char, k_token_hex_length / 2> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    const auto n = getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw internal_error(fmt::format("getrandom failed: {}", std::strerror(errno)));
    got += static_cast<std::size_t>(n);
  }
  std::string token;
  token.reserve(k_token_hex_length);
  for (const auto b : bytes)
    token += fmt::format("{:02x}", b);
  return token;
}

bool is_valid_token(std::string_view token) {
  if (token.size() != k_token_hex_length) return false;
  for (const char c : token) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

} // namespace mongolock
