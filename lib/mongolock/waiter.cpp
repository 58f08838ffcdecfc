#include <mongolock/duration.hpp>
#include <mongolock/error.hpp>
#include <mongolock/text.hpp>
#include <mongolock/waiter.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace mongolock {
namespace {
constexpr int k_refollow_limit = 3; // a waiter makes its event cursor anew at most this often, then polls

Millis until(LocalTime t) { return std::chrono::ceil<Millis>(t - LeaseClock::now()); }

// One wait for an event (a getMore that waits up to push_check), cut after `limit`: on a silent connection it
// hung for the socket timeout, past the ticket lease (red team 7, F4). A cut one throws (transient); the store's
// next client leaves the cursor's client to the feed (MongoStore: a retired client lives as long as a feed).
std::optional<WakeEvent> wait_bounded(LockStore& store, EventFeed& feed, const std::vector<std::string>& names,
                                      Millis limit) {
  store.reconnect(CallLimits{limit, limit, std::nullopt, false});
  try {
    auto event = feed.wait(names);
    store.reconnect(std::nullopt);
    return event;
  } catch (...) {
    store.reconnect(std::nullopt);
    throw;
  }
}
} // namespace

std::string_view Waiter::state_name(State state) {
  switch (state) {
  case State::start:
    return "start";
  case State::far:
    return "far";
  case State::near:
    return "near";
  case State::head:
    return "head";
  case State::acquired:
    return "acquired";
  case State::timed_out:
    return "timed-out";
  case State::interrupted:
    return "interrupted";
  case State::superseded:
    return "superseded";
  }
  return "?";
}

Waiter::Waiter(Locker& locker, std::vector<AcquireRequest> requests, const WaitPolicy& policy)
    : m_locker(locker), m_store(locker.store()), m_log(locker.m_log), m_requests(std::move(requests)),
      m_policy(policy) {
  for (const auto& request : m_requests)
    m_names.push_back(request.name);
  m_forever = *m_policy.wait == Millis::max();
  m_deadline = LeaseClock::now() + (m_forever ? Millis(0) : *m_policy.wait);
  m_push_off = !m_policy.push;
}

bool Waiter::step(const Sleeper& sleep) {
  Pause next;
  switch (m_state) {
  case State::start:
    next = start();
    break;
  case State::far:
  case State::near:
  case State::head:
    next = queued();
    break;
  case State::acquired:
  case State::timed_out:
  case State::interrupted:
  case State::superseded:
    return false;
  }
  if (m_state == State::acquired || m_state == State::superseded) return false;
  if (next.now) return true;
  if (!m_forever && LeaseClock::now() >= m_deadline) {
    m_state = State::timed_out;
    return false;
  }
  wait(next.pause, sleep);
  return m_state != State::interrupted;
}

Waiter::Pause Waiter::start() {
  (void)m_store.clock(); // connect first
  m_queue = std::make_unique<WaitQueue>(m_store, m_log, m_policy.queue);
  bool indexed = false;
  if (!m_queue->anyone_waiting(m_names)) {
    // Nobody waits: take a free lock at once, as without --wait.
    if (m_locker.attempt_all(m_requests, true, m_outcome)) {
      m_state = State::acquired;
      return {};
    }
    indexed = true;
  }
  m_queue->join(m_names, m_requests.front().process, m_policy.replace);
  if (!indexed) m_store.ensure_indexes(); // now, while waiting, rather than in the handover
  if (m_policy.replace) announce_replace();
  read_queue();
  return {.now = true};
}

void Waiter::announce_replace() {
  // The waiters that believe they are first must read the queue again before they take the lock; the
  // holder learns of a replacing run by reading the queue (Heartbeat, run --replace). Best effort: a waiter
  // that misses the event reads the queue before it takes a lock it found free by polling. Also a waiter back
  // in its old place after an outage (rejoined()).
  follow(); // creates the events collection if need be
  try {
    for (const auto& name : m_names)
      m_store.append_event(name, k_replace_event);
  } catch (const Error& e) {
    m_log.debugf("could not announce the replacing run to the waiters ({})", e.what());
  }
}

