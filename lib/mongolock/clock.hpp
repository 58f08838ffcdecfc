// The server's clock, as seen from this host. Every stored time (acquired_at, expires_at, renewed_at)
// is on the server's clock, so a host whose wall clock is off can neither steal a live lock nor keep an
// expired one.
#pragma once

#include <mongolock/duration.hpp>

#include <chrono>
#include <cstdint>
#include <string>

namespace mongolock {

// A point in time on the server's clock, UTC, millisecond resolution (BSON dates are milliseconds).
using ServerTime = std::chrono::time_point<std::chrono::system_clock, Millis>;
// The local clock all lease arithmetic runs on: CLOCK_BOOTTIME. Monotonic like std::chrono::steady_clock
// (wall-clock steps do not move it), but it also counts the time the host spends suspended, so a lease
// can never seem to have lasted through a suspend.
struct LeaseClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<LeaseClock>;
  static constexpr bool is_steady = true;
  // CLOCK_BOOTTIME, or the installed TimeSource's time (set_time_source(), below: tests only).
  static time_point now() noexcept;
  // Converts a CLOCK_MONOTONIC reading in microseconds (libmongoc's timestamps) to this clock, using the
  // current difference between the two (it changes only across a suspend).
  static time_point from_monotonic_us(std::int64_t microseconds) noexcept;
};
using LocalTime = LeaseClock::time_point;

// Where LeaseClock::now() reads the time when a source is installed: virtual time for the simulator
// (tests/sim) and tests, so that the real protocol code (Locker, LeaseBook, ServerClock) runs on a clock
// they control. Production code never installs one: LeaseClock::now() then reads CLOCK_BOOTTIME.
class TimeSource {
public:
  virtual ~TimeSource() = default;
  // The current time; must never go backwards (LeaseClock is steady).
  [[nodiscard]] virtual LocalTime now() noexcept = 0;
};

// Installs `source` as the process-wide time of LeaseClock::now() (nullptr: CLOCK_BOOTTIME again).
// Tests and the simulator only; not thread-safe against concurrent now() calls while it changes (install
// it before any thread reads the clock). `source` must outlive its installation. Returns the previous one.
TimeSource* set_time_source(TimeSource* source) noexcept;

// Maps this host's monotonic clock onto the server's wall clock. Built from one observation of the
// server's time (hello's localTime; MongoStore takes a new one from a new connection's handshake, before
// every renewal and when it is a minute old) and then advanced with LeaseClock (CLOCK_BOOTTIME), which wall-clock
// steps on this host (NTP, a wrong date) do not move. (libfaketime fakes the monotonic clock too unless
// FAKETIME_DONT_FAKE_MONOTONIC=1; the clock-skew tests set it, as a real skewed host would behave.)
class ServerClock {
public:
  // `server_time` is the localTime of a hello reply that arrived at local monotonic time `received_at`
  // after a round trip of `round_trip` (milliseconds). The server stamped it about half a round trip
  // before it arrived, so the estimate is server_time + round_trip / 2 at `received_at`, with an error of
  // at most round_trip / 2 plus the 1ms resolution of localTime.
  ServerClock(ServerTime server_time, Millis round_trip, LocalTime received_at);

  // The server's time at local monotonic time `t`.
  [[nodiscard]] ServerTime at(LocalTime t) const;
  // The local monotonic time at which the server's clock reads `t` (the inverse of at()).
  [[nodiscard]] LocalTime local_at(ServerTime t) const { return m_anchor + (t - m_server_at_anchor); }
  // The server's time now.
  [[nodiscard]] ServerTime now() const { return at(LeaseClock::now()); }

  // The bounds of the estimate: the server's clock read between earliest(t) and latest(t) at local time t
  // (at(t) -/+ round_trip / 2 + 1ms: the hello may have been stamped anywhere in its round trip). The
  // protocol writes expiries from latest(), so a lease never looks shorter to others than its holder
  // counts it, and decides takeovers (an expired lock, a dead ticket) from earliest(), so nothing is
  // taken over before its expiry on the server's clock, however asymmetric the handshake's delays were.
  [[nodiscard]] ServerTime earliest(LocalTime t) const { return at(t) - uncertainty(); }
  [[nodiscard]] ServerTime latest(LocalTime t) const { return at(t) + uncertainty(); }
  [[nodiscard]] ServerTime earliest_now() const { return earliest(LeaseClock::now()); }
  [[nodiscard]] ServerTime latest_now() const { return latest(LeaseClock::now()); }
  // Half the round trip plus localTime's 1ms resolution.
  [[nodiscard]] Millis uncertainty() const { return m_round_trip / 2 + Millis(1); }
  // How far the server's clock is ahead of this host's wall clock (negative: behind), now.
  [[nodiscard]] Millis offset_from_local_wall_clock() const;
  // The local monotonic time of the observation.
  [[nodiscard]] LocalTime anchor() const { return m_anchor; }
  // The round trip of the observation; the estimate is good to about half of it.
  [[nodiscard]] Millis round_trip() const { return m_round_trip; }

private:
  ServerTime m_server_at_anchor;
  LocalTime m_anchor;
  Millis m_round_trip;
};

// Formats a server time as ISO 8601 UTC with milliseconds: "2026-11-21T23:59:01.123Z".
[[nodiscard]] std::string format_time(ServerTime t);

} // namespace mongolock
