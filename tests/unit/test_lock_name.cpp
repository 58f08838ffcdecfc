#include <doctest/doctest.h>

#include <mongolock/error.hpp>
#include <mongolock/lock_name.hpp>

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>

using namespace mongolock;
using namespace std::string_literals;

namespace {

// The Error validate_lock_name throws for `name`, or nothing when it accepts the name.
std::optional<Error> name_error(std::string_view name) {
  try {
    validate_lock_name(name);
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// `name` with every byte outside printable ASCII as \xNN, so failure reports cannot upset the terminal.
std::string escaped(std::string_view name) {
  std::string out;
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    out += byte >= 0x20 && byte < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", byte);
  }
  return out;
}

// The Error validate_lock_name throws for `name`, checked to be a usage error (exit 64).
Error refusal(std::string_view name) {
  auto err = name_error(name);
  REQUIRE(err);
  CHECK(err->exit_code() == k_exit_usage);
  return *err;
}

} // namespace

TEST_SUITE_BEGIN("LockName");

TEST_CASE("Ordinary names are accepted") {
  CHECK_NOTHROW(validate_lock_name("nightly-report"));
  CHECK_NOTHROW(validate_lock_name("a"));
  CHECK_NOTHROW(validate_lock_name("backup.db1:daily/2024 run 3"));
  CHECK_NOTHROW(validate_lock_name("x-"));
  CHECK_NOTHROW(validate_lock_name("~!@$%^&*()_+=[]{};'\",<>?"));
}

TEST_CASE("An empty name is refused") {
  CHECK_THROWS_AS(validate_lock_name(""), Error);
  const auto err = refusal("");
  CHECK(doctest::String(err.what()) == doctest::Contains("empty lock name"));
}

TEST_CASE("Names up to the byte limit are accepted and longer ones refused") {
  REQUIRE(k_max_lock_name_bytes == 200);

  SUBCASE("exactly 200 ASCII bytes") { CHECK_NOTHROW(validate_lock_name(std::string(200, 'a'))); }
  SUBCASE("201 ASCII bytes") {
    const auto err = name_error(std::string(201, 'a'));
    REQUIRE(err);
    CHECK(err->exit_code() == k_exit_usage);
    CHECK(doctest::String(err->what()) == doctest::Contains("201 bytes"));
    CHECK(doctest::String(err->what()) == doctest::Contains("200"));
  }
  SUBCASE("the limit counts bytes, not characters") {
    std::string name;
    for (int i = 0; i < 66; ++i)
      name += "\xe6\x97\xa5"; // U+65E5, 3 bytes
    REQUIRE(name.size() == 198);
    CHECK_NOTHROW(validate_lock_name(name + "ab"));
    const auto err = name_error(name + "\xe6\x97\xa5"); // 67 characters, 201 bytes
    REQUIRE(err);
    CHECK(err->exit_code() == k_exit_usage);
    CHECK(doctest::String(err->what()) == doctest::Contains("201 bytes"));
  }
  SUBCASE("a very long name") {
    const auto err = name_error(std::string(100'000, 'a'));
    REQUIRE(err);
    CHECK(err->exit_code() == k_exit_usage);
  }
}

TEST_CASE("Control characters are refused") {
  std::string name;
  std::string shown;
  SUBCASE("NUL") {
    name = "deploy\0prod"s;
    shown = "0x00";
  }
  SUBCASE("leading NUL") {
    name = "\0x"s;
    shown = "0x00";
  }
  SUBCASE("trailing NUL") {
    name = "x\0"s;
    shown = "0x00";
  }
  SUBCASE("tab") {
    name = "deploy\tprod";
    shown = "0x09";
  }
  SUBCASE("newline") {
    name = "deploy\n";
    shown = "0x0a";
  }
  SUBCASE("carriage return") {
    name = "deploy\rprod";
    shown = "0x0d";
  }
  SUBCASE("escape") {
    name = "deploy\x1b[2J";
    shown = "0x1b";
  }
  SUBCASE("unit separator 0x1f") {
    name = "a\x1f";
    shown = "0x1f";
  }
  SUBCASE("DEL") {
    name = "deploy\x7fprod";
    shown = "0x7f";
  }
  const auto shown_name = escaped(name);
  CAPTURE(shown_name);
  CHECK_THROWS_AS(validate_lock_name(name), Error);
  const auto err = refusal(name);
  CHECK(doctest::String(err.what()) == doctest::Contains("control character"));
  CHECK(doctest::String(err.what()) == doctest::Contains(shown.c_str()));
}

TEST_CASE("The error for a control character gives its byte offset") {
  const auto err = name_error("deploy\0prod"s);
  REQUIRE(err);
  CHECK(doctest::String(err->what()) == doctest::Contains("at byte 6"));
}

TEST_CASE("Space and the printable ASCII range around the controls are accepted") {
  CHECK_NOTHROW(validate_lock_name("deploy prod"));
  CHECK_NOTHROW(validate_lock_name(" "));
  CHECK_NOTHROW(validate_lock_name("~"));
}

TEST_CASE("A leading '-' is refused because it reads as an option") {
  std::string name;
  SUBCASE("-x") { name = "-x"; }
  SUBCASE("--help") { name = "--help"; }
  SUBCASE("-") { name = "-"; }
  const auto shown_name = escaped(name);
  CAPTURE(shown_name);
  const auto err = refusal(name);
  CHECK(doctest::String(err.what()) == doctest::Contains("'-'"));
  CHECK(doctest::String(err.what()) == doctest::Contains("option"));
}

TEST_CASE("'#' is refused because it is reserved for semaphore slots") {
  std::string name;
  SUBCASE("slot-like suffix") { name = "nightly#1"; }
  SUBCASE("leading") { name = "#nightly"; }
  SUBCASE("alone") { name = "#"; }
  SUBCASE("trailing") { name = "nightly#"; }
  const auto shown_name = escaped(name);
  CAPTURE(shown_name);
  CHECK_THROWS_AS(validate_lock_name(name), Error);
  const auto err = refusal(name);
  CHECK(doctest::String(err.what()) == doctest::Contains("'#'"));
  CHECK(doctest::String(err.what()) == doctest::Contains("slot"));
}

// The refusals for a leading '-' and for '#' quote the name, so its bytes must be checked first: otherwise a
// name such as "-\x1b]0;owned\x07" or "a#\nmongolock: lock acquired" would reach stderr verbatim, the
// terminal escape would run and the newline would forge a log line.
TEST_CASE("Refusals never echo the control characters of a name") {
  std::string name;
  SUBCASE("leading '-' with a terminal escape") { name = "-\x1b]0;owned\x07"; }
  SUBCASE("leading '-' with a newline") { name = "-x\nmongolock: lock acquired"; }
  SUBCASE("'#' with a newline") { name = "a#\nmongolock: lock acquired"; }
  SUBCASE("'#' with a C0 escape") { name = "a#\x1b[2J"; }
  SUBCASE("control character alone") { name = "a\x1b[2J"; }
  const auto shown_name = escaped(name);
  CAPTURE(shown_name);
  const auto err = refusal(name);
  const std::string message = err.what();
  const auto shown_message = escaped(message);
  CAPTURE(shown_message);
  CHECK(message.find_first_of("\x1b\x07\n") == std::string::npos);
}

TEST_CASE("Valid multibyte UTF-8 is accepted") {
  CHECK_NOTHROW(validate_lock_name("deploy-日本"));
  CHECK_NOTHROW(validate_lock_name("caf\xc3\xa9"));                   // 2-byte U+00E9
  CHECK_NOTHROW(validate_lock_name("\xc2\xa0"));                      // U+00A0, lowest non-control 2-byte
  CHECK_NOTHROW(validate_lock_name("\xe0\xa0\x80"));                  // U+0800, lowest 3-byte
  CHECK_NOTHROW(validate_lock_name("\xef\xbf\xbd"));                  // U+FFFD
  CHECK_NOTHROW(validate_lock_name("job-\xf0\x9f\x94\x92"));          // U+1F512, 4-byte
  CHECK_NOTHROW(validate_lock_name("\xf4\x8f\xbf\xbf"));              // U+10FFFF, highest code point
  CHECK_NOTHROW(validate_lock_name("\xf0\x90\x80\x80-\xed\x9f\xbf")); // U+10000 and U+D7FF
}

TEST_CASE("Invalid UTF-8 is refused") {
  std::string name;
  SUBCASE("lone 0xff") { name = "deploy\xff"; }
  SUBCASE("lone 0xfe") { name = "\xfe"; }
  SUBCASE("lone continuation byte") { name = "a\x80"; }
  SUBCASE("2-byte sequence truncated at the end") { name = "caf\xc3"; }
  SUBCASE("3-byte sequence truncated at the end") { name = "deploy-\xe6\x97"; }
  SUBCASE("4-byte sequence truncated at the end") { name = "job-\xf0\x9f\x94"; }
  SUBCASE("truncated sequence followed by ASCII") { name = "\xe6\x97x"; }
  SUBCASE("5-byte lead byte") { name = "\xf8\x88\x80\x80\x80"; }
  SUBCASE("Latin-1 instead of UTF-8") { name = "caf\xe9"; }
  SUBCASE("200 bytes ending in half a character") { name = std::string(199, 'a') + "\xc3"; }
  const auto shown_name = escaped(name);
  CAPTURE(shown_name);
  CHECK_THROWS_AS(validate_lock_name(name), Error);
  const auto err = refusal(name);
  CHECK(doctest::String(err.what()) == doctest::Contains("UTF-8"));
}

TEST_CASE("A sequence cut off by the end of the name is refused whatever bytes follow in memory") {
  const std::string buffer = "deploy-\xe6\x97\xa5-caf\xc3\xa9";
  CHECK_NOTHROW(validate_lock_name(buffer));
  for (const std::size_t cut : {std::size_t{8}, std::size_t{9}, std::size_t{15}}) {
    CAPTURE(cut);
    const auto err = name_error(std::string_view(buffer.data(), cut));
    REQUIRE(err);
    CHECK(err->exit_code() == k_exit_usage);
    CHECK(doctest::String(err->what()) == doctest::Contains("UTF-8"));
  }
  CHECK_NOTHROW(validate_lock_name(std::string_view(buffer.data(), 10)));
}

TEST_CASE("The error for invalid UTF-8 gives its byte offset") {
  const auto err = name_error("deploy\xff");
  REQUIRE(err);
  CHECK(doctest::String(err->what()) == doctest::Contains("at byte 6"));
}

// Valid UTF-8 (RFC 3629) has exactly one encoding per code point, no surrogates and nothing above
// U+10FFFF. "\xc0\x80" is the overlong NUL of "modified UTF-8": accepting it lets a NUL in by the back door.
TEST_CASE("Overlong encodings, surrogates and code points above U+10FFFF are not valid UTF-8") {
  std::string name;
  SUBCASE("overlong NUL C0 80") { name = "deploy\xc0\x80prod"; }
  SUBCASE("overlong '/' C0 AF") { name = "a\xc0\xaf"; }
  SUBCASE("overlong C1 BF") { name = "a\xc1\xbf"; }
  SUBCASE("overlong 3-byte E0 80 80") { name = "a\xe0\x80\x80"; }
  SUBCASE("overlong 4-byte F0 80 80 80") { name = "a\xf0\x80\x80\x80"; }
  SUBCASE("high surrogate U+D800") { name = "a\xed\xa0\x80"; }
  SUBCASE("low surrogate U+DFFF") { name = "a\xed\xbf\xbf"; }
  SUBCASE("U+110000") { name = "a\xf4\x90\x80\x80"; }
  SUBCASE("lead byte F5") { name = "a\xf5\x80\x80\x80"; }
  SUBCASE("lead byte F7") { name = "a\xf7\xbf\xbf\xbf"; }
  const auto shown_name = escaped(name);
  CAPTURE(shown_name);
  const auto err = refusal(name);
  CHECK(doctest::String(err.what()) == doctest::Contains("UTF-8"));
}

// U+0080..U+009F are control characters (Unicode category Cc) just like 0x00..0x1f; U+009B is CSI, which
// terminals treat like ESC '[' — exactly what the "they hide in logs and terminals" rule is about.
TEST_CASE("C1 control characters are refused like the ASCII ones") {
  std::string name;
  SUBCASE("U+0080") { name = "deploy\xc2\x80"; }
  SUBCASE("U+0085 next line") { name = "deploy\xc2\x85prod"; }
  SUBCASE("U+009B CSI") {
    name = "deploy\xc2\x9b"
           "2J";
  }
  SUBCASE("U+009F") { name = "deploy\xc2\x9f"; }
  const auto shown_name = escaped(name);
  CAPTURE(shown_name);
  const auto err = refusal(name);
  CHECK(doctest::String(err.what()) == doctest::Contains("control character"));
}

TEST_SUITE_END();