Waiter::Pause Waiter::queued() {
  if (m_state != State::far && !m_feed && !m_push_off && !m_idle) {
    follow(); // its last try failed; once it follows, the queue is read again (events of the gap)
    if (m_feed) m_requeue = true;
  }
  if (m_state != State::head && m_queue->head()) {
    m_log.debugf("first in the queue: the waiters ahead have left");
    place(1, Millis(0)); // wake-up events named every ticket that was ahead
  }
  // A woken head tries first and renews its tickets after (not in the handover).
  const bool woken_head = m_state == State::head && m_try_now && m_queue->ticket_live();
  if (!woken_head && !m_queue->keep_alive(ticket_lease())) rejoined();
  if (m_requeue || (m_state != State::head && recheck_due())) {
    m_requeue = false; // (read_queue() may ask for one more read: the next step's)
    read_queue();
  }
  if (m_queue->superseded()) {
    supersede();
    return {};
  }
  m_reread = false;
  go_idle_if_still();
  m_takeover_at = ServerTime::max();
  if (m_state == State::head) {
    Pause again;
    if (head_attempt(again) || m_state == State::superseded) return {};
    if (again.now) return again;
    if (woken_head && !m_queue->keep_alive(ticket_lease())) rejoined();
  } else {
    m_outcome.held = m_names.front();
    m_outcome.holders.clear();
  }
  return {.now = false, .pause = pause_for()};
}

bool Waiter::head_attempt(Pause& again) {
  Locker::Busy busy;
  if (!m_try_now) {
    busy = m_locker.busy_name(m_requests);
    // Found free by reading (not woken by its release): a replacing run may have joined ahead meanwhile
    // without this waiter seeing its event; one more read of the queue, only at a handover.
    if (busy.name.empty() && !m_queue->at_head()) {
      place(m_queue->position(), Millis(0));
      return false;
    }
  }
  if (m_try_now || busy.name.empty()) {
    if (take()) return true;
    busy = m_locker.busy_name(m_requests); // who holds it now, and until when
  }
  if (busy.name.empty() && !m_retried) {
    m_retried = true; // released between our attempt and the read: try once more at once
    m_try_now = true;
    again.now = true;
    return false;
  }
  if (m_policy.replace && busy.replace_seq && *busy.replace_seq < m_queue->seq().value_or(0)) {
    supersede(); // a newer replacing run took the lock (this run missed its ticket; it left the queue since)
    return false;
  }
  m_outcome.held = busy.name.empty() ? m_names.front() : busy.name;
  m_outcome.holders.clear(); // they may be of another name: the message reads them
  m_takeover_at = busy.takeover_at;
  return false;
}

void Waiter::supersede() {
  m_state = State::superseded;
  m_log.info(fmt::format("a newer run of {} with --replace joined the queue ahead of this one; not run",
                         quoted_list(m_names)));
}

bool Waiter::take() {
  // A lock taken while push works is marked `waiters` (its release wakes the next waiter) and names this
  // waiter's ticket (so that its release tells those behind it that it left).
  // (A head that stopped following because the line stood still still marks it: those behind it may follow.)
  for (auto& request : m_requests) {
    request.waiters = m_feed != nullptr || (m_idle && !m_push_off);
    request.ticket = m_queue->ticket_of(request.name);
    if (m_policy.replace) request.replace_seq = m_queue->seq();
  }
  if (!m_locker.attempt_all(m_requests, false, m_outcome)) return false;
  // The caller closes the cursor and deletes the tickets, after the handover.
  m_outcome.queue = std::move(m_queue);
  m_outcome.feed = std::move(m_feed);
  m_state = State::acquired;
  return true;
}

void Waiter::read_queue() {
  (void)m_queue->at_head();
  const auto now = LeaseClock::now();
  const auto elapsed = std::chrono::duration_cast<Millis>(now - m_checked);
  m_checked = now;
  place(m_queue->position(), elapsed);
}

void Waiter::place(int position, Millis elapsed) {
  const auto before = m_state;
  const auto now = LeaseClock::now();
  if (position != m_read_position || m_state == State::start) {
    m_moved = now; // the line moved (or this waiter just joined it): follow the events again
    m_idle = false;
  }
  const bool still = now - m_moved >= m_policy.queue.follow_idle;
  if (position == 1) {
    m_state = State::head;
  } else if (position <= m_policy.queue.followers && !still) {
    m_state = State::near;
  } else {
    const int previous = before == State::far ? m_read_position : 0;
    auto interval = far_interval(m_policy.queue, position, previous, elapsed);
    if (previous == 0) {
      interval = std::min(interval, m_policy.queue.far_step); // just joined: look again soon (how fast it moves)
    } else if (still) {
      interval = still_interval(position); // the line stands still
    }
    m_state = State::far;
    m_next_check = now + interval;
  }
  m_read_position = position;
  if (m_state == State::far) {
    m_feed.reset(); // only the first in line follow the events
  } else if (!m_feed) {
    // A replacing run that joined between this read and the cursor's start is in neither: read the queue
    // once more, now that the events are followed, before any attempt at the lock.
    follow();
    if (m_feed) m_requeue = true;
  }
  if (before != m_state) {
    m_log.debugf("queue: {} -> {} (place {} in line{})", state_name(before), state_name(m_state), position,
                 m_state == State::far ? fmt::format("; next look in {}", format_duration(until(m_next_check)))
                                       : std::string());
  }
}

