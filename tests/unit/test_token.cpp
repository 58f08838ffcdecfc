#include <doctest/doctest.h>

#include <mongolock/token.hpp>

#include <array>
#include <set>
#include <string>

using namespace mongolock;
using namespace std::string_literals;

TEST_SUITE_BEGIN("Token");

TEST_CASE("A token is 32 lowercase hex digits") {
  REQUIRE(k_token_hex_length == 32);
  const auto token = make_token();
  CAPTURE(token);
  CHECK(token.size() == 32);
  CHECK(token.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(is_valid_token(token));
}

TEST_CASE("Tokens do not repeat") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const auto token = make_token();
    CAPTURE(token);
    REQUIRE(is_valid_token(token));
    REQUIRE(seen.insert(token).second);
  }
  CHECK(seen.size() == 1000);
}

// With 1000 random tokens, a given digit is missing from a given position with probability (15/16)^1000,
// about 1e-28; a token with a constant, unfilled or biased part fails this.
TEST_CASE("Every position of a token takes every hex digit") {
  std::array<std::set<char>, 32> digits_at{};
  for (int i = 0; i < 1000; ++i) {
    const auto token = make_token();
    REQUIRE(token.size() == 32);
    for (std::size_t pos = 0; pos < token.size(); ++pos)
      digits_at[pos].insert(token[pos]);
  }
  for (std::size_t pos = 0; pos < digits_at.size(); ++pos) {
    CAPTURE(pos);
    CHECK(digits_at[pos].size() == 16);
  }
}

TEST_CASE("Well-formed tokens are valid") {
  CHECK(is_valid_token("0123456789abcdef0123456789abcdef"));
  CHECK(is_valid_token("00000000000000000000000000000000"));
  CHECK(is_valid_token("ffffffffffffffffffffffffffffffff"));
}

TEST_CASE("Malformed tokens are not valid") {
  std::string token;
  SUBCASE("empty") { token = ""; }
  SUBCASE("31 digits") { token = std::string(31, 'a'); }
  SUBCASE("33 digits") { token = std::string(33, 'a'); }
  SUBCASE("64 digits") { token = std::string(64, 'a'); }
  SUBCASE("upper case") { token = "0123456789ABCDEF0123456789abcdef"; }
  SUBCASE("one upper-case digit") { token = "0123456789abcdef0123456789abcdeF"; }
  SUBCASE("'g'") { token = "0123456789abcdeg0123456789abcdef"; }
  SUBCASE("space") { token = "0123456789abcdef 123456789abcdef"; }
  SUBCASE("dash") { token = "01234567-9abcdef0123456789abcdef"; }
  SUBCASE("trailing newline") { token = "0123456789abcdef0123456789abcde\n"; }
  SUBCASE("NUL") { token = "0123456789abcdef\0"s + "123456789abcdef"; }
  SUBCASE("0x prefix") { token = "0x23456789abcdef0123456789abcdef"; }
  SUBCASE("non-ASCII") { token = "\xc3\xa9" + std::string(30, 'a'); }
  SUBCASE("'/' just before '0'") { token = "/" + std::string(31, 'a'); }
  SUBCASE("':' just after '9'") { token = ":" + std::string(31, 'a'); }
  SUBCASE("'`' just before 'a'") { token = "`" + std::string(31, 'a'); }
  SUBCASE("'g' just after 'f'") { token = "g" + std::string(31, 'a'); }
  SUBCASE("'A' and 'F'") { token = "AF" + std::string(30, 'a'); }
  CAPTURE(token);
  CHECK_FALSE(is_valid_token(token));
}

TEST_CASE("A valid token stops being valid when any single character is uppercased or replaced") {
  const auto token = "0123456789abcdef0123456789abcdef"s;
  REQUIRE(is_valid_token(token));
  for (std::size_t pos = 0; pos < token.size(); ++pos) {
    auto changed = token;
    changed[pos] = 'z';
    CAPTURE(changed);
    CHECK_FALSE(is_valid_token(changed));
  }
  CHECK_FALSE(is_valid_token(token.substr(1)));
  CHECK_FALSE(is_valid_token(token + "0"));
}

TEST_SUITE_END();
