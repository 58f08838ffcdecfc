// Waiting for locks (--wait) as a state machine: the queue of waiters (queue.hpp), the wake-up events
// and the attempts of the first in line, with named states instead of loop flags.
//
//   start ──(nobody waits, taken)──────────────────────────────────────────────▶ acquired
//     │ join the queue, read it
//     ▼
//   far ◀──(rejoined at the back)── near ◀──▶ head ──(taken)──▶ acquired
//     └──(moved up: among the first `followers`)──▶ near ──(every waiter ahead left)──▶ head
//   any queued state ──(policy.wait passed)──▶ timed_out; ──(the sleeper says stop)──▶ interrupted
//   any queued state ──(policy.replace, and a newer replacing run joined ahead)──▶ superseded
//   head ──(policy.replace, and the lock's holder is a newer replacing run: LockRecord::replace_seq)──▶ superseded
//
// Only `near` and `head` follow the wake-up events (a tailable cursor: see QueueTiming for what it
// costs the server), and only while the line moves (it moved within QueueTiming::follow_idle; else they
// look every idle_poll); `far` waiters hold no cursor and read the queue every far_interval(), sooner
// the closer they are and the faster the line moves, so they follow the events before their turn.
// Every server command goes through the Locker's store; time is read from LeaseClock and the store's
// ServerClock; pauses go through the caller's Sleeper.
#pragma once

#include <mongolock/error.hpp>
#include <mongolock/locker.hpp>

#include <string_view>

namespace mongolock {

class Waiter {
public:
  enum class State {
    start,       // not in the queue yet: one plain attempt when nobody waits, then join the queue
    far,         // queued behind the followers: no event cursor; reads the queue every far_interval()
    near,        // among the first `followers`, not first: follows the events, re-reads the queue when told
    head,        // first in line on every name: tries when woken, at the busy lock's takeover time, after quiet waits
    acquired,    // every lock taken: outcome().locks (with the tickets and the cursor, for the caller to leave)
    timed_out,   // policy.wait passed without taking them: outcome().held names the busy lock
    interrupted, // the sleeper stopped the wait (a signal)
    superseded,  // run --replace: a newer replacing run joined the queue ahead of this one (the newest wins)
  };

  // `requests`: the names to take, all or none (callers sort them); policy.wait must be set.
  Waiter(Locker& locker, std::vector<AcquireRequest> requests, const WaitPolicy& policy);

  // Runs the current state's protocol step (server commands; Error (69) propagates, after which the
  // tickets are deleted when the Waiter is destroyed) and then waits as the new state requires: for an
  // event (up to queue.push_check) or a pause through `sleep`. Returns false once the state is final.
  bool step(const Sleeper& sleep);

  // After step() threw `error`: when the error is transient (Error::transient(): the server restarting or
  // failing over, nothing changed by the failed call) and the waiter is queued (not starting) and its wait
  // has time left, says so with -v, pauses a poll interval (queue.poll, up to the deadline) through `sleep`
  // and returns true: the next step tries again (a lost ticket rejoins, as after any gap). Else false: the
  // caller rethrows (exit 69). Red team 6, F5: a --wait of 60 s exited 69 at a 1.5-3 s server restart. Tickets
  // that lapse meanwhile are inserted again with their old seq where it is free (WaitQueue::unreachable()).
  bool pause_after(const Error& error, const Sleeper& sleep);

  [[nodiscard]] State state() const { return m_state; }
  // True while it follows the wake-up events (push); false while it polls.
  [[nodiscard]] bool following() const { return m_feed != nullptr; }
  [[nodiscard]] static std::string_view state_name(State state);

  // The result so far; moved out by the caller once the state is final.
  [[nodiscard]] AcquireOutcome& outcome() { return m_outcome; }

private:
  // What a step leaves to do before the next one: nothing (go on at once) or wait up to `pause`.
  struct Pause {
    bool now = false;
    Millis pause{0};
  };
  Pause start();
  Pause queued();
  // The head's attempt: true when taken; otherwise records who holds what and when it may be taken over.
  bool head_attempt(Pause& again);
  void supersede();
  bool take();
  // Reads the queue and moves to far, near or head by the waiter's place in line.
  void read_queue();
  // `elapsed`: since the previous read (far: how fast the line moves).
  void place(int position, Millis elapsed);
  [[nodiscard]] bool recheck_due() const;
  void rejoined();
  void follow();
  // run --replace, just joined at the front, or back in its old place after an outage (WaitQueue::back_in_place()):
  // appends a k_replace_event per name (best effort): every waiter reads the queue again before it tries.
  void announce_replace();
  // Once the line has not moved for follow_idle: the head closes its cursor and looks at the lock every
  // idle_poll; a near waiter becomes far (no cursor, the far lease, a look every still_interval()).
  void go_idle_if_still();
  // How often a waiter at `position` looks at the queue while the line stands still: 2 x idle_poll per
  // place behind the head, at most far_max.
  [[nodiscard]] Millis still_interval(int position) const;
  [[nodiscard]] Millis pause_for() const;
  void wait(Millis pause, const Sleeper& sleep);
  void on_event(const WakeEvent& event);
  void on_feed_error(const Error& e);
  // The lease the tickets get: ticket_lease among the first `followers` in line (by the last read place), else
  // far_ticket_lease.
  [[nodiscard]] Millis ticket_lease() const;

  Locker& m_locker;
  LockStore& m_store;
  const Log& m_log;
  std::vector<AcquireRequest> m_requests;
  std::vector<std::string> m_names;
  WaitPolicy m_policy;
  AcquireOutcome m_outcome;
  std::unique_ptr<WaitQueue> m_queue;
  std::unique_ptr<EventFeed> m_feed;
  State m_state = State::start;
  bool m_forever = false;
  LocalTime m_deadline{};
  bool m_push_off = false; // no push wake-ups (--no-push, or the cursor failed too often)
  int m_refollowed = 0;    // times in a row the event cursor failed (or could not be made) and was made anew
  bool m_try_now = false;  // the head: try at once, without reading the lock first (woken)
  bool m_reread = false;   // not the head: read the queue now
  bool m_requeue = false;  // any state: read the queue now (a replacing run joined at the front)
  bool m_quiet = false;    // the last wait ended without an event (FerretDB v1 may have lost one)
  bool m_retried = false;  // the head found the lock free right after a failed attempt, tried again
  ServerTime m_takeover_at = ServerTime::max(); // the head: when the busy lock may be taken over (no event)
  LocalTime m_checked{};                        // the last read of the queue
  LocalTime m_moved{};                          // when the line last moved for this waiter (its place changed)
  bool m_idle = false;                          // head: the line did not move for follow_idle: no cursor
  LocalTime m_next_check{};                     // far: the next read of the queue
  int m_read_position = 0;                      // far: the place in line at the last read
};

} // namespace mongolock