bool Waiter::recheck_due() const {
  const auto now = LeaseClock::now();
  if (m_reread) return true;
  // Far: at its interval, and when a ticket ahead expires or is overdue as a dead far waiter's (item 9).
  if (m_state == State::far) return now >= m_next_check || m_store.clock().earliest_now() >= m_queue->next_expiry();
  // Near: after a quiet wait (an event may have been lost), now and then, and when the first ticket
  // ahead expires unless renewed (a dead waiter's: no event tells of it); without events, every poll.
  return !m_feed || m_quiet || now - m_checked >= m_policy.queue.push_recheck ||
         m_store.clock().earliest_now() >= m_queue->next_expiry();
}

void Waiter::rejoined() {
  // At the back now (or back in its old place): the place in line is read again in this step.
  m_state = State::far;
  m_read_position = 0;
  m_reread = true;
  // Back in its old place after an outage (WaitQueue::join's `keep`): a waiter behind it that became first
  // meanwhile must read the queue again before it takes the lock, as for a replacing run that joined ahead.
  if (m_queue->back_in_place()) announce_replace();
}

void Waiter::go_idle_if_still() {
  const auto now = LeaseClock::now();
  if (m_state == State::far || m_idle || now - m_moved < m_policy.queue.follow_idle) return;
  if (m_state == State::near) {
    // The line stands still: wait as those farther back do, until it moves.
    m_state = State::far;
    m_feed.reset();
    m_next_check = now + still_interval(m_read_position);
    m_log.debugf("queue: near -> far (the line has not moved for {}; next look in {})",
                 format_duration(m_policy.queue.follow_idle), format_duration(until(m_next_check)));
    return;
  }
  if (!m_feed) return;
  m_feed.reset();
  m_idle = true;
  m_log.debugf("the line has not moved for {}: looking at the lock every {} instead of following the events",
               format_duration(m_policy.queue.follow_idle), format_duration(m_policy.queue.idle_poll));
}

void Waiter::follow() {
  if (m_feed || m_push_off || m_idle) return;
  try {
    m_feed = m_store.follow_events(m_policy.queue.push_check);
  } catch (const Error& e) {
    // A failure can pass (FerretDB v1 with SQLite: "database is locked" while others create the
    // collection): tried again at the next steps, a few times, then polling only.
    if (++m_refollowed <= k_refollow_limit) {
      m_log.debugf("no push wake-ups yet ({}); polling every {}, following again at the next step", e.what(),
                   format_duration(m_policy.queue.poll));
      return;
    }
    m_push_off = true;
    m_log.debugf("no push wake-ups ({}); polling every {}", e.what(), format_duration(m_policy.queue.poll));
  }
}

Millis Waiter::still_interval(int position) const {
  return std::min(m_policy.queue.far_max, 2 * m_policy.queue.idle_poll * std::max(position - 1, 1));
}

Millis Waiter::ticket_lease() const {
  // By place, not state: the first in line keep the short lease also while the line stands still (then
  // they wait as far ones do), so that a long lease among them means a dead waiter (WaitQueue::at_head()).
  return m_read_position > m_policy.queue.followers ? m_policy.queue.far_ticket_lease : m_policy.queue.ticket_lease;
}

Millis Waiter::pause_for() const {
  const auto now = LeaseClock::now();
  auto pause = m_feed ? m_policy.queue.push_check : m_idle ? m_policy.queue.idle_poll : m_policy.queue.poll;
  if (m_state == State::far) {
    pause = std::max(std::min(until(m_next_check), until(m_queue->renewal_due())), Millis(1));
    if (const auto ahead = m_queue->next_expiry(); ahead != ServerTime::max()) {
      pause = std::clamp(std::chrono::ceil<Millis>(ahead - m_store.clock().earliest_now()), Millis(1), pause);
    }
  }
  if (!m_forever) pause = std::min(pause, std::chrono::ceil<Millis>(m_deadline - now));
  if (m_takeover_at != ServerTime::max()) {
    // The busy lock's expiry + grace (a dead holder, the end of a minimum hold): check then, not later.
    pause = std::clamp(std::chrono::ceil<Millis>(m_takeover_at - m_store.clock().earliest_now()), Millis(1), pause);
  }
  if (m_state == State::head) {
    m_log.debugf("'{}' is held; trying again in {} (first in the queue)", m_outcome.held, format_duration(pause));
  } else {
    m_log.debugf("'{}' is held or others wait first (place {} in the queue); looking again in {}", m_outcome.held,
                 m_queue->position(), format_duration(pause));
  }
  return pause;
}

