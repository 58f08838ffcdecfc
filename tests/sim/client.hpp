// One simulated `mongolock run` host after another: wants one name or several (`run A B -- CMD`, sorted as the CLI
// does), acquires them all or none with the real Locker::acquire_all (retrying now and then) or waits in the queue
// with the real Waiter (run --wait), starts its job only before the first acquisition's renew deadline (Run::start),
// renews every lock as the heartbeat does (the real LeaseBook decides when and what counts; Locker::renew sends; the
// lease is lost when any lock's is), stops the job at the deadline as the guardian does, and releases every lock
// with Locker::release once the job has ended. A step-driven state machine on the world's virtual time; its calls may
// let other clients run.
#pragma once

#include "sim_store.hpp"
#include "world.hpp"

#include <mongolock/guardian_deadline.hpp>
#include <mongolock/heartbeat.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/log.hpp>
#include <mongolock/waiter.hpp>

#include <memory>
#include <optional>
#include <set>

namespace sim {

class Client {
public:
  // A run host; with `operator_seed`, the operator instead (Config::operator_every): it runs no job, and issues
  // `renew`/`release` commands from outside the runs (operate()), drawing from a generator of its own.
  Client(World& world, int id, std::optional<std::uint64_t> operator_seed = std::nullopt);

  // One step at now() >= wake_at(): acquire, renew, stop, release, as the state says.
  void step();

  [[nodiscard]] int id() const { return m_id; }
  // The operator's generator, else the world's (SimStore draws this client's faults from it).
  [[nodiscard]] Rng& rng() { return m_own_rng ? *m_own_rng : m_world.rng(); }
  [[nodiscard]] bool is_operator() const { return m_own_rng.has_value(); }
  // The operator's current command (SimStore hands it to World::operator_write() with each of its writes).
  [[nodiscard]] const OperatorCommand& command() const { return m_command; }
  // Its own clock (LeaseClock, Config::ppm) now: the real code's times (its deadlines, the guardian's, the Waiter's
  // pauses) are on it; the simulator's own (wake_at(), pauses, job_end()) on the world's.
  [[nodiscard]] LocalTime local_now() const { return m_world.local_time(m_id, m_world.now()); }
  // The world time at which its clock reads `local` (World::world_time(): rounded up).
  [[nodiscard]] LocalTime world_at(LocalTime local) const { return m_world.world_time(m_id, local); }
  // Same-host schedules (Config::same_host): the pid of its current (or last) run on the shared host; 0 otherwise.
  [[nodiscard]] pid_t pid() const { return m_pid; }
  [[nodiscard]] LocalTime wake_at() const { return std::max(m_wake_at, m_paused_until); }
  [[nodiscard]] bool busy() const { return m_busy; }
  [[nodiscard]] bool dead() const { return m_state == State::dead; }
  [[nodiscard]] LocalTime paused_until() const { return m_paused_until; }
  void pause(LocalTime until) {
    m_paused_until = std::max(m_paused_until, until);
    fault(until);
  }
  // A fault touched this client until `until` (a call's fault: failed, delayed, early error, lost reply; a
  // pause; its call held up by others'): the liveness invariants excuse a lost lease or ticket after it.
  void fault(LocalTime until) { m_fault = std::max(m_fault, until); }
  [[nodiscard]] LocalTime own_fault() const { return m_fault; }
  void kill();
  // Its cursor's getMore is parked until `until` (SimFeed): its next step comes then, or with an event.
  void park(LocalTime until) { m_parked_until = until; }
  // A call of this client returned later than it would have on its own: the calls of others nested in it
  // held it up (the scheduler starved it, as a stopped process).
  void overran() {
    m_overran_at = m_world.now();
    fault(m_overran_at);
  }
  void wake_on_event() {
    if (m_parked_until) m_wake_at = std::min(m_wake_at, m_world.now());
  }

