// Lease supervision for `run`: renews the lease on a heartbeat thread while the command runs, forwards
// signals, enforces --timeout, and stops the command before a lost lease could let another holder in.
#pragma once

#include <mongolock/lease.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/process.hpp>

#include <optional>

namespace mongolock {

// What a lost lease does to the command: SIGTERM then SIGKILL after the kill grace (term), SIGKILL at
// once (kill), or nothing but a warning (ignore: the command may then overlap another holder's).
enum class OnLost { term, kill, ignore };

struct RunPolicy {
  LeaseTiming lease;
  OnLost on_lost = OnLost::term;
  std::optional<Millis> timeout; // --timeout: stop the command after this long, exit 124
  Millis kill_after{5000};       // --kill-after: SIGTERM to SIGKILL for --timeout
  // run --replace: between renewals, the heartbeat reads the queue of the run's names every
  // replace_check; a live ticket of a replacing run (WaitQueue::is_replace) of another process ends the
  // run as replaced (SIGTERM, SIGKILL after the kill grace; the lease is renewed meanwhile).
  bool replaceable = false;
  Millis replace_check{500};
};

// How a supervised run ended.
struct RunOutcome {
  int command_status = 0;  // the command's exit code (128+N when killed by signal N)
  int command_signal = 0;  // N when the command was killed by signal N, else 0
  bool lease_lost = false; // the lease was lost while the command ran
  bool ran_out = false;    // ...because no renewal succeeded in time (not because the lock was gone)
  bool stalled = false;    // ...because mongolock itself was stopped or starved of CPU past the deadline
  bool timed_out = false;  // --timeout stopped the command
  std::string replaced_by; // run --replace: the replacing run ("host:pid") that stopped the command; "" if none
  // The lease's renew deadline (LeaseClock) when the heartbeat stopped: after it, the lease may have ended
  // on the server and another host taken the lock (run --once-per records a success only before it).
  LocalTime deadline{};
};

// The local time (LeaseClock) by which the job must be stopped unless a renewal succeeds: the earliest
// LockRecord::sent of `locks` (when the insert or last renewal was sent, on this host's clock: never a
// time mapped back from the server's clock, whose estimate may be off) + timing.renew_deadline. `store`
// is not used (kept for the callers). Never throws.
[[nodiscard]] LocalTime lease_deadline(LockStore& store, const std::vector<LockRecord>& locks,
                                       const LeaseTiming& timing);

// Supervises `child` while it holds `locks` (all of them; losing any one is losing the lease): a heartbeat thread
// renews the lease every policy.lease.renew_interval (sooner after a failure); when no renewal has succeeded for
// renew_deadline since the last successful one was sent, or a renewal finds the lease gone, the lease is lost and
// policy.on_lost applies (Child::stop_job(): SIGTERM to the job, SIGKILL of all of it after the kill grace). Unless
// on_lost is ignore, every successful renewal also moves the guardian's watchdog deadline (Child::extend_deadline()),
// so the job is stopped in time even while mongolock does not run; the child must have been spawned with the
// deadline of the locks as acquired (lease_deadline()). Every wake-up checks the lease first. Signals in
// forwarded_signals() are forwarded to the job's process group. A job stop (Ctrl-Z) suspends mongolock
// (Child::suspend()); continued after the renew deadline, the job is killed instead of continued.
// Returns when the whole job has ended (the guardian is always reaped) and the heartbeat has stopped; does
// not release the lock. `signals` must be the block created before the heartbeat thread and the child.
// The locker's store is used only by the heartbeat thread until this returns. Throws Error (70) when
// signalfd/eventfd/poll fail; the Child's destructor then kills the job.
[[nodiscard]] RunOutcome supervise(Locker& locker, std::vector<LockRecord>& locks, Child& child,
                                   const SignalBlock& signals, const RunPolicy& policy, const Log& log);

} // namespace mongolock
