#include <mongolock/error.hpp>
#include <mongolock/token.hpp>

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <sys/random.h>

namespace mongolock {

namespace {

template <std::size_t N> void fill_random(std::array<unsigned char, N>& bytes) {
  std::size_t got = 0;
  while (got < bytes.size()) {
    const auto n = getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw internal_error(fmt::format("getrandom failed: {}", std::strerror(errno)));
    got += static_cast<std::size_t>(n);
  }
}

} // namespace

std::string make_token() {
  std::array<unsigned char, k_token_hex_length / 2> bytes{};
  fill_random(bytes);
  std::string token;
  token.reserve(k_token_hex_length);
  for (const auto b : bytes)
    token += fmt::format("{:02x}", b);
  return token;
}

std::string make_object_id() {
  std::array<unsigned char, 8> bytes{};
  fill_random(bytes);
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
  std::string id = fmt::format("{:08x}", static_cast<std::uint32_t>(seconds.count()));
  for (const auto b : bytes)
    id += fmt::format("{:02x}", b);
  return id;
}

bool is_valid_token(std::string_view token) {
  if (token.size() != k_token_hex_length) return false;
  for (const char c : token) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

} // namespace mongolock
