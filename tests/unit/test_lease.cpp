#include <doctest/doctest.h>

#include <mongolock/duration.hpp>
#include <mongolock/error.hpp>
#include <mongolock/lease.hpp>

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using namespace mongolock;
using namespace std::chrono_literals;

namespace {

// The Error make_lease_timing throws, or nothing when it accepts the values.
std::optional<Error> timing_error(Millis ttl, std::optional<Millis> kill_grace = std::nullopt,
                                  std::optional<Millis> renew_interval = std::nullopt,
                                  std::optional<Millis> renew_deadline = std::nullopt) {
  try {
    (void)make_lease_timing(ttl, kill_grace, renew_interval, renew_deadline);
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// The text after `marker` in `message` up to the next space, comma or semicolon (or the end).
std::string value_after(const std::string& message, const std::string& marker) {
  const auto at = message.find(marker);
  if (at == std::string::npos) return "";
  const auto begin = at + marker.size();
  const auto end = message.find_first_of(" ,;", begin);
  return message.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// The longest kill grace the lease invariant allows for `ttl`.
Millis room_for_grace(const LeaseTiming& t) { return t.ttl - t.renew_deadline - lease_safety_margin(t.ttl); }

} // namespace

TEST_SUITE_BEGIN("Lease");

TEST_CASE("The default run ttl of 30s renews every 10s, gives up after 20s and allows 5s to stop") {
  REQUIRE(k_default_run_ttl == 30s);
  const auto t = make_lease_timing(30s);
  CHECK(t.ttl == 30s);
  CHECK(t.renew_interval == 10s);
  CHECK(t.renew_deadline == 20s);
  CHECK(t.kill_grace == 5s);
  CHECK(t.kill_grace == k_default_kill_grace);
  CHECK(lease_safety_margin(30s) == 3s);
  CHECK(t.renew_deadline + t.kill_grace + lease_safety_margin(t.ttl) <= t.ttl);
}

TEST_CASE("The safety margin is a tenth of the ttl but at least 200ms") {
  CHECK(lease_safety_margin(1s) == 200ms);
  CHECK(lease_safety_margin(2s) == 200ms);
  CHECK(lease_safety_margin(2001ms) == 200ms);
  CHECK(lease_safety_margin(2010ms) == 201ms);
  CHECK(lease_safety_margin(2500ms) == 250ms);
  CHECK(lease_safety_margin(30s) == 3s);
  CHECK(lease_safety_margin(1h) == 6min);
}

TEST_CASE("Short ttls shrink the default kill grace to what the margin leaves") {
  SUBCASE("1s") {
    const auto t = make_lease_timing(1s);
    CHECK(t.renew_interval == 333ms);
    CHECK(t.renew_deadline == 666ms);
    CHECK(t.kill_grace == 134ms);
  }
  SUBCASE("10s") {
    const auto t = make_lease_timing(10s);
    CHECK(t.renew_interval == 3333ms);
    CHECK(t.renew_deadline == 6666ms);
    CHECK(t.kill_grace == 2334ms);
  }
  SUBCASE("around the ttl where the room reaches 5s") {
    // room = ttl - 2/3 ttl - ttl/10, about 7/30 ttl: 4.9s at 21s, 5.13s at 22s.
    CHECK(make_lease_timing(21s).kill_grace == 4900ms);
    CHECK(make_lease_timing(22s).kill_grace == 5s);
  }
  SUBCASE("long ttls keep the 5s default") {
    CHECK(make_lease_timing(1min).kill_grace == 5s);
    CHECK(make_lease_timing(1h).kill_grace == 5s);
  }
}

TEST_CASE("The lease invariant holds for every ttl from 1s to 1h") {
  std::vector<Millis> ttls;
  for (Millis ttl = 1000ms; ttl <= 30s; ttl += 1ms)
    ttls.push_back(ttl);
  for (Millis ttl = 30s; ttl <= 1h; ttl += 997ms)
    ttls.push_back(ttl);
  ttls.push_back(1h);
  ttls.push_back(k_default_acquire_ttl);

  std::size_t failures = 0;
  for (const auto ttl : ttls) {
    const auto t = make_lease_timing(ttl);
    const bool ok = t.ttl == ttl && t.renew_interval == ttl / 3 && t.renew_deadline == ttl * 2 / 3 &&
                    t.renew_interval < t.renew_deadline && t.kill_grace > 0ms && t.kill_grace <= k_default_kill_grace &&
                    t.renew_deadline + t.kill_grace + lease_safety_margin(ttl) <= ttl &&
                    lease_safety_margin(ttl) >= 200ms && lease_safety_margin(ttl) >= ttl / 10;
    if (!ok) {
      ++failures;
      CAPTURE(ttl.count());
      CAPTURE(t.renew_interval.count());
      CAPTURE(t.renew_deadline.count());
      CAPTURE(t.kill_grace.count());
      CHECK(ok);
      if (failures > 10) break;
    }
  }
  CHECK(failures == 0);
  CHECK(ttls.size() > 30'000);
}

TEST_CASE("An explicit kill grace is accepted up to exactly what the invariant allows") {
  for (const Millis ttl : std::initializer_list<Millis>{1000ms, 1001ms, 2s, 3s, 10s, 21s, 30s, 45'678ms, 10min, 1h}) {
    CAPTURE(ttl.count());
    const auto room = room_for_grace(make_lease_timing(ttl));
    REQUIRE(room > 0ms);
    const auto fits = make_lease_timing(ttl, room);
    CHECK(fits.kill_grace == room);
    CHECK(fits.renew_deadline + fits.kill_grace + lease_safety_margin(ttl) == ttl);
    const auto err = timing_error(ttl, room + 1ms);
    REQUIRE(err);
    CHECK(err->exit_code() == k_exit_usage);
  }
}

TEST_CASE("A shorter explicit kill grace is kept as given") {
  CHECK(make_lease_timing(30s, 1s).kill_grace == 1s);
  CHECK(make_lease_timing(30s, 1ms).kill_grace == 1ms);
  CHECK(make_lease_timing(30s, 7s).kill_grace == 7s);
  CHECK(make_lease_timing(1min, 10s).kill_grace == 10s);
  CHECK(make_lease_timing(1h, 10min).kill_grace == 10min);
  const auto t = make_lease_timing(30s, 2s);
  CHECK(t.renew_interval == 10s);
  CHECK(t.renew_deadline == 20s);
}

TEST_CASE("A ttl below 1s is refused") {
  REQUIRE(k_min_ttl == 1s);
  for (const Millis ttl : std::initializer_list<Millis>{999ms, 500ms, 1ms, 0ms, -1ms, -30s}) {
    CAPTURE(ttl.count());
    CHECK_THROWS_AS(validate_ttl(ttl), Error);
    try {
      validate_ttl(ttl);
    } catch (const Error& e) {
      CHECK(e.exit_code() == k_exit_usage);
      CHECK(doctest::String(e.what()) == doctest::Contains("--ttl"));
      CHECK(doctest::String(e.what()) == doctest::Contains("1s"));
    }
    const auto err = timing_error(ttl);
    REQUIRE(err);
    CHECK(err->exit_code() == k_exit_usage);
    CHECK(doctest::String(err->what()) == doctest::Contains("--ttl"));
    CHECK(timing_error(ttl, 1ms));
  }
  CHECK_NOTHROW(validate_ttl(1s));
  CHECK_NOTHROW(validate_ttl(k_default_acquire_ttl));
  CHECK_NOTHROW(validate_ttl(24h * 365));
}

TEST_CASE("A kill grace too long for the ttl is refused with both options named") {
  const auto err = timing_error(30s, 8s);
  REQUIRE(err);
  CHECK(err->exit_code() == k_exit_usage);
  const doctest::String message = err->what();
  CHECK(message == doctest::Contains("--kill-grace 8s"));
  CHECK(message == doctest::Contains("--ttl 30s"));
  CHECK(message == doctest::Contains("--kill-grace 7s or less"));
  CHECK(message == doctest::Contains("--ttl of at least"));

  CHECK(timing_error(10s, 5s));
  CHECK(timing_error(1s, 135ms));
  CHECK_FALSE(timing_error(1s, 134ms));
}

TEST_CASE("The kill grace suggested in the refusal works with the ttl given") {
  for (const auto& [ttl, grace] : std::vector<std::pair<Millis, Millis>>{
           {1s, 1s}, {10s, 5s}, {30s, 8s}, {30s, 1min}, {2min, 1min}, {1h, 30min}, {2h, 1h}, {3 * 24h, 2 * 24h}}) {
    CAPTURE(ttl.count());
    CAPTURE(grace.count());
    const auto err = timing_error(ttl, grace);
    REQUIRE(err);
    const std::string message = err->what();
    CAPTURE(message);
    const auto suggested = value_after(message, "use --kill-grace ");
    CAPTURE(suggested);
    REQUIRE_FALSE(suggested.empty());
    const auto suggested_grace = parse_duration(suggested, "--kill-grace");
    CHECK(suggested_grace < grace);
    CHECK_FALSE(timing_error(ttl, suggested_grace));
  }
}

// The suggested ttl is printed with format_duration, which shows minutes from 1h and hours from 1d: the
// suggestion must be rounded up to what is shown (15m needs 3858s: "1h05m", not "1h04m").
TEST_CASE("The ttl suggested in the refusal accepts the kill grace given") {
  for (const Millis grace : std::initializer_list<Millis>{135ms, 1s, 5s, 6s, 7001ms, 8s, 10s, 12'345ms, 30s, 1min, 2min,
                                                          10min, 14min, 15min, 30min, 1h, 2h, 24h}) {
    CAPTURE(grace.count());
    const auto err = timing_error(1s, grace);
    REQUIRE(err);
    CHECK(err->exit_code() == k_exit_usage);
    const std::string message = err->what();
    CAPTURE(message);
    const auto suggested = value_after(message, "--ttl of at least ");
    CAPTURE(suggested);
    REQUIRE_FALSE(suggested.empty());
    const auto suggested_ttl = parse_duration(suggested, "--ttl");
    const auto retry = timing_error(suggested_ttl, grace);
    CHECK_MESSAGE(!retry.has_value(),
                  "--ttl " << suggested << " refused: " << (retry ? std::string(retry->what()) : std::string()));
    // "At least" should be close to the least: 30/7 of the grace (and 2s), rounded up to the unit shown
    // (0.1s below 10s, 1s below 1h, 1min below 1d, 1h above).
    const Millis shown_unit = suggested_ttl >= 24h ? Millis(1h) : suggested_ttl >= 1h ? Millis(1min) : Millis(1s);
    CHECK(suggested_ttl <= std::max(Millis(2s), Millis(grace.count() * 30 / 7)) + shown_unit);
  }
}

TEST_CASE("An explicit renew interval and deadline are kept") {
  const auto t = make_lease_timing(1min, std::nullopt, 5s, 30s);
  CHECK(t.ttl == 1min);
  CHECK(t.renew_interval == 5s);
  CHECK(t.renew_deadline == 30s);
  CHECK(t.kill_grace == 5s);

  SUBCASE("only the interval") {
    const auto u = make_lease_timing(30s, std::nullopt, 2s);
    CHECK(u.renew_interval == 2s);
    CHECK(u.renew_deadline == 20s);
    CHECK(u.kill_grace == 5s);
  }
  SUBCASE("only the deadline, shrinking the default kill grace") {
    const auto u = make_lease_timing(30s, std::nullopt, std::nullopt, 25s);
    CHECK(u.renew_interval == 10s);
    CHECK(u.renew_deadline == 25s);
    CHECK(u.kill_grace == 2s); // 30s - 25s - 3s margin
  }
  SUBCASE("a shorter deadline leaves room for a longer kill grace") {
    const auto u = make_lease_timing(30s, 15s, 2s, 12s);
    CHECK(u.kill_grace == 15s);
    CHECK(u.renew_deadline + u.kill_grace + lease_safety_margin(u.ttl) == u.ttl);
  }
}

TEST_CASE("A renew interval not shorter than the deadline is refused") {
  std::optional<Millis> interval;
  std::optional<Millis> deadline;
  SUBCASE("equal") {
    interval = 10s;
    deadline = 10s;
  }
  SUBCASE("longer") {
    interval = 15s;
    deadline = 10s;
  }
  SUBCASE("explicit interval at the default deadline") { interval = 20s; }
  SUBCASE("explicit deadline at the default interval") { deadline = 10s; }
  SUBCASE("explicit deadline below the default interval") { deadline = 5s; }
  const auto err = timing_error(30s, std::nullopt, interval, deadline);
  REQUIRE(err);
  CHECK(err->exit_code() == k_exit_usage);
  CHECK(doctest::String(err->what()) == doctest::Contains("--renew-interval"));
  CHECK(doctest::String(err->what()) == doctest::Contains("--renew-deadline"));
  CHECK_FALSE(timing_error(30s, std::nullopt, 1ms, 2ms));
}

TEST_CASE("A renew deadline that leaves no time to stop the command is refused") {
  // ttl 30s, margin 3s: the deadline must stay below 27s.
  CHECK(make_lease_timing(30s, std::nullopt, std::nullopt, 26'999ms).kill_grace == 1ms);
  for (const Millis deadline : std::initializer_list<Millis>{27s, 28s, 30s, 31s, 1h}) {
    CAPTURE(deadline.count());
    const auto err = timing_error(30s, std::nullopt, std::nullopt, deadline);
    REQUIRE(err);
    CHECK(err->exit_code() == k_exit_usage);
    const std::string message = err->what();
    CAPTURE(message);
    CHECK(doctest::String(message.c_str()) == doctest::Contains("--renew-deadline"));
    CHECK(doctest::String(message.c_str()) == doctest::Contains("--ttl 30s"));
    const auto below = value_after(message, "keep it below ");
    REQUIRE_FALSE(below.empty());
    const auto limit = parse_duration(below, "--renew-deadline");
    CHECK(limit == 27s);
    CHECK_FALSE(timing_error(30s, std::nullopt, std::nullopt, limit - 1ms));
  }
}

TEST_CASE("The lease invariant holds for every accepted renew deadline and kill grace") {
  std::size_t accepted = 0;
  std::size_t refused = 0;
  for (const Millis ttl : std::initializer_list<Millis>{1s, 1500ms, 2s, 5s, 10s, 30s, 1min, 10min, 1h}) {
    for (Millis deadline = ttl / 20; deadline <= ttl + ttl / 10; deadline += ttl / 20) {
      for (const std::optional<Millis> grace :
           {std::optional<Millis>(), std::optional<Millis>(1ms), std::optional<Millis>(ttl / 10),
            std::optional<Millis>(ttl / 3), std::optional<Millis>(5s)}) {
        try {
          const auto t = make_lease_timing(ttl, grace, deadline / 2, deadline);
          ++accepted;
          const bool ok = t.renew_deadline == deadline && t.renew_interval < t.renew_deadline && t.kill_grace > 0ms &&
                          t.renew_deadline + t.kill_grace + lease_safety_margin(ttl) <= ttl;
          if (!ok) {
            CAPTURE(ttl.count());
            CAPTURE(deadline.count());
            CAPTURE(t.kill_grace.count());
            CHECK(ok);
          }
        } catch (const Error& e) {
          ++refused;
          CHECK(e.exit_code() == k_exit_usage);
        }
      }
    }
  }
  CHECK(accepted > 100);
  CHECK(refused > 100);
}

// With --renew-deadline fixed, the "--ttl of at least X" suggestion must account for that deadline, not the
// default 2/3 ttl, or the suggested ttl would be refused again.
TEST_CASE("The ttl suggested for a kill grace works with the renew deadline given") {
  const Millis deadline = 25s;
  const Millis grace = 5s;
  const auto err = timing_error(30s, grace, std::nullopt, deadline);
  REQUIRE(err);
  const std::string message = err->what();
  CAPTURE(message);
  const auto suggested = value_after(message, "--ttl of at least ");
  REQUIRE_FALSE(suggested.empty());
  const auto suggested_ttl = parse_duration(suggested, "--ttl");
  const auto retry = timing_error(suggested_ttl, grace, std::nullopt, deadline);
  CHECK_MESSAGE(!retry.has_value(),
                "--ttl " << suggested << " refused: " << (retry ? std::string(retry->what()) : std::string()));

  SUBCASE("the kill grace suggested does work") {
    const auto suggested_grace = parse_duration(value_after(message, "use --kill-grace "), "--kill-grace");
    CHECK(suggested_grace == 2s);
    CHECK_FALSE(timing_error(30s, suggested_grace, std::nullopt, deadline));
  }
}

TEST_SUITE_END();
