#include <doctest/doctest.h>

#include <mongolock/duration.hpp>
#include <mongolock/error.hpp>

#include <chrono>
#include <climits>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

using namespace mongolock;
using namespace std::chrono_literals;

namespace {

// The Error parse_duration throws for `text` (as the value of "--ttl"), or nothing when it accepts it.
std::optional<Error> duration_error(std::string_view text) {
  try {
    (void)parse_duration(text, "--ttl");
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

} // namespace

TEST_SUITE_BEGIN("Duration");

TEST_CASE("Single-unit durations parse to milliseconds") {
  CHECK(parse_duration("1ms", "--ttl") == 1ms);
  CHECK(parse_duration("500ms", "--ttl") == 500ms);
  CHECK(parse_duration("30s", "--ttl") == 30s);
  CHECK(parse_duration("10m", "--ttl") == 10min);
  CHECK(parse_duration("1h", "--ttl") == 1h);
  CHECK(parse_duration("2d", "--ttl") == 48h);
  CHECK(parse_duration("90s", "--ttl") == 90'000ms);
}

TEST_CASE("Compound durations add their parts") {
  CHECK(parse_duration("1h30m", "--ttl") == 90min);
  CHECK(parse_duration("1m30s", "--ttl") == 90s);
  CHECK(parse_duration("1d2h3m4s5ms", "--ttl") == 24h + 2h + 3min + 4s + 5ms);
  CHECK(parse_duration("4m05s", "--ttl") == 245s);
}

TEST_CASE("Fractional numbers are scaled by their unit") {
  CHECK(parse_duration("1.5s", "--ttl") == 1500ms);
  CHECK(parse_duration("2.5s", "--ttl") == 2500ms);
  CHECK(parse_duration("0.5m", "--ttl") == 30s);
  CHECK(parse_duration("1.1s", "--ttl") == 1100ms);
  CHECK(parse_duration("0.001s", "--ttl") == 1ms);
  CHECK(parse_duration("1.5h", "--ttl") == 90min);
}

TEST_CASE("Under one millisecond is refused before rounding (issue 29: 0.5ms was taken as 1ms)") {
  for (const auto* text : {"0.5ms", "0.9ms", "0.0005s", "0.99ms"}) {
    const auto err = duration_error(text);
    REQUIRE_MESSAGE(err, text);
    CHECK(err->exit_code() == k_exit_usage);
    CHECK(doctest::String(err->what()) == doctest::Contains("at least 1ms"));
  }
  CHECK(parse_duration("1ms", "--ttl") == 1ms);
  CHECK(parse_duration("1.4ms", "--ttl") == 1ms);
}

TEST_CASE("A duration for the driver is bounded below its int32 milliseconds (issue 29: 25d aborted)") {
  CHECK(k_max_driver_duration.count() < INT32_MAX);
  CHECK(parse_duration_at_most("24d", "--connect-timeout", k_max_driver_duration, "the driver") == 24 * 24h);
  for (const auto* text : {"24d1ms", "25d", "365d"}) {
    try {
      (void)parse_duration_at_most(text, "--connect-timeout", k_max_driver_duration, "the driver");
      FAIL("accepted " << text);
    } catch (const Error& e) {
      CHECK(e.exit_code() == k_exit_usage);
      CHECK(doctest::String(e.what()) == doctest::Contains("--connect-timeout"));
      CHECK(doctest::String(e.what()) == doctest::Contains("at most 24d"));
    }
  }
}

TEST_CASE("The longest accepted duration is 365 days") {
  CHECK(parse_duration("365d", "--ttl") == 24h * 365);
  CHECK(parse_duration("8760h", "--ttl") == 24h * 365);
  CHECK(parse_duration("364d23h59m59s999ms", "--ttl") == 24h * 365 - 1ms);

  SUBCASE("one millisecond more is refused") {
    const auto err = duration_error("365d1ms");
    REQUIRE(err);
    CHECK(err->exit_code() == k_exit_usage);
    CHECK(doctest::String(err->what()) == doctest::Contains("365 days"));
  }
  SUBCASE("366 days are refused") {
    CHECK_THROWS_AS((void)parse_duration("366d", "--ttl"), Error);
    const auto err = duration_error("366d");
    REQUIRE(err);
    CHECK(err->exit_code() == k_exit_usage);
    CHECK(doctest::String(err->what()) == doctest::Contains("--ttl"));
    CHECK(doctest::String(err->what()) == doctest::Contains("365 days"));
  }
  SUBCASE("a huge number is refused, not wrapped around") {
    const auto err = duration_error("99999999999999999999999999ms");
    REQUIRE(err);
    CHECK(err->exit_code() == k_exit_usage);
  }
}

TEST_CASE("Zero and negative durations are refused") {
  std::string text;
  SUBCASE("0s") { text = "0s"; }
  SUBCASE("0ms") { text = "0ms"; }
  SUBCASE("0h0m") { text = "0h0m"; }
  SUBCASE("less than half a millisecond rounds to zero") { text = "0.4ms"; }
  SUBCASE("-5s") { text = "-5s"; }
  SUBCASE("-1ms") { text = "-1ms"; }
  SUBCASE("negative second part") { text = "1h-5m"; }
  CAPTURE(text);
  CHECK_THROWS_AS((void)parse_duration(text, "--ttl"), Error);
  const auto err = duration_error(text);
  REQUIRE(err);
  CHECK(err->exit_code() == k_exit_usage);
  CHECK(doctest::String(err->what()) == doctest::Contains("--ttl"));
}

TEST_CASE("A negative duration is refused as not positive") {
  const auto err = duration_error("-5s");
  REQUIRE(err);
  CHECK(doctest::String(err->what()) == doctest::Contains("positive"));
}

TEST_CASE("A bare number is refused instead of guessing the unit") {
  std::string text;
  SUBCASE("10") { text = "10"; }
  SUBCASE("1.5") { text = "1.5"; }
  SUBCASE("1h30") { text = "1h30"; }
  CAPTURE(text);
  const auto err = duration_error(text);
  REQUIRE(err);
  CHECK(err->exit_code() == k_exit_usage);
  CHECK(doctest::String(err->what()) == doctest::Contains("--ttl"));
  CHECK(doctest::String(err->what()) == doctest::Contains("unit"));
}

TEST_CASE("Unknown units are refused and named") {
  std::string text;
  std::string unit;
  SUBCASE("x") {
    text = "5x";
    unit = "'x'";
  }
  SUBCASE("sec") {
    text = "5sec";
    unit = "'sec'";
  }
  SUBCASE("min") {
    text = "10min";
    unit = "'min'";
  }
  SUBCASE("us") {
    text = "100us";
    unit = "'us'";
  }
  SUBCASE("w") {
    text = "1w";
    unit = "'w'";
  }
  SUBCASE("exponent") {
    text = "1e3s";
    unit = "'e'";
  }
  CAPTURE(text);
  const auto err = duration_error(text);
  REQUIRE(err);
  CHECK(err->exit_code() == k_exit_usage);
  CHECK(doctest::String(err->what()) == doctest::Contains("--ttl"));
  CHECK(doctest::String(err->what()) == doctest::Contains(unit.c_str()));
}

TEST_CASE("Malformed durations are refused with the option named") {
  std::string text;
  SUBCASE("empty") { text = ""; }
  SUBCASE("unit only") { text = "s"; }
  SUBCASE("trailing garbage") { text = "10s!"; }
  SUBCASE("trailing space") { text = "10s "; }
  SUBCASE("leading space") { text = " 10s"; }
  SUBCASE("space before the unit") { text = "10 s"; }
  SUBCASE("upper-case unit") { text = "10S"; }
  SUBCASE("two decimal points") { text = "1.2.3s"; }
  SUBCASE("a lone point") { text = ".s"; }
  SUBCASE("plus sign") { text = "+5s"; }
  SUBCASE("number after the last unit") { text = "5s3"; }
  CAPTURE(text);
  CHECK_THROWS_AS((void)parse_duration(text, "--ttl"), Error);
  const auto err = duration_error(text);
  REQUIRE(err);
  CHECK(err->exit_code() == k_exit_usage);
  CHECK(doctest::String(err->what()) == doctest::Contains("--ttl"));
}

TEST_CASE("The error names whichever option the duration came from") {
  try {
    (void)parse_duration("soon", "--kill-grace");
    FAIL("parse_duration accepted 'soon'");
  } catch (const Error& e) {
    CHECK(e.exit_code() == k_exit_usage);
    CHECK(doctest::String(e.what()) == doctest::Contains("--kill-grace"));
    CHECK(doctest::String(e.what()) == doctest::Contains("'soon'"));
    CHECK(doctest::String(e.what()) != doctest::Contains("--ttl"));
  }
}

TEST_CASE("Formatting shows milliseconds below one second") {
  CHECK(format_duration(0ms) == "0ms");
  CHECK(format_duration(1ms) == "1ms");
  CHECK(format_duration(850ms) == "850ms");
  CHECK(format_duration(999ms) == "999ms");
}

TEST_CASE("Formatting shows tenths of a second below ten seconds, rounded down") {
  CHECK(format_duration(1000ms) == "1s");
  CHECK(format_duration(1500ms) == "1.5s");
  CHECK(format_duration(2500ms) == "2.5s");
  CHECK(format_duration(2599ms) == "2.5s");
  CHECK(format_duration(9900ms) == "9.9s");
  CHECK(format_duration(9999ms) == "9.9s");
  CHECK(format_duration(9000ms) == "9s");
}

TEST_CASE("Formatting shows whole seconds from ten seconds to a minute") {
  CHECK(format_duration(10s) == "10s");
  CHECK(format_duration(10'500ms) == "10s");
  CHECK(format_duration(12s) == "12s");
  CHECK(format_duration(59'999ms) == "59s");
}

TEST_CASE("Formatting shows minutes with zero-padded seconds") {
  CHECK(format_duration(60s) == "1m");
  CHECK(format_duration(245s) == "4m05s");
  CHECK(format_duration(10min) == "10m");
  CHECK(format_duration(10min + 30s) == "10m30s");
  CHECK(format_duration(59min + 59s + 999ms) == "59m59s");
}

TEST_CASE("Formatting shows hours with zero-padded minutes") {
  CHECK(format_duration(1h) == "1h");
  CHECK(format_duration(1h + 2min) == "1h02m");
  CHECK(format_duration(1h + 2min + 59s) == "1h02m");
  CHECK(format_duration(1h + 30min) == "1h30m");
  CHECK(format_duration(23h + 59min + 59s) == "23h59m");
}

TEST_CASE("Formatting shows days with zero-padded hours") {
  CHECK(format_duration(24h) == "1d");
  CHECK(format_duration(48h) == "2d");
  CHECK(format_duration(3 * 24h + 4h) == "3d04h");
  CHECK(format_duration(24h + 1h + 59min) == "1d01h");
  CHECK(format_duration(24h * 365) == "365d");
}

TEST_CASE("Formatting puts a minus sign before negative durations") {
  CHECK(format_duration(-1ms) == "-1ms");
  CHECK(format_duration(-850ms) == "-850ms");
  CHECK(format_duration(-1500ms) == "-1.5s");
  CHECK(format_duration(-245s) == "-4m05s");
  CHECK(format_duration(-(1h + 2min)) == "-1h02m");
  CHECK(format_duration(-(3 * 24h + 4h)) == "-3d04h");
}

TEST_CASE("Formatted durations parse back to the shown value") {
  for (const Millis d :
       std::initializer_list<Millis>{1ms, 850ms, 1500ms, 12s, 245s, 10min, 1h + 2min, 3 * 24h + 4h, 24h * 365}) {
    const auto text = format_duration(d);
    CAPTURE(text);
    CHECK(parse_duration(text, "--ttl") == d);
  }
}

TEST_SUITE_END();