  // --- for the invariants ------------------------------------------------------------------------
  // The locks this client acquired and has not released yet (empty when none), in request order.
  [[nodiscard]] const std::vector<mongolock::LockRecord>& locks() const { return m_locks; }
  // The _id of locks an acquisition of this client has taken and not yet returned or given back (in a call).
  [[nodiscard]] const std::set<std::string>& in_hand() const { return m_in_hand; }
  // The names its job runs on (the run's names: the job uses all of them), set when the job starts.
  [[nodiscard]] const std::vector<std::string>& run_names() const { return m_run_names; }
  // The names the current attempt wants (empty when idle or holding).
  [[nodiscard]] const std::vector<std::string>& wants() const { return m_wants; }
  // The job runs now (started, and before its end: its own, or the guardian's deadline + kill grace).
  [[nodiscard]] bool job_running() const;
  // The latest the job may run: its own end, the guardian's SIGKILL (GuardianDeadline: its deadline +
  // kill grace, or a stop's), or the host's death; at least an instant after it started (a job that is
  // spawned runs, however soon it is killed).
  [[nodiscard]] LocalTime job_end() const;
  // The holder counts its lease valid now: holding, not lost, before LeaseBook's deadline.
  [[nodiscard]] bool believes() const;
  // The guardian's watchdog deadline while it is armed (nullopt once it fired or stops the job); its own clock.
  [[nodiscard]] std::optional<LocalTime> guardian_deadline() const;
  // LeaseBook's deadline of the lease (its own clock).
  [[nodiscard]] LocalTime belief_deadline() const { return m_heart ? m_heart->deadline() : LocalTime{}; }
  // The heartbeat's lease of lock i (for SimStore's Plant::late_reply): its deadline (its own clock); nullopt when
  // none.
  [[nodiscard]] std::optional<LocalTime> lease_deadline_of(const std::string& id) const;
  // Waiting in the queue, first in line on every name it wants (wants()), neither dead nor stopped: since when
  // (the later of becoming the head, the end of its last pause and of its last call held up by others); nullopt
  // otherwise.
  [[nodiscard]] std::optional<LocalTime> head_since() const;
  // Its "host:pid" (LockRecord::process, TicketRecord::process) while it waits in the queue; "" otherwise.
  [[nodiscard]] std::string waiting_as() const;
  // A run --replace holding its locks (replaceable: its heartbeat reads the queue for a newer replacing run).
  [[nodiscard]] bool replaceable() const { return m_replace && m_state == State::holding && !m_lost; }
  // A replacing run (run --replace) in the queue, not yet holding.
  [[nodiscard]] bool replacing_waiter() const { return m_replace && !waiting_as().empty(); }
  // Its job is being stopped for a replacing run (Supervisor's `replaced` state).
  [[nodiscard]] bool replaced() const { return !m_replaced_by.empty(); }
  // Not stopped and not held up in a call by others' calls (as head_since()): since when.
  [[nodiscard]] LocalTime responsive_since() const { return std::max(m_paused_until, m_overran_at); }
  // In a call that others' calls nested in it hold past its own end (the simulator's starvation: as a pause).
  [[nodiscard]] bool held_up() const { return m_busy && m_world.now() > m_wait_end; }

private:
  enum class State { idle, wanting, holding, finishing, dead };
  void acquire();
  void wait_in_queue();
  void skip_queue(); // Plant::skip_queue
  void draw_wants();
  [[nodiscard]] std::vector<mongolock::AcquireRequest> requests() const;
  [[nodiscard]] std::string wanted() const; // "'a', 'b'" for the trace
  [[nodiscard]] std::string held() const;   // "'a', 'b#2'" for the trace
  void start(std::vector<mongolock::LockRecord> locks);
  void hold();
  void renewed(LocalTime deadline);
  // How many of m_locks the heartbeat renews (all; 1 under Plant::first_only).
  [[nodiscard]] std::size_t renewed_count() const { return m_renewing.empty() ? m_locks.size() : 1; }
  void finish();
  void release_all();
  // run --once-per (Run::check_before_start()): the real succeeded_within() on the history, holding the locks;
  // false when a success of every name is recorded (not due) or the read failed: nothing starts.
  [[nodiscard]] bool due(Millis period);
  // Run::finish_once_per(): the job's `ok` recorded, the call cut at the lease's renew deadline (CallLimits); true
  // when the server confirmed it before that deadline.
  [[nodiscard]] bool record_success();
  // The history records of this run (one per lock), with `outcome`.
  [[nodiscard]] std::vector<mongolock::RunRecord> run_records(const char* outcome);
  void set_lost(const std::string& why);
  [[nodiscard]] mongolock::AcquireOutcome acquire_partial(); // Plant::partial
  void idle_for(Millis d);
  [[nodiscard]] bool jumps_queue() const;
  // These three on its own clock, as the guardian's.
  [[nodiscard]] LocalTime guardian_kill_at() const;
  void guardian_wake(LocalTime now);
  void check_replaced(LocalTime now);
  void begin_run(); // same host: a new mongolock process for this attempt
  void end_run();   // same host: the run exits (its holder file is removed)
  void maybe_mark_waiters(const std::vector<mongolock::LockRecord>& seen);
  // The operator's step: one `mongolock renew` or `release` of a lock it reads on the server, by holder (--process),
  // token or _id, through the real Locker (as renew_command()/release_command() call it); then its next command.
  void operate();
  // Plant::outstamp_any: Locker::renew(const LockSelector&...) with the outstamped() of before red team 6's F1 (the
  // retry above an outstamping renewal allowed by holder alone).
  [[nodiscard]] std::optional<ServerTime> planted_renew(const mongolock::LockSelector& which, Millis ttl);
  // After a step of the real Waiter threw `error` (Locker::acquire_all's loop): pauses as Waiter::pause_after() says
  // and returns true, or false (the run exits 69).
  [[nodiscard]] bool pause_after(const mongolock::Error& error);

