#include <mongolock/command_support.hpp>
#include <mongolock/error.hpp>
#include <mongolock/identity.hpp>
#include <mongolock/liveness.hpp>
#include <mongolock/process.hpp>
#include <mongolock/schedule.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <memory>

namespace mongolock {

void validate_take(const TakeOptions& take) {
  if (take.slots < 1 || take.slots > k_max_slots) {
    throw usage_error(fmt::format("--slots {} is out of range; give 1 to {}", take.slots, k_max_slots));
  }
  if (take.splay > k_max_splay) {
    throw usage_error(fmt::format("--splay {} is too long; give at most {}", format_duration(take.splay),
                                  format_duration(k_max_splay)));
  }
}

AcquireRequest make_request(const GlobalOptions& global, const TakeOptions& take, std::string name, std::string process,
                            Millis ttl, const Log* log) {
  AcquireRequest request;
  request.name = std::move(name);
  request.process = std::move(process);
  request.user = user_name();
  request.ttl = ttl;
  request.takeover_grace = global.takeover_grace;
  request.min_hold = take.min_hold;
  request.slots = take.slots;
  request.fence = take.fence;
  // A lock whose holder provably died on this host is taken over at once (liveness.hpp; issue #17).
  request.holder_dead = [self = own_process_identity(), host = host_name(), log,
                         said = std::make_shared<std::string>()](const LockRecord& lock, bool taking_over) {
    auto verdict = holder_verdict(lock, self, host, taking_over);
    if (log != nullptr && !verdict.why_not.empty() && verdict.why_not != *said) {
      log->debug(verdict.why_not);
      *said = std::move(verdict.why_not);
    }
    return verdict.dead;
  };
  return request;
}

// Reports who holds the lock that was not acquired; `held_by` (when given) gets the first holder's host:pid.
int report_held(const GlobalOptions& global, Locker& locker, const AcquireOutcome& outcome, const Log& log,
                std::string* held_by, std::string* held_lock) {
  // The holders the attempt read (no second round trip); read them when it did not (e.g. a --wait).
  const auto holders = outcome.holders.empty() ? locker.holders(outcome.held) : outcome.holders;
  if (held_by != nullptr && !holders.empty()) *held_by = holders.front().process;
  if (held_lock != nullptr && !holders.empty()) *held_lock = holders.front().id;
  if (holders.empty()) {
    // The holder released between our attempt and this read; the name was held when we tried.
    log.info(fmt::format("lock '{}' is held (its holder released it just now; try again)", outcome.held));
  } else if (holders.size() == 1 && holders.front().slot <= 1) {
    log.info(fmt::format("lock '{}' is {}", outcome.held, locker.describe_holder(holders.front())));
  } else {
    // One line, as every message: the slots one after another.
    std::string slots;
    for (const auto& h : holders)
      slots += fmt::format("{}slot {} {}", slots.empty() ? "" : "; ", std::max(h.slot, 1), locker.describe_holder(h));
    log.info(fmt::format("all {} slots of lock '{}' are held: {}", holders.size(), outcome.held, slots));
  }
  return global.conflict_exit_code;
}

// Sleeps between attempts of `run --wait`, waking early when a forwarded signal arrives (it is raised
// again, stays pending while blocked, and is handled after the wait). Returns false on a signal.
bool sleep_unless_signalled(Millis pause) {
  const auto signo = take_forwarded_signal(pause);
  if (signo) raise(*signo);
  return !signo;
}

// --splay: sleeps this host's offset for `names` (-v prints it) and shortens `wait` by it, so that a --wait
// deadline counts from the start. Returns false when a forwarded signal ended the sleep (raised again:
// pending, as sleep_unless_signalled() leaves it).
bool splay_before_acquiring(Millis splay, const std::vector<std::string>& names, std::optional<Millis>& wait,
                            const Log& log) {
  if (splay <= Millis(0)) return true;
  const auto offset = splay_offset(host_name(), names, splay);
  log.debugf("--splay {}: this host starts {} late", format_duration(splay), format_duration(offset));
  if (wait && *wait != k_wait_forever) wait = std::max(Millis(0), *wait - offset);
  return offset <= Millis(0) || sleep_unless_signalled(offset);
}

// Releases the locks a run holds; failures are reported, never thrown (the command has already ended).
// `lease_lost`: the run already reported the loss, so a lock found gone is expected.
RunRelease release_after_run(Locker& locker, const std::vector<LockRecord>& locks, const Log& log, bool lease_lost) {
  auto result = RunRelease::released;
  for (const auto& lock : locks) {
    try {
      const auto outcome = locker.release(LockSelector{.program = lock.program, .id = lock.id, .token = lock.token});
      if (outcome.kind == ReleaseOutcome::released) {
        log.debugf("released lock '{}'", lock.program);
      } else if (outcome.kind == ReleaseOutcome::min_hold) {
        log.info(
            fmt::format("lock '{}' stays held until {} (--min-hold)", lock.program, format_time(outcome.hold_until)));
      } else if (lease_lost) {
        log.debugf("lock '{}' was gone already (its lease was lost)", lock.program);
      } else {
        log.error(fmt::format("lock '{}' was no longer held when the command ended: the lease was lost", lock.program));
        if (result == RunRelease::released) result = RunRelease::gone;
      }
    } catch (const Error& e) {
      log.error(fmt::format("could not release lock '{}' ({}); it expires on its own, at {} at the latest",
                            lock.program, e.what(), format_time(lock.expires_at)));
      result = RunRelease::failed;
    }
  }
  return result;
}

} // namespace mongolock
