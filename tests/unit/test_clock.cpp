#include <doctest/doctest.h>

#include <mongolock/clock.hpp>

#include <chrono>
#include <initializer_list>

using namespace mongolock;
using namespace std::chrono_literals;
using namespace std::chrono;

namespace {

ServerTime from_millis(long long ms) { return ServerTime(Millis(ms)); }

// A fixed local monotonic instant far from the clock's epoch, so offsets either way stay representable.
const LocalTime k_anchor = LocalTime(1'000'000s);

} // namespace

TEST_SUITE_BEGIN("Clock");

TEST_CASE("The server time is estimated half a round trip after the server stamped it") {
  const auto server = from_millis(1'700'000'000'000);
  SUBCASE("no round trip") { CHECK(ServerClock(server, 0ms, k_anchor).at(k_anchor) == server); }
  SUBCASE("10ms round trip") { CHECK(ServerClock(server, 10ms, k_anchor).at(k_anchor) == server + 5ms); }
  SUBCASE("odd round trip rounds down") { CHECK(ServerClock(server, 7ms, k_anchor).at(k_anchor) == server + 3ms); }
  SUBCASE("slow link") { CHECK(ServerClock(server, 2s, k_anchor).at(k_anchor) == server + 1s); }
  SUBCASE("the round trip is kept") { CHECK(ServerClock(server, 42ms, k_anchor).round_trip() == 42ms); }
}

TEST_CASE("The server clock advances with the steady clock") {
  const auto server = from_millis(1'700'000'000'000);
  const ServerClock clock(server, 10ms, k_anchor);
  CHECK(clock.at(k_anchor + 1ms) == server + 6ms);
  CHECK(clock.at(k_anchor + 2500ms) == server + 5ms + 2500ms);
  CHECK(clock.at(k_anchor + 1h) == server + 5ms + 1h);
  CHECK(clock.at(k_anchor + 3 * 24h) == server + 5ms + 3 * 24h);
  CHECK(clock.at(k_anchor - 5ms) == server);
  CHECK(clock.at(k_anchor - 1s) == server + 5ms - 1s);
  SUBCASE("sub-millisecond steps are truncated to whole milliseconds") {
    CHECK(clock.at(k_anchor + 999us) == server + 5ms);
    CHECK(clock.at(k_anchor + 1500us) == server + 6ms);
    CHECK(clock.at(k_anchor + 1999999ns) == server + 6ms);
  }
  SUBCASE("later local times never map to earlier server times") {
    auto previous = clock.at(k_anchor - 10ms);
    for (auto t = k_anchor - 10ms; t <= k_anchor + 10ms; t += 250us) {
      const auto now = clock.at(t);
      CHECK(now >= previous);
      previous = now;
    }
  }
}

TEST_CASE("local_at is the inverse of at") {
  const auto server = from_millis(1'700'000'000'123);
  const ServerClock clock(server, 20ms, k_anchor);
  CHECK(clock.local_at(server + 10ms) == k_anchor);
  CHECK(clock.local_at(server) == k_anchor - 10ms);
  CHECK(clock.local_at(server + 10ms + 30s) == k_anchor + 30s);
  for (const Millis offset : std::initializer_list<Millis>{-1h, -1s, -1ms, 0ms, 1ms, 999ms, 20s, 1h, 24h * 30}) {
    CAPTURE(offset.count());
    CHECK(clock.local_at(clock.at(k_anchor + offset)) == k_anchor + offset);
    const auto when = server + offset;
    CHECK(clock.at(clock.local_at(when)) == when);
  }
}

TEST_CASE("now() reads the server clock at the current steady time") {
  const auto server = from_millis(1'700'000'000'000);
  const auto before = LeaseClock::now();
  const ServerClock clock(server, 0ms, before);
  const auto now = clock.now();
  const auto after = LeaseClock::now();
  CHECK(now >= server);
  CHECK(now <= clock.at(after));
  CHECK(now - server < 10s);
}

