#include <mongolock/clock.hpp>

#include <fmt/chrono.h>

#include <atomic>
#include <ctime>

namespace mongolock {

namespace {

LeaseClock::duration read_clock(clockid_t id) noexcept {
  timespec ts{};
  clock_gettime(id, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

std::atomic<TimeSource*> g_time_source{nullptr}; // set by tests only (set_time_source())

} // namespace

TimeSource* set_time_source(TimeSource* source) noexcept { return g_time_source.exchange(source); }

LeaseClock::time_point LeaseClock::now() noexcept {
  if (auto* source = g_time_source.load(std::memory_order_relaxed); source != nullptr) return source->now();
  return time_point(read_clock(CLOCK_BOOTTIME));
}

LeaseClock::time_point LeaseClock::from_monotonic_us(std::int64_t microseconds) noexcept {
  const auto boot = read_clock(CLOCK_BOOTTIME);
  const auto monotonic = read_clock(CLOCK_MONOTONIC);
  return time_point(std::chrono::microseconds(microseconds) + (boot - monotonic));
}

ServerClock::ServerClock(ServerTime server_time, Millis round_trip, LocalTime received_at)
    : m_server_at_anchor(server_time + round_trip / 2), m_anchor(received_at), m_round_trip(round_trip) {}

ServerTime ServerClock::at(LocalTime t) const {
  return m_server_at_anchor + std::chrono::duration_cast<Millis>(t - m_anchor);
}

Millis ServerClock::offset_from_local_wall_clock() const {
  const auto local = LeaseClock::now();
  const auto wall = std::chrono::time_point_cast<Millis>(std::chrono::system_clock::now());
  return at(local) - wall;
}

std::string format_time(ServerTime t) {
  const auto seconds = std::chrono::floor<std::chrono::seconds>(t);
  const auto millis = (t - seconds).count();
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", seconds, millis);
}

} // namespace mongolock
