#include <doctest/doctest.h>

#include <mongolock/error.hpp>
#include <mongolock/log.hpp>
#include <mongolock/text.hpp>

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

using namespace mongolock;
using namespace std::string_literals;

TEST_SUITE_BEGIN("Text");

TEST_CASE("Printable text passes unchanged, UTF-8 included") {
  CHECK(printable("lock 'nightly-report' is held") == "lock 'nightly-report' is held");
  CHECK(printable("café ☕ 𝄞") == "café ☕ 𝄞");
  CHECK(printable("back\\slash") == "back\\slash");
  CHECK(printable("") == "");
}

TEST_CASE("Control characters become escapes, so a message stays one line") {
  CHECK(printable("a\tb\nc\rd") == "a\\tb\\nc\\rd");
  CHECK(printable("\x1b[31mred") == "\\x1b[31mred");
  CHECK(printable("nul\0byte"s) == "nul\\x00byte");
  CHECK(printable("del\x7f") == "del\\x7f");
  CHECK(printable("\x1e\rfoo") == "\\x1e\\rfoo");
}

TEST_CASE("C1 controls are escaped byte by byte") {
  CHECK(printable("a\xc2\x85z") == "a\\xc2\\x85z"); // U+0085 NEXT LINE
  CHECK(printable("a\xc2\x9b"
                  "31m") == "a\\xc2\\x9b31m"); // U+009B CSI
  CHECK(printable("\xc2\xa0") == "\xc2\xa0");  // U+00A0 (no-break space) is printable
}

TEST_CASE("Invalid UTF-8 is escaped byte by byte") {
  CHECK(printable("caf\xe9") == "caf\\xe9");
  CHECK(printable("\xff\xfe") == "\\xff\\xfe");
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");          // overlong '/'
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80"); // a surrogate
  CHECK(printable("cut \xe2\x98") == "cut \\xe2\\x98");  // truncated sequence
}

TEST_CASE("Every output of printable() is valid UTF-8 without control characters") {
  std::string all;
  for (int c = 0; c < 256; ++c)
    all += static_cast<char>(c);
  const auto out = printable(all);
  CHECK_NOTHROW(validate_printable_text(out, "output"));
}

TEST_CASE("printable_message redacts any URI and escapes") {
  CHECK(printable_message("not expected: mongodb://admin:S3cretPW@127.0.0.1:1\x1b[0m") ==
        "not expected: mongodb://admin:***@127.0.0.1:1\\x1b[0m");
}

TEST_CASE("validate_printable_text refuses control characters and invalid UTF-8") {
  CHECK_NOTHROW(validate_printable_text("web1:4242", "--process"));
  CHECK_NOTHROW(validate_printable_text("hôte:1", "--process"));
  CHECK_THROWS_WITH_AS(validate_printable_text("a\x1b", "--process"),
                       "--process contains control character 0x1b at byte 1; use printable characters", Error);
  CHECK_THROWS_WITH_AS(validate_printable_text("a\xc2\x85", "--process"),
                       "--process contains control character 0x85 at byte 1; use printable characters", Error);
  CHECK_THROWS_WITH_AS(validate_printable_text("caf\xe9", "--process"), "--process is not valid UTF-8 at byte 3",
                       Error);
}

TEST_SUITE_END();

TEST_CASE("quoted_list quotes each item and names how many more there are past the maximum") {
  CHECK(quoted_list({}) == "");
  CHECK(quoted_list({"a"}) == "'a'");
  CHECK(quoted_list({"a", "b", "c"}, 3) == "'a', 'b', 'c'");
  CHECK(quoted_list({"a", "b", "c", "d"}, 2) == "'a', 'b' and 2 more");
  std::vector<std::string> many(300, "x");
  CHECK(quoted_list(many).size() < 60);
}

TEST_CASE("write_decimal writes a number's digits and returns their end, without a NUL") {
  char out[24];
  for (const auto& [value, text] : {std::pair<unsigned long, std::string>{0, "0"},
                                    {7, "7"},
                                    {4242, "4242"},
                                    {18446744073709551615UL, "18446744073709551615"}}) {
    std::fill(std::begin(out), std::end(out), 'x');
    char* end = mongolock::write_decimal(out, value);
    CHECK(std::string(out, end) == text);
    CHECK(*end == 'x');
  }
}