TEST_CASE("An installed TimeSource is LeaseClock's time until it is removed (the simulator's virtual time)") {
  struct Fixed final : TimeSource {
    LocalTime t = k_anchor;
    LocalTime now() noexcept override { return t; }
  } fixed;
  const auto before = LeaseClock::now();
  CHECK(set_time_source(&fixed) == nullptr);
  CHECK(LeaseClock::now() == k_anchor);
  fixed.t += 1500ms;
  CHECK(LeaseClock::now() == k_anchor + 1500ms);
  // ServerClock::now() and its bounds follow it too.
  const ServerClock clock(from_millis(1'700'000'000'000), 10ms, k_anchor);
  CHECK(clock.now() == from_millis(1'700'000'000'000) + 5ms + 1500ms);
  CHECK(clock.earliest_now() == clock.now() - 6ms);
  CHECK(set_time_source(nullptr) == &fixed);
  CHECK(LeaseClock::now() >= before); // CLOCK_BOOTTIME again
}

TEST_CASE("The offset from the local wall clock is measured against the server estimate") {
  const auto local = time_point_cast<Millis>(system_clock::now());
  SUBCASE("server five minutes ahead") {
    const ServerClock clock(local + 5min, 0ms, LeaseClock::now());
    const auto offset = clock.offset_from_local_wall_clock();
    CHECK(offset > 5min - 1s);
    CHECK(offset < 5min + 1s);
  }
  SUBCASE("server an hour behind") {
    const ServerClock clock(local - 1h, 0ms, LeaseClock::now());
    const auto offset = clock.offset_from_local_wall_clock();
    CHECK(offset > -1h - 1s);
    CHECK(offset < -1h + 1s);
  }
  SUBCASE("in step, with half the round trip added") {
    const ServerClock clock(local - 100ms, 200ms, LeaseClock::now());
    const auto offset = clock.offset_from_local_wall_clock();
    CHECK(offset > -1s);
    CHECK(offset < 1s);
  }
}

TEST_CASE("Server times format as ISO 8601 UTC with milliseconds") {
  CHECK(format_time(from_millis(0)) == "1970-01-01T00:00:00.000Z");
  CHECK(format_time(from_millis(1234)) == "1970-01-01T00:00:01.234Z");
  CHECK(format_time(from_millis(1)) == "1970-01-01T00:00:00.001Z");
  CHECK(format_time(from_millis(999)) == "1970-01-01T00:00:00.999Z");
  CHECK(format_time(from_millis(86'399'999)) == "1970-01-01T23:59:59.999Z");
  CHECK(format_time(from_millis(86'400'000)) == "1970-01-02T00:00:00.000Z");
  CHECK(format_time(from_millis(951'782'400'000)) == "2000-02-29T00:00:00.000Z");
  CHECK(format_time(from_millis(1'700'000'000'123)) == "2023-11-14T22:13:20.123Z");
  CHECK(format_time(from_millis(2'147'483'648'000)) == "2038-01-19T03:14:08.000Z"); // past 32-bit time_t
  CHECK(format_time(from_millis(4'102'444'800'000)) == "2100-01-01T00:00:00.000Z");
}

TEST_CASE("Formatted times agree with the calendar") {
  const auto t = ServerTime(sys_days(2026y / November / 21) + 23h + 59min + 1s + 123ms);
  CHECK(format_time(t) == "2026-11-21T23:59:01.123Z");
  const auto leap = ServerTime(sys_days(2024y / February / 29) + 12h + 5ms);
  CHECK(format_time(leap) == "2024-02-29T12:00:00.005Z");
  CHECK(format_time(ServerTime(sys_days(2024y / December / 31) + 24h - 1ms)) == "2024-12-31T23:59:59.999Z");
}

TEST_CASE("Times before 1970 format with the milliseconds counted forward") {
  CHECK(format_time(from_millis(-1)) == "1969-12-31T23:59:59.999Z");
  CHECK(format_time(from_millis(-1000)) == "1969-12-31T23:59:59.000Z");
  CHECK(format_time(from_millis(-1001)) == "1969-12-31T23:59:58.999Z");
}

TEST_SUITE_END();

TEST_CASE("ServerClock bounds: the server read between earliest() and latest(), half a round trip either way") {
  const auto received = LeaseClock::now();
  const ServerTime stamped{std::chrono::milliseconds(1'000'000)};
  const ServerClock clock(stamped, std::chrono::milliseconds(4000), received);
  // The hello was stamped anywhere in its 4 s round trip: at `received` the server read between the
  // stamp and the stamp + 4 s.
  CHECK(clock.earliest(received) <= stamped);
  CHECK(clock.latest(received) >= stamped + std::chrono::milliseconds(4000));
  CHECK(clock.latest(received) - clock.earliest(received) <= std::chrono::milliseconds(4002));
  CHECK(clock.at(received) - clock.earliest(received) == clock.uncertainty());
}
