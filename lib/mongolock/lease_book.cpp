#include <mongolock/lease_book.hpp>

#include <algorithm>

namespace mongolock {

LeaseBook::LeaseBook(const std::vector<LocalTime>& sent, const LeaseTiming& timing) : m_timing(timing) {
  for (const auto t : sent)
    m_locks.push_back(Lock{t, std::nullopt, Millis(0), std::nullopt});
}

LeaseBook::State LeaseBook::state(std::size_t i) const {
  const auto& lock = m_locks[i];
  if (!lock.pinned) return State::held;
  return lock.clear_after ? State::clearing : State::pinned;
}

LocalTime LeaseBook::basis(std::size_t i) const {
  const auto& lock = m_locks[i];
  return lock.pinned ? std::min(*lock.pinned, lock.confirmed) : lock.confirmed;
}

LocalTime LeaseBook::deadline() const {
  auto earliest = LocalTime::max();
  for (std::size_t i = 0; i < m_locks.size(); ++i)
    earliest = std::min(earliest, deadline(i));
  return earliest;
}

LocalTime LeaseBook::next_renewal() const {
  auto oldest = LocalTime::max();
  for (const auto& lock : m_locks)
    oldest = std::min(oldest, lock.confirmed);
  auto next = oldest + m_timing.renew_interval;
  for (const auto& lock : m_locks) {
    if (lock.pinned && lock.clear_after) next = std::min(next, *lock.clear_after);
  }
  return next;
}

Millis LeaseBook::server_bound(Millis total) const {
  return std::min(std::max(m_timing.renew_interval / 4, Millis(1000)), std::max(total, Millis(1)));
}

Millis LeaseBook::retry_reserve() const { return std::max(m_timing.renew_interval / 8, Millis(100)); }

Millis LeaseBook::call_bound(Millis left) const {
  const auto reserve = retry_reserve();
  if (left >= 2 * reserve) return left - reserve;
  return std::max(left, Millis(0)) + m_timing.kill_grace + Millis(500);
}

LeaseBook::Confirmed LeaseBook::confirmed(std::size_t i, LocalTime sent, LocalTime received) {
  auto& lock = m_locks[i];
  lock.confirmed = std::max(lock.confirmed, sent);
  if (!lock.pinned) return Confirmed::counted;
  if (!lock.clear_after) {
    lock.clear_after = received + lock.bound + Millis(1000);
    return Confirmed::clearing;
  }
  if (sent < *lock.clear_after) return Confirmed::clearing;
  lock.pinned.reset();
  lock.bound = Millis(0);
  lock.clear_after.reset();
  return Confirmed::lifted;
}

void LeaseBook::unknown(std::size_t i, LocalTime sent, Millis bound) {
  auto& lock = m_locks[i];
  lock.pinned = lock.pinned ? std::min(*lock.pinned, sent) : sent;
  lock.bound = std::max(lock.bound, bound);
  lock.clear_after.reset();
}

} // namespace mongolock
