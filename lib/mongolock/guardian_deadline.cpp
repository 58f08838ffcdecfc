#include <mongolock/guardian_deadline.hpp>

#include <algorithm>

namespace mongolock {

GuardianDeadline::Action GuardianDeadline::check(std::int64_t now) {
  Action action;
  if (m_state == State::armed && now >= m_deadline) {
    action.fired = true;
    action.term = begin_stop(now, std::max<std::int64_t>(m_deadline - now + m_grace, 0));
  }
  if (m_state == State::stopping && now >= m_kill_at) action.kill = true;
  return action;
}

void GuardianDeadline::extend(std::int64_t at, std::int64_t sent) {
  if (m_state == State::armed && sent < m_deadline) m_deadline = at;
}

GuardianDeadline::Action GuardianDeadline::stop(std::int64_t now, std::int64_t kill_by) {
  Action action;
  if (m_state == State::armed) action.term = begin_stop(now, std::max<std::int64_t>(kill_by - now, 0));
  m_kill_at = std::min(m_kill_at, kill_by);
  return action;
}

bool GuardianDeadline::begin_stop(std::int64_t now, std::int64_t grace) {
  m_state = State::stopping;
  m_kill_at = now + grace;
  return grace > 0;
}

} // namespace mongolock
