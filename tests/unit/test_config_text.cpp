#include <doctest/doctest.h>

#include <mongolock/config_text.hpp>
#include <mongolock/error.hpp>

#include <string>

using namespace mongolock;
using namespace std::string_literals;

TEST_SUITE_BEGIN("ConfigText");

TEST_CASE("Key lines are listed with their line number and section") {
  const auto lines = scan_config_text("# comment\n"
                                      "uri-file = \"/etc/mongolock.uri\"\n"
                                      "\n"
                                      "  ; another comment\n"
                                      "[run]\n"
                                      "on-lost = kill # trailing comment\n"
                                      "verbose\r\n"
                                      "[[acquire]]\n"
                                      "ttl=1h",
                                      "f.conf");
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].number == 2);
  CHECK(lines[0].section == "");
  CHECK(lines[0].key == "uri-file");
  CHECK(lines[1].number == 6);
  CHECK(lines[1].section == "run");
  CHECK(lines[1].key == "on-lost");
  CHECK(lines[2].number == 7);
  CHECK(lines[2].key == "verbose");
  CHECK(lines[3].number == 9);
  CHECK(lines[3].section == "acquire");
  CHECK(lines[3].key == "ttl");
}

TEST_CASE("What CLI11 would skip or misread is refused with file and line") {
  CHECK_THROWS_WITH_AS(scan_config_text("db = x\nab\n", "f"),
                       "f:2: 'ab' is not a 'key = value' line, a section or a comment", Error);
  CHECK_THROWS_WITH_AS(scan_config_text("ttl = [1s,\n2s]\n", "f"), "f:1: 'ttl' is set to a list; no option takes one",
                       Error);
  CHECK_THROWS_WITH_AS(scan_config_text("db = \"a\x1b[31m\"\n", "f"),
                       "f:1: control character 0x1b at column 8; a config file is text", Error);
  CHECK_THROWS_WITH_AS(scan_config_text("\n\ndb = caf\xe9\n", "f"),
                       "f:3: byte 0xe9 at column 9 is not valid UTF-8; a config file is text", Error);
  CHECK_THROWS_WITH_AS(scan_config_text("db = a\rb\n", "f"),
                       "f:1: control character 0x0d at column 7; a config file is text", Error);
  CHECK_THROWS_WITH_AS(scan_config_text("db = a\0b\n"s, "f"),
                       "f:1: control character 0x00 at column 7; a config file is text", Error);
}

TEST_CASE("Tabs, CRLF line ends and UTF-8 are text") {
  const auto lines = scan_config_text("\tdb\t=\t\"caf\xc3\xa9\"\r\ncollection = x\r\n", "f");
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].key == "db");
  CHECK(lines[1].number == 2);
}

TEST_CASE("closest_word suggests a likely typo, nothing far off") {
  const std::vector<std::string> keys{"ttl", "wait", "min-hold", "fence", "slots", "process"};
  CHECK(closest_word("tll", keys) == "ttl");
  CHECK(closest_word("ttll", keys) == "ttl");
  CHECK(closest_word("min_hold", keys) == "min-hold");
  CHECK(closest_word("slot", keys) == "slots");
  CHECK(closest_word("procses", keys) == "process");
  CHECK(closest_word("colour", keys) == "");
  CHECK(closest_word("x", keys) == "");
  CHECK(closest_word("", keys) == "");
  CHECK(closest_word(std::string(1000, 't'), keys) == "");
}

TEST_SUITE_END();