void Waiter::wait(Millis pause, const Sleeper& sleep) {
  m_try_now = false;
  m_retried = false;
  m_quiet = true;
  if (m_feed && m_state != State::far && pause >= m_policy.queue.push_check) {
    try {
      const auto event = wait_bounded(m_store, *m_feed, m_names, m_policy.queue.push_check + m_queue->answer_limit());
      m_refollowed = 0; // the cursor works: k_refollow_limit counts failures in a row, not over the whole wait
      if (event) on_event(*event);
    } catch (const Error& e) {
      on_feed_error(e);
    }
    if (!sleep(Millis(0))) m_state = State::interrupted;
  } else if (!sleep(pause)) {
    m_state = State::interrupted;
  }
}

void Waiter::on_event(const WakeEvent& event) {
  m_quiet = false;
  if (event.ticket == k_replace_event) {
    m_requeue = true; // a replacing run joined at the front: whoever believed to be first is not
    return;
  }
  const bool passed = m_queue->passed(event.name, event.ticket);
  if (passed) m_moved = LeaseClock::now();
  if (m_state == State::head || m_queue->head()) {
    m_try_now = true;
    m_log.debugf("woken by a release of '{}'", event.name);
  } else if (!passed && m_queue->position() <= 2) {
    m_reread = true; // next in line: the waiter ahead may have taken the lock and left (a stale read)
  }
}

void Waiter::on_feed_error(const Error& e) {
  // A capped collection drops old events, and with them a cursor's place (MongoDB: CappedPositionLost;
  // FerretDB v1: its trim once a minute): follow anew, a few times, and check at once (an event may have
  // been missed); then poll. A network error (its connection silent or lost) says that the server could not be
  // reached: a ticket that lapsed meanwhile takes its old place again (WaitQueue::unreachable(), red team 7 F4).
  m_feed.reset();
  if (e.transient()) m_queue->unreachable();
  if (++m_refollowed <= k_refollow_limit) {
    try {
      m_feed = m_store.follow_events(m_policy.queue.push_check);
      m_log.debugf("push wake-ups failed ({}); following the events anew", e.what());
    } catch (const Error& again) {
      m_log.debugf("push wake-ups failed ({}, then {})", e.what(), again.what());
    }
  }
  if (!m_feed) {
    m_push_off = true;
    m_log.debugf("push wake-ups stopped; polling every {}", format_duration(m_policy.queue.poll));
  }
  // Events of the gap may be lost (also a replacing run's, the only one that tells a head it is not first
  // any more): read the queue at once, then the head tries the lock.
  m_try_now = m_state == State::head;
  m_requeue = true;
  m_quiet = false;
}

bool Waiter::pause_after(const Error& error, const Sleeper& sleep) {
  if (!error.transient() || (m_state != State::far && m_state != State::near && m_state != State::head)) return false;
  const auto now = LeaseClock::now();
  if (!m_forever && now >= m_deadline) return false;
  auto pause = m_policy.queue.poll;
  if (!m_forever) pause = std::min(pause, std::chrono::ceil<Millis>(m_deadline - now));
  m_feed.reset();                      // its connection is gone: follow anew once the server answers
  if (m_queue) m_queue->unreachable(); // a ticket that lapsed meanwhile takes its old place again (F4)
  m_log.debugf("the server did not answer, or answered that it cannot serve now ({}); trying again in {}, while "
               "the wait lasts",
               error.what(), format_duration(pause));
  if (!sleep(pause)) m_state = State::interrupted;
  return true;
}

AcquireOutcome Locker::acquire_all(const std::vector<AcquireRequest>& requests, const WaitPolicy& policy,
                                   const Sleeper& sleep) {
  if (!policy.wait) {
    AcquireOutcome outcome;
    (void)attempt_all(requests, true, outcome);
    return outcome;
  }
  Waiter waiter(*this, requests, policy);
  for (;;) {
    try {
      if (!waiter.step(sleep)) break;
    } catch (const Error& e) {
      if (!waiter.pause_after(e, sleep)) throw;
      if (waiter.state() == Waiter::State::interrupted) break;
    }
  }
  auto outcome = std::move(waiter.outcome());
  outcome.interrupted = waiter.state() == Waiter::State::interrupted;
  outcome.superseded = waiter.state() == Waiter::State::superseded;
  return outcome;
}

} // namespace mongolock
