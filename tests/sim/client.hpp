// One simulated `mongolock run` host after another: wants a name, acquires it with the real
// Locker::try_acquire (retrying now and then) or waits in the queue with the real Waiter (run --wait), starts its job
// only before the first acquisition's renew deadline (Run::start), renews as the heartbeat does (the real LeaseBook
// decides when and what counts; Locker::renew sends), stops the job at the deadline as the guardian does, and releases
// with Locker::release once the job has ended. A step-driven state machine on the world's virtual time; its calls may
// let other clients run.
#pragma once

#include "sim_store.hpp"
#include "world.hpp"

#include <mongolock/guardian_deadline.hpp>
#include <mongolock/lease_book.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/log.hpp>
#include <mongolock/waiter.hpp>

#include <memory>

namespace sim {

class Client {
public:
  Client(World& world, int id);

  // One step at now() >= wake_at(): acquire, renew, stop, release, as the state says.
  void step();

  [[nodiscard]] int id() const { return m_id; }
  [[nodiscard]] LocalTime wake_at() const { return std::max(m_wake_at, m_paused_until); }
  [[nodiscard]] bool busy() const { return m_busy; }
  [[nodiscard]] bool dead() const { return m_state == State::dead; }
  [[nodiscard]] LocalTime paused_until() const { return m_paused_until; }
  void pause(LocalTime until) { m_paused_until = std::max(m_paused_until, until); }
  void kill();
  // Its cursor's getMore is parked until `until` (SimFeed): its next step comes then, or with an event.
  void park(LocalTime until) { m_parked_until = until; }
  // A call of this client returned later than it would have on its own: the calls of others nested in it
  // held it up (the scheduler starved it, as a stopped process).
  void overran() { m_overran_at = m_world.now(); }
  void wake_on_event() {
    if (m_parked_until) m_wake_at = std::min(m_wake_at, m_world.now());
  }

  // --- for the invariants ------------------------------------------------------------------------
  // The lock this client acquired and has not released yet (nullopt when none).
  [[nodiscard]] const std::optional<mongolock::LockRecord>& lock() const { return m_lock; }
  // The job runs now (started, and before its end: its own, or the guardian's deadline + kill grace).
  [[nodiscard]] bool job_running() const;
  // The latest the job may run: its own end, the guardian's SIGKILL (GuardianDeadline: its deadline +
  // kill grace, or a stop's), or the host's death; at least an instant after it started (a job that is
  // spawned runs, however soon it is killed).
  [[nodiscard]] LocalTime job_end() const;
  // The holder counts its lease valid now: holding, not lost, before LeaseBook's deadline.
  [[nodiscard]] bool believes() const;
  [[nodiscard]] LocalTime belief_deadline() const { return m_book ? m_book->deadline() : LocalTime{}; }
  // Waiting in the queue, first in line for `name`, neither dead nor stopped: since when (the later of
  // becoming the head, the end of its last pause and of its last call held up by others); nullopt otherwise.
  [[nodiscard]] std::optional<LocalTime> head_since(const std::string& name) const;

private:
  enum class State { idle, wanting, holding, finishing, dead };
  void acquire();
  void wait_in_queue();
  void skip_queue(); // Plant::skip_queue
  [[nodiscard]] mongolock::AcquireRequest request() const;
  void start(mongolock::LockRecord lock);
  void hold();
  void renew();
  void finish();
  void set_lost(const char* why);
  void idle_for(Millis d);
  [[nodiscard]] LocalTime guardian_kill_at() const;
  void maybe_mark_waiters(const std::vector<mongolock::LockRecord>& seen);

  World& m_world;
  int m_id;
  std::string m_tag; // "c3" in the trace
  mongolock::Log m_log{mongolock::Verbosity::quiet};
  SimStore m_store;
  mongolock::Locker m_locker;
  State m_state = State::idle;
  LocalTime m_wake_at{};
  LocalTime m_paused_until{};
  std::optional<LocalTime> m_parked_until;
  std::optional<LocalTime> m_head_since;
  LocalTime m_overran_at{};
  LocalTime m_wait_end{}; // in a call (busy): when its wait would end on its own
  bool m_busy = false;
  std::string m_want;
  std::unique_ptr<mongolock::Waiter> m_waiter;     // this attempt waits in the queue (run --wait)
  std::unique_ptr<mongolock::WaitQueue> m_skipper; // Plant::skip_queue: its tickets, outside the Waiter
  int m_slots = 1;
  LocalTime m_want_until{};
  std::optional<mongolock::LockRecord> m_lock;
  std::optional<mongolock::LeaseBook> m_book;
  bool m_lost = false;
  bool m_job = false;
  LocalTime m_job_start{};
  LocalTime m_job_planned_end{};
  LocalTime m_next_renewal{};
  std::optional<mongolock::GuardianDeadline> m_guardian; // the real watchdog of the job's guardian
  LocalTime m_died_at = LocalTime::max();                // killed (the host died: its job with it)
  friend class SimStore;
  friend class SimFeed;
};

} // namespace sim
