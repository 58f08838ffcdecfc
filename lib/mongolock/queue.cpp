#include <mongolock/duration.hpp>
#include <mongolock/error.hpp>
#include <mongolock/queue.hpp>
#include <mongolock/unique_seq.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <utility>

namespace mongolock {

bool WaitQueue::anyone_waiting(const std::vector<std::string>& names) {
  const auto now = m_store.clock().earliest_now(); // live unless expired for sure
  const auto tickets = m_store.tickets(names);
  return std::any_of(tickets.begin(), tickets.end(), [&](const TicketRecord& t) { return t.expires_at > now; });
}

Millis WaitQueue::call_bound(bool renewal) const {
  if (m_tickets.empty()) return answer_limit();
  const auto left = std::chrono::floor<Millis>(m_renewed + m_lease - LeaseClock::now());
  return std::max(renewal ? left : left - answer_limit(), answer_limit());
}

template <typename Call> auto WaitQueue::bounded(bool renewal, const Call& call) {
  // Same clock: a queue call needs no fresh hello (CallLimits::reread_clock), but after the server could not be
  // reached: a handshake held through the outage leaves an estimate seconds wide, and tickets written from its
  // latest bound look like dead far waiters' to the others (at_head()'s skip_as_dead(): test_queue_outage.sh).
  const auto limit = call_bound(renewal);
  m_store.reconnect(CallLimits{limit, limit, std::nullopt, m_unreachable});
  try {
    auto result = call();
    m_store.reconnect(std::nullopt);
    return result;
  } catch (...) {
    m_store.reconnect(std::nullopt);
    throw;
  }
}

void WaitQueue::join(const std::vector<std::string>& names, const std::string& process, bool front,
                     std::optional<std::int64_t> keep) {
  const auto previous = seq();
  std::optional<std::int64_t> old_place = front ? std::nullopt : keep; // tried first, once
  leave();
  m_names = names;
  m_process = process;
  m_front = front;
  // A seq above every ticket of every name (at the front: below every ticket of these names, and below 0);
  // on a duplicate key (a concurrent join took it on one of our names), give back what was inserted and
  // take the next one.
  // A seq at an end of the int64 range leaves no seq beyond it: only another program writes one.
  const auto no_room = [&](std::int64_t seq, const char* where) {
    return unavailable_error(
        fmt::format("could not join the queue of '{}': {} is {}, the {} int64 (mongolock never writes it); delete "
                    "that document and try again",
                    names.front(), where, seq, seq < 0 ? "lowest" : "highest"));
  };
  const auto next = [&] {
    if (const auto kept = std::exchange(old_place, std::nullopt)) return *kept;
    const auto highest = m_store.highest_ticket();
    if (!front) {
      if (highest == std::numeric_limits<std::int64_t>::max()) throw no_room(highest, "the seq of a queue ticket");
      return highest + 1;
    }
    // Tickets first, then holders: a replacing run that took a lock between the two reads inserted its
    // lock before it deleted its ticket, so one of the reads sees it.
    const auto tickets = m_store.tickets(names); // by seq: the first is the lowest
    auto lowest = std::min<std::int64_t>(tickets.empty() ? 0 : tickets.front().seq, 0);
    const char* where = "the seq of a queue ticket";
    for (const auto& name : names) {
      for (const auto& lock : m_store.list(name)) {
        if (lock.replace_seq.value_or(0) < lowest) {
          lowest = *lock.replace_seq;
          where = "the replace_seq of the lock document";
        }
      }
    }
    if (previous && lowest < *previous) m_passed = true;
    if (lowest == std::numeric_limits<std::int64_t>::min()) throw no_room(lowest, where);
    return lowest - 1;
  };
  LocalTime sent{};
  const auto insert = [&](std::int64_t seq) { return insert_tickets(names, process, seq, sent); };
  const auto seq = allocate_unique(next, insert, fmt::format("join the queue of '{}'", names.front()));
  m_renewed = sent; // the tickets' leases count from when they were sent
  if (!m_passed) m_last_seq = seq;
  m_back_in_place = !m_passed && keep && seq == *keep && !front;
  m_lease = m_timing.ticket_lease;
  m_ahead.clear();
  m_read = false;
  if (m_passed) {
    m_log.debugf("not joining the queue of {} again: a newer replacing run joined meanwhile", fmt::join(names, ", "));
    return;
  }
  m_log.debugf("joined the queue of {} with seq {}{}", fmt::join(names, ", "), seq,
               front             ? " (at the front)"
               : m_back_in_place ? " (its place before the server could not be reached)"
                                 : "");
}

bool WaitQueue::insert_tickets(const std::vector<std::string>& names, const std::string& process, std::int64_t seq,
                               LocalTime& sent) {
  sent = LeaseClock::now();
  // A replacing run rejoining after a newer one joined is superseded: no ticket, for one below the newer
  // run's would stand ahead of it, and a newer run reading the queue then would think itself passed.
  if (m_passed) return true;
  const auto now = m_store.clock().latest(sent); // the lease never looks shorter to others
  try {
    for (const auto& name : names) {
      TicketRecord ticket;
      ticket.name = name;
      ticket.seq = seq;
      ticket.process = process;
      ticket.since = now;
      ticket.expires_at = now + m_timing.ticket_lease;
      if (!m_store.insert_ticket(ticket)) {
        leave();
        return false;
      }
      m_tickets.push_back(std::move(ticket));
    }
  } catch (const Error&) {
    leave();
    throw;
  }
  return true;
}

bool WaitQueue::keep_alive(Millis lease) {
  // A join cut by an error left no ticket; a waiter that waits on (a transient error: Waiter::pause_after) joins
  // again, as after a lost ticket (the simulator found one out of the line for good, looking every millisecond).
  if (m_tickets.empty() && !m_names.empty() && !m_passed) {
    const auto names = m_names;
    join(names, m_process, m_front, m_unreachable ? m_last_seq : std::nullopt);
    return false;
  }
  const auto first_sent = LeaseClock::now();
  // Due, or moved up to the first in line with a far waiter's long lease: renew to the short one now.
  if (m_tickets.empty() || (first_sent < renewal_due() && lease >= m_lease)) return true;
  for (const auto& ticket : m_tickets) {
    const auto sent = LeaseClock::now();
    const auto now = m_store.clock().latest(sent);
    const bool renewed = bounded(true, [&] { return m_store.renew_ticket(ticket.id, now, now + lease) == 1; });
    const auto answered = std::chrono::duration_cast<Millis>(LeaseClock::now() - sent);
    // A renewal answered later than answer_limit() may have raced another waiter's delete of this ticket
    // as dead (on servers whose writes read then write, the delete can follow the renewal's write): it does
    // not count, so no two waiters can both believe they are first.
    if (!renewed || answered > answer_limit()) {
      // Lapsed while the server could not be reached: every waiter of the outage lost its ticket, and each
      // takes its old seq again where it is free, so that they keep their order (red team 7, F4).
      const auto keep = m_unreachable && !m_front ? seq() : std::nullopt;
      m_log.warning(fmt::format(
          "the queue ticket of '{}' was lost ({}); joining the queue again, at its {}", ticket.name,
          renewed
              ? fmt::format("its renewal took {}, over {}", format_duration(answered), format_duration(answer_limit()))
              : fmt::format("not renewed within its {} lease: {}", format_duration(m_lease),
                            keep ? "the server could not be reached"
                                 : "this process was stopped or starved, or its calls were slow"),
          m_front ? "front (a replacing run)"
          : keep  ? fmt::format("old place (seq {}) if it is still free, else at its back", *keep)
                  : "back"));
      const auto names = m_names;
      join(names, m_process, m_front, keep);
      return false;
    }
  }
  m_renewed = first_sent;
  m_lease = lease;
  m_unreachable = false;
  return true;
}

LocalTime WaitQueue::renewal_due() const {
  return m_renewed + m_lease * 3 / 8; // 1.5 s of a 4 s lease: two chances before answer_limit() matters
}

bool WaitQueue::ticket_live() const {
  return m_tickets.empty() || LeaseClock::now() + answer_limit() < m_renewed + m_lease;
}

bool WaitQueue::at_head() {
  const auto now = m_store.clock().earliest_now(); // dead only when expired for sure
  const auto local = LeaseClock::now();
  const auto read = [&] { return m_store.tickets(m_names); };
  const auto tickets = m_read ? bounded(false, read) : read();
  std::map<std::string, bool> found;
  std::map<std::string, int> places; // per name: live tickets ahead of this one so far, the skipped ones not counted
  std::map<std::string, StaleWatch> watched;
  m_ahead.clear();
  m_read = true;
  for (const auto& ticket : tickets) {
    const auto mine =
        std::find_if(m_tickets.begin(), m_tickets.end(), [&](const TicketRecord& t) { return t.id == ticket.id; });
    if (mine != m_tickets.end()) {
      found[ticket.name] = true;
      continue;
    }
    if (found[ticket.name]) continue; // behind us
    if (ticket.expires_at > now) {
      // A skipped ticket takes no place: the one behind it moves up (a place counted before the skip let
      // dead waiters far back fill the first places and hold up the line for their whole lease; issue 26).
      if (skip_as_dead(ticket, now, local, places[ticket.name] + 1, watched)) continue;
      ++places[ticket.name];
      // When it expires, or, with a far waiter's long lease, when it is renewal_overdue() unless renewed
      // (skip_as_dead()): those behind look again then (next_expiry()), not a far or idle interval later
      // (the red team of issue 26 measured 13.1-13.9 s after the kill of dead far waiters; item 9).
      const bool far_lease = ticket.expires_at - now > m_timing.ticket_lease + answer_limit();
      m_ahead[ticket.name][ticket.id] =
          far_lease ? std::min(ticket.expires_at, ticket.expires_at - m_timing.far_ticket_lease + renewal_overdue())
                    : ticket.expires_at;
    } else if (ticket.expires_at <= now - m_timing.purge_after) {
      // A dead waiter's ticket: delete it, only if it is still expired (a read-then-write server may
      // interleave a renewal; then the renewal fails and that waiter rejoins at the back).
      if (m_store.remove_ticket(ticket.id, now - m_timing.purge_after) == 1) {
        m_log.debugf("deleted the dead queue ticket of {} on '{}'", ticket.process, ticket.name);
      }
    }
  }
  m_stale = std::move(watched);
  return head();
}

bool WaitQueue::skip_as_dead(const TicketRecord& ticket, ServerTime now, LocalTime local, int place,
                             std::map<std::string, StaleWatch>& watched) const {
  const auto seen = m_stale.find(ticket.id);
  const bool same = seen != m_stale.end() && seen->second.expires_at == ticket.expires_at;
  const auto left = ticket.expires_at - now;
  // A far waiter's long lease (as first seen with this expiry: it only shrinks from there).
  if (!same && left <= m_timing.ticket_lease + answer_limit()) return false;
  std::optional<LocalTime> front_since;
  if (place <= m_timing.followers) front_since = same && seen->second.front_since ? seen->second.front_since : local;
  watched[ticket.id] = StaleWatch{front_since, ticket.expires_at};
  // Among the first in line with a far waiter's long lease: a live waiter renews to the short one within
  // far_max of moving up; one that has not for longer is dead (killed far back).
  if (front_since && local - *front_since >= stale_after()) {
    m_log.debugf("skipping the queue ticket of {} on '{}': among the first in line, not renewed for {}", ticket.process,
                 ticket.name, format_duration(stale_after()));
    return true;
  }
  // Anywhere in line: a live far waiter renews every 3/8 of its lease; one overdue by renewal_overdue() is
  // dead, so that dead waiters far back are skipped together, not one after another once the line reaches
  // each of them (four or more killed far back held a free lock ~20 s; issue 26 item 9).
  if (ticket.expires_at - m_timing.far_ticket_lease + renewal_overdue() <= now) {
    m_log.debugf("skipping the queue ticket of {} on '{}': its far lease was not renewed for {}", ticket.process,
                 ticket.name, format_duration(renewal_overdue()));
    return true;
  }
  return false;
}

bool WaitQueue::passed(const std::string& name, const std::string& ticket) {
  const auto it = m_ahead.find(name);
  return it != m_ahead.end() && it->second.erase(ticket) == 1;
}

bool WaitQueue::head() const { return m_read && position() == 1; }

int WaitQueue::position() const {
  std::size_t farthest = 0;
  for (const auto& [name, ahead] : m_ahead)
    farthest = std::max(farthest, ahead.size());
  return static_cast<int>(farthest) + 1;
}

ServerTime WaitQueue::next_expiry() const {
  auto first = ServerTime::max();
  for (const auto& [name, ahead] : m_ahead) {
    for (const auto& [id, expires_at] : ahead)
      first = std::min(first, expires_at);
  }
  return first;
}

std::string WaitQueue::ticket_of(const std::string& name) const {
  for (const auto& ticket : m_tickets) {
    if (ticket.name == name) return ticket.id;
  }
  return {};
}

void WaitQueue::leave() noexcept {
  for (const auto& ticket : m_tickets) {
    try {
      (void)m_store.remove_ticket(ticket.id);
    } catch (const std::exception& e) {
      try {
        m_log.warning(fmt::format("could not delete the queue ticket of '{}' ({}); it expires within {}", ticket.name,
                                  e.what(), format_duration(m_timing.ticket_lease)));
      } catch (...) {}
    }
  }
  m_tickets.clear();
}

Millis far_interval(const QueueTiming& timing, int position, int before, Millis elapsed) {
  const int behind = std::max(position - timing.followers, 1); // places until it follows the events
  auto interval = std::min(timing.far_step * behind, timing.far_max);
  if (before > position && elapsed > Millis(0)) {
    const auto per_place = elapsed / (before - position);
    interval = std::min(interval, per_place * behind / 2);
  }
  return std::max(interval, std::min(Millis(50), timing.far_step));
}

std::vector<QueuedWaiter> live_waiters(const std::vector<TicketRecord>& tickets, ServerTime now) {
  std::vector<QueuedWaiter> out;
  std::map<std::string, int> positions;
  for (const auto& ticket : tickets) {
    if (ticket.expires_at <= now) continue;
    out.push_back(QueuedWaiter{++positions[ticket.name], ticket});
  }
  return out;
}

} // namespace mongolock
