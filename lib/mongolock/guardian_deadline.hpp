// The guardian's lease watchdog (process.cpp, run_guardian) as a state machine. Pure: it reads no clock
// and sends no signal; the guardian passes CLOCK_BOOTTIME nanoseconds in and carries out the actions
// it returns, so the rules below are unit-tested without processes or time.
//
//   armed ──(now >= deadline: "fired")──▶ stopping ──(now >= kill_at)──▶ kill
//     │ deadline message: moves the deadline      ▲
//     └──(stop message: kill_by)──────────────────┘   (a stop while stopping only brings kill_at forward)
//
// Stopping starts with SIGTERM (and SIGCONT) to the job's group only when there is time left for the
// job to act on it: the SIGKILL is due at deadline + grace however late the guardian woke (stopped or
// starved), because past that point the lease may have ended on the server.
#pragma once

#include <cstdint>
#include <limits>

namespace mongolock {

class GuardianDeadline {
public:
  // A time that never comes (the deadline not armed: on_lost ignore).
  static constexpr std::int64_t k_never = std::numeric_limits<std::int64_t>::max();

  enum class State {
    armed,    // waiting for the deadline (k_never: never)
    stopping, // the job is being stopped: SIGKILL of everything at kill_at
  };

  // What the guardian must do now, in this order: SIGTERM + SIGCONT to the job's group (term), report
  // "fired" to mongolock (fired), kill every descendant and exit (kill).
  struct Action {
    bool term = false;
    bool fired = false;
    bool kill = false;
  };

  // `deadline`: CLOCK_BOOTTIME ns (k_never: not armed); `grace_ns`: SIGTERM to SIGKILL after it.
  GuardianDeadline(std::int64_t deadline, std::int64_t grace_ns) : m_deadline(deadline), m_grace(grace_ns) {}

  // At `now` (on every wake-up, after the messages already queued were read: extend() tells a late
  // extension from one that was only read late).
  [[nodiscard]] Action check(std::int64_t now);

  // A deadline message from mongolock (a renewal succeeded), sent at `sent`: moves the deadline to `at`
  // when it was sent before the current deadline (the renewal was confirmed in time, however late the
  // guardian reads it: stopped with the job's group, starved); ignored when sent at or after it, and once
  // stopping (a lease the guardian gave up on is not taken back).
  void extend(std::int64_t at, std::int64_t sent);
  // An extension whose send time is not known (the simulator, which checks the deadline first): as read.
  void extend(std::int64_t at) { extend(at, std::numeric_limits<std::int64_t>::min()); }

  // A stop message (mongolock lost the lease, or --timeout): stop now, SIGKILL at `kill_by` at the
  // latest (a stop while already stopping only brings the SIGKILL forward).
  [[nodiscard]] Action stop(std::int64_t now, std::int64_t kill_by);

  // When the guardian must wake up next: the deadline, or the SIGKILL while stopping (k_never: never).
  [[nodiscard]] std::int64_t next_wakeup() const { return m_state == State::stopping ? m_kill_at : m_deadline; }

  [[nodiscard]] State state() const { return m_state; }

private:
  // Enters stopping with the SIGKILL `grace` after `now`; true when a SIGTERM should go first (grace > 0).
  bool begin_stop(std::int64_t now, std::int64_t grace);

  State m_state = State::armed;
  std::int64_t m_deadline;
  std::int64_t m_grace;
  std::int64_t m_kill_at = k_never;
};

} // namespace mongolock