  World& m_world;
  int m_id;
  std::string m_tag;                 // "c3" in the trace
  std::optional<Rng> m_own_rng;      // the operator's (before m_store: its SimStore draws from it)
  OperatorCommand m_command;         // the operator's current command
  std::set<std::string> m_confirmed; // _id of locks whose insert the server confirmed to this client
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
  std::vector<std::string> m_wants;
  std::set<std::string> m_in_hand;
  LocalTime m_waiting_since{};                     // this attempt's Waiter was created (run --wait)
  std::unique_ptr<mongolock::Waiter> m_waiter;     // this attempt waits in the queue (run --wait)
  std::unique_ptr<mongolock::WaitQueue> m_skipper; // Plant::skip_queue: its tickets, outside the Waiter
  LocalTime m_want_until{};
  std::vector<mongolock::LockRecord> m_locks;
  std::vector<std::string> m_run_names;
  std::unique_ptr<mongolock::HeartbeatSteps> m_heart; // the real heartbeat, while holding (after start())
  std::vector<mongolock::LockRecord> m_renewing;      // Plant::first_only: the locks it renews (a copy)
  bool m_lost = false;
  bool m_job = false;
  LocalTime m_job_start{};
  LocalTime m_job_planned_end{};
  std::optional<mongolock::GuardianDeadline> m_guardian; // the real watchdog of the job's guardian
  LocalTime m_died_at = LocalTime::max();                // killed (the host died: its job with it)
  Millis m_dying{0};              // how long its job takes to die after SIGKILL (Config::max_dying)
  pid_t m_pid = 0;                // same host: its current run's pid (Host)
  bool m_replace = false;         // this attempt is a run --replace (Config::p_replace)
  LocalTime m_fault{};            // the latest effect of a fault that touched it (fault())
  std::set<std::string> m_joined; // the names this wait's queue inserted a ticket of (a second one is a rejoin)
  // A ticket insert of this step met a duplicate key: WaitQueue::join gives back what it inserted and joins again
  // with the next seq in the same step (allocate_unique), a second ticket of a name that is no rejoin. Cleared at
  // every step.
  bool m_join_collided = false;
  bool m_job_fails = false;  // run --once-per schedules: this job exits non-zero
  std::string m_replaced_by; // its heartbeat saw a newer replacing run ("host:pid"): the job is being stopped
  friend class SimStore;
  friend class SimFeed;
};

} // namespace sim
