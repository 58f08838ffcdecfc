#include <mongolock/clock.hpp>

#include <fmt/chrono.h>

namespace mongolock {

ServerClock::ServerClock(ServerTime server_time, Millis round_trip, SteadyTime received_at)
    : m_server_at_anchor(server_time + round_trip / 2), m_anchor(received_at), m_round_trip(round_trip) {}

ServerTime ServerClock::at(SteadyTime t) const {
  return m_server_at_anchor + std::chrono::duration_cast<Millis>(t - m_anchor);
}

Millis ServerClock::offset_from_local_wall_clock() const {
  const auto steady = std::chrono::steady_clock::now();
  const auto wall = std::chrono::time_point_cast<Millis>(std::chrono::system_clock::now());
  return at(steady) - wall;
}

std::string format_time(ServerTime t) {
  const auto seconds = std::chrono::floor<std::chrono::seconds>(t);
  const auto millis = (t - seconds).count();
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", seconds, millis);
}

} // namespace mongolock
