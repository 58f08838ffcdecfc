#include <mongolock/error.hpp>
#include <mongolock/identity.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/text.hpp>
#include <mongolock/token.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace mongolock {

namespace {

// Whether `lock` was written by this caller's identity: the same "host:pid" is not enough (two containers
// that share a host name, mongolock PID 1 in each: both "vm:1"; red team of issue 26, X7r), so the boot, PID
// namespace and process start the document records must be the caller's too (place_matches()).
bool same_caller(const LockRecord& lock, const AcquireRequest& request) {
  return lock.process == request.process &&
         place_matches(lock, HolderPlace{request.boot_id, request.pid_ns, request.pid_start});
}

// Whether `lock` names this caller's full identity: the same "host:pid", and a boot, PID namespace and
// process start that both the document and the request have, all equal (a process that reuses the pid has
// another start); none of them unknown (k_unknown_place, k_unknown_start).
bool same_full_identity(const LockRecord& lock, const AcquireRequest& request) {
  const auto known = [](const std::string& value) { return !value.empty() && value != k_unknown_place; };
  return lock.process == request.process && known(request.boot_id) && known(request.pid_ns) &&
         request.pid_start.value_or(0) > 0 && lock.boot_id == request.boot_id && lock.pid_ns == request.pid_ns &&
         lock.pid_start == request.pid_start;
}

} // namespace

std::string slot_program(std::string_view name, int slot) {
  return slot > 1 ? fmt::format("{}#{}", name, slot) : std::string(name);
}

std::string quoted_programs(const std::vector<LockRecord>& locks) {
  std::vector<std::string> programs;
  programs.reserve(locks.size());
  for (const auto& lock : locks)
    programs.push_back(lock.program);
  return quoted_list(programs);
}

// The lock document of `request`, with a new token; times, program and _id are set when it is inserted.
LockRecord Locker::new_lock(const AcquireRequest& request) {
  LockRecord lock;
  lock.name = request.name;
  lock.process = request.process;
  lock.token = make_token();
  lock.ttl = request.ttl;
  lock.user = request.user;
  lock.command = request.command;
  if (!request.command.empty()) lock.run_ttl = request.ttl;
  lock.host = request.process.substr(0, request.process.rfind(':'));
  lock.ticket = request.ticket;
  lock.replace_seq = request.replace_seq;
  lock.boot_id = request.boot_id;
  lock.pid_ns = request.pid_ns;
  lock.pid_start = request.pid_start;
  return lock;
}

// Takes the name's next fencing token and stores it in `lock` (by _id and token). On failure the lock is
// released and the error thrown on (76 when the lock was lost before the token was stored).
void Locker::assign_fence(const std::string& name, LockRecord& lock) {
  try {
    const auto fence = m_store.next_fence(name);
    if (m_store.set_fence(LockSelector{.program = lock.program, .id = lock.id, .token = lock.token}, fence) != 1) {
      throw Error(k_exit_lease_lost,
                  fmt::format("lock '{}' was lost before its fencing token was stored", lock.program));
    }
    lock.fence = fence;
  } catch (const Error&) {
    release_quietly(lock);
    throw;
  }
}

std::optional<LockRecord> Locker::try_acquire(const AcquireRequest& request, bool ensure_index,
                                              std::vector<LockRecord>* seen) {
  (void)m_store.clock(); // connect first, so the server's time is read right after the handshake
  if (ensure_index) m_store.ensure_indexes();
  LockRecord lock = new_lock(request);
  const auto insert = [&] {
    // Times from the latest the server's clock can read: the lease never looks shorter to others.
    lock.sent = LeaseClock::now();
    const auto now = m_store.clock().latest(lock.sent);
    lock.acquired_at = now;
    lock.renewed_at = now;
    lock.expires_at = now + request.ttl;
    lock.hold_until = request.min_hold > Millis(0) ? now + request.min_hold : ServerTime{};
    try {
      return m_store.insert(lock);
    } catch (const Error&) {
      // A failed insert (timeout, write concern error) may still have been applied: delete exactly this
      // acquisition, by _id and token, so it cannot block the name until it expires.
      try {
        (void)m_store.remove(LockSelector{.program = lock.program, .id = lock.id, .token = lock.token});
      } catch (const Error& cleanup) {
        m_log.warning(fmt::format("could not clean up after the failed insert ({}); if it was written, lock '{}' "
                                  "stays held until {}",
                                  cleanup.what(), lock.program, format_time(lock.expires_at)));
        // This caller's next attempt (or, through request.orphaned, its next acquire) may take it over.
        m_orphans.push_back(lock);
        if (request.orphaned) request.orphaned(lock);
      }
      throw;
    }
  };

  bool acquired = false;
  if (seen != nullptr) seen->clear();
  for (int slot = 1; slot <= request.slots && !acquired; ++slot) {
    lock.program = slot_program(request.name, slot);
    lock.slot = request.slots > 1 ? slot : 0;
    lock.waiters = request.waiters;
    lock.id.clear();
    acquired = insert();
    if (acquired) break;
    // Held: read the holder (one find, which the message needs anyway) and purge it only when it expired
    // more than the takeover grace ago, by its _id: a live holder costs no write.
    const auto current = m_store.find(lock.program);
    if (current && current->id == lock.id && current->token == lock.token) {
      // Our own insert, applied although it was reported as a duplicate: a retry of it (the driver's
      // retryable write after a lost reply, on a server that does not recognize the retry) found it.
      m_log.debugf("lock '{}': the name is held by this very insert (its reply was lost and the retry found it)",
                   lock.program);
      acquired = true;
      break;
    }
    if (current) {
      const auto purged = free_held(request, *current);
      if (!purged) {
        if (seen != nullptr && !expired_past_grace(*current, request)) seen->push_back(*current);
        continue; // held (or renewed or taken over meanwhile)
      }
      // Waiters queued for the purged lock still wait: the release of this one must wake them.
      lock.waiters = lock.waiters || purged->waiters;
    }
    lock.id.clear();
    acquired = insert(); // purged, or released between the insert and the read: once more
  }
  if (!acquired) return std::nullopt;

  if (request.fence) assign_fence(request.name, lock);
  return lock;
}

std::optional<LockRecord> Locker::free_held(const AcquireRequest& request, const LockRecord& current) {
  if (own_orphan(request, current)) return take_own_orphan(current);
  if (same_caller(current, request) && !m_own_warned) {
    // The same holder identity: an earlier acquire of this caller (a lock is not reentrant), maybe one
    // whose reply was lost and whose clean-up failed (issue 27); say how to free it.
    m_own_warned = true;
    m_log.warning(fmt::format("lock '{}' is held by this caller's own identity {} (an earlier acquire, maybe one "
                              "whose reply was lost); 'mongolock release {}' from the same shell releases it",
                              current.program, request.process, request.name));
  }
  return purge_stale(request, current);
}

bool Locker::own_orphan(const AcquireRequest& request, const LockRecord& current) const {
  if (!same_full_identity(current, request)) return false;
  const bool here = std::any_of(m_orphans.begin(), m_orphans.end(), [&](const LockRecord& o) {
    return o.program == current.program && o.id == current.id && o.token == current.token;
  });
  return here || (request.own_orphan && request.own_orphan(current));
}

std::optional<LockRecord> Locker::take_own_orphan(const LockRecord& current) {
  auto removed =
      m_store.remove_returning(LockSelector{.program = current.program, .id = current.id, .token = current.token});
  if (removed) {
    std::erase_if(m_orphans, [&](const LockRecord& o) { return o.id == current.id; });
    m_log.info(fmt::format("lock '{}' was held by this caller's own earlier acquire, whose reply was lost and whose "
                           "clean-up failed (the same {}, boot, PID namespace and process start); taken over",
                           current.program, current.process));
  }
  return removed;
}

void Locker::release_quietly(const LockRecord& lock) {
  try {
    (void)m_store.remove(LockSelector{.program = lock.program, .id = lock.id, .token = lock.token});
  } catch (const Error& e) {
    m_log.warning(fmt::format("could not release lock '{}' ({}); it expires at {}", lock.program, e.what(),
                              format_time(lock.expires_at)));
  }
}

bool Locker::attempt_all(const std::vector<AcquireRequest>& requests, bool ensure_index, AcquireOutcome& outcome) {
  try {
    for (const auto& request : requests) {
      auto lock = try_acquire(request, ensure_index, &outcome.holders);
      if (!lock) {
        outcome.held = request.name;
        break;
      }
      outcome.locks.push_back(std::move(*lock));
    }
  } catch (const Error&) {
    for (auto it = outcome.locks.rbegin(); it != outcome.locks.rend(); ++it)
      release_quietly(*it);
    outcome.locks.clear();
    throw;
  }
  if (outcome.locks.size() == requests.size()) return true;
  // All or none: give back what this attempt took, newest first.
  for (auto it = outcome.locks.rbegin(); it != outcome.locks.rend(); ++it)
    release_quietly(*it);
  outcome.locks.clear();
  return false;
}

Locker::Busy Locker::busy_name(const std::vector<AcquireRequest>& requests) {
  for (const auto& request : requests) {
    const auto now = m_store.clock().earliest_now(); // a lock counts as free only once expired for sure
    std::map<std::string, ServerTime> taken;         // program -> when it may be taken over
    std::optional<std::int64_t> replace_seq;
    for (const auto& lock : m_store.list(request.name)) {
      if (lock.expires_at <= now - request.takeover_grace) continue;
      // A holder provably dead on this host (no server command: /proc and its holder file): free now.
      if (request.holder_dead && lock.hold_until <= now && request.holder_dead(lock, false)) continue;
      taken[lock.program] = lock.expires_at + request.takeover_grace;
      // A run's lock its holder may release without an event (not marked, held less than k_wake_window):
      // look again once that window has passed for sure; from then on its release wakes the queue.
      if (const auto quiet_until = lock.acquired_at + k_wake_window;
          !lock.waiters && !lock.command.empty() && quiet_until > now) {
        taken[lock.program] = std::min(taken[lock.program], quiet_until);
      }
      if (lock.replace_seq && (!replace_seq || *lock.replace_seq < *replace_seq)) replace_seq = lock.replace_seq;
    }
    bool free = false;
    auto takeover_at = ServerTime::max();
    for (int slot = 1; slot <= request.slots && !free; ++slot) {
      const auto it = taken.find(slot_program(request.name, slot));
      free = it == taken.end();
      if (!free) takeover_at = std::min(takeover_at, it->second);
    }
    if (!free) return Busy{request.name, takeover_at, replace_seq};
  }
  return {};
}

int Locker::mark_if_waited(std::vector<LockRecord>& locks) {
  std::vector<std::string> names;
  for (const auto& lock : locks) {
    if (!lock.waiters && !lock.mark_next && std::find(names.begin(), names.end(), lock.name) == names.end()) {
      names.push_back(lock.name);
    }
  }
  if (names.empty()) return 0;
  const auto now = m_store.clock().earliest_now();
  std::vector<std::string> waited;
  for (const auto& ticket : m_store.tickets(names)) {
    if (ticket.expires_at > now) waited.push_back(ticket.name);
  }
  int marked = 0;
  for (auto& lock : locks) {
    if (lock.waiters || lock.mark_next || std::find(waited.begin(), waited.end(), lock.name) == waited.end()) continue;
    lock.mark_next = true; // set by the next renewal: the holder's one update, never a second one
    ++marked;
    m_log.debugf("waiters are queued for lock '{}': the next renewal marks it", lock.program);
  }
  return marked;
}

bool Locker::expired_past_grace(const LockRecord& current, const AcquireRequest& request) {
  return current.expires_at <= m_store.clock().earliest_now() - request.takeover_grace;
}

std::optional<LockRecord> Locker::purge_stale(const AcquireRequest& request, const LockRecord& current) {
  const auto expired_by = m_store.clock().earliest_now() - request.takeover_grace; // expired for sure
  if (current.expires_at <= expired_by) {
    auto purged =
        m_store.remove_returning(LockSelector{.program = current.program, .id = current.id, .expired_by = expired_by});
    if (purged) {
      m_log.info(purged->released_at
                     ? fmt::format("lock '{}' was released and its minimum hold has ended; purged", current.program)
                     : fmt::format("lock '{}' had expired; its holder's lock was purged", current.program));
    }
    return purged;
  }
  if (!request.holder_dead || !request.holder_dead(current, true)) return std::nullopt;
  // A dead holder's --min-hold still holds: the lock is taken over early only once its hold_until has passed
  // for sure (a lock released within its hold, released_at set, keeps it too).
  const auto now = m_store.clock().earliest_now();
  if (current.hold_until > now) return std::nullopt;
  auto purged = m_store.remove_returning(
      LockSelector{.program = current.program, .id = current.id, .token = current.token, .hold_ends_by = now});
  if (purged) {
    m_log.info(fmt::format(
        "lock '{}' was held by {}, which no longer runs on this host, nor does its guardian, and nothing is left in "
        "its job's cgroup and process group; taken over",
        current.program, purged->process));
  }
  return purged;
}

bool wakes_waiters(const LockRecord& lock, ServerTime released_at) {
  return lock.waiters || (!lock.command.empty() && released_at - lock.acquired_at >= k_wake_window);
}

namespace {

// Appends the wake-up event of released `lock`. A failure is a warning when waiters were known (the lock was
// marked `waiters`); when the event was only in case a waiter joined after the holder's last look at the queue
// (wakes_waiters()), there may be none, and the waiters' own checks find the free lock anyway: a -v line
// (the first such event of a collection can meet FerretDB SQLite's "database is locked" while it creates
// the events collection; stop 4's CI warned in suites without waiters).
// `replaced`: a k_replace_event instead of the event naming its ticket (Locker::wake_as_replaced()).
void append_wake_event(LockStore& store, const LockRecord& lock, const Log& log, bool replaced) {
  try {
    store.append_event(lock.name, replaced ? k_replace_event : std::string_view(lock.ticket));
  } catch (const Error& e) {
    if (lock.waiters) {
      log.warning(
          fmt::format("could not wake the waiters of '{}' ({}); they notice within two seconds", lock.name, e.what()));
    } else {
      log.debugf("could not append the wake-up event of '{}' for a waiter that may have joined since the last "
                 "look at the queue ({}); waiters notice within two seconds",
                 lock.name, e.what());
    }
  }
}

} // namespace

bool Locker::remove_and_wake(const LockSelector& which) {
  const auto removed = m_store.remove_returning(which);
  if (!removed) return false;
  if (m_replaced || wakes_waiters(*removed, m_store.clock().latest_now()))
    append_wake_event(m_store, *removed, m_log, m_replaced);
  return true;
}

ReleaseOutcome Locker::release(const LockSelector& which) {
  // By holder alone (no _id, no token): the acquisition that holds the name now, found first and then released by
  // its _id, so that a copy of this release that lands late (a slow network, a driver's resend) cannot delete the
  // holder's next acquisition (the simulator's operator: a late `release --process H` deleted H's later lock, and
  // another host ran beside H). The find is the decision: an acquired_before bound from the clock estimate cannot
  // tell an acquisition just before the command from one just after it (acquired_at is the acquirer's estimate).
  if (!which.id && !which.token) {
    const auto current = m_store.find(which.program);
    if (!current || !holds(which, *current)) return {ReleaseOutcome::not_holder, {}, {}};
    auto exact = which;
    exact.id = current->id;
    auto outcome = release_found(exact, *current, m_store.clock().earliest_now());
    if (outcome.kind == ReleaseOutcome::not_holder) outcome.found = current->id;
    return outcome;
  }
  const auto now = m_store.clock().earliest_now(); // the minimum hold has ended for sure before this
  auto no_hold_left = which;
  no_hold_left.hold_ends_by = now;
  if (remove_and_wake(no_hold_left)) return {ReleaseOutcome::released, {}, {}};
  // Not deleted: maybe the lock is ours but within its minimum hold; then it ends at hold_until instead.
  const auto current = m_store.find(which.program);
  if (!current) return {ReleaseOutcome::not_holder, {}, {}};
  // By _id, only that acquisition: in_hold below selects current's _id (found by the simulator's operator: a
  // release by _id of an earlier acquisition marked the next holder's lock released within its minimum hold).
  if (which.id && *which.id != current->id) return {ReleaseOutcome::not_holder, {}, {}};
  return release_found(which, *current, now);
}

bool Locker::holds(const LockSelector& which, const LockRecord& current) {
  return (!which.process || current.process == *which.process) &&
         (!which.place || place_matches(current, *which.place));
}

ReleaseOutcome Locker::release_found(const LockSelector& which, const LockRecord& current, ServerTime now) {
  if (current.released_at) return {ReleaseOutcome::not_holder, {}, {}};
  if (current.hold_until <= now || current.expires_at <= now) {
    // No hold left (or a document without hold_until), or the lease already ran out, so there is nothing
    // to keep: delete it if it is ours, whatever its hold_until says.
    if (remove_and_wake(which)) return {ReleaseOutcome::released, {}, {}};
    return {ReleaseOutcome::not_holder, {}, {}};
  }
  auto in_hold = which;
  in_hold.id = current.id;
  in_hold.not_released = true;
  in_hold.expires_after = m_store.clock().latest_now();
  if (m_store.mark_released(in_hold, now, current.hold_until) != 1) return {ReleaseOutcome::not_holder, {}, {}};
  // The head learns the earlier expiry now rather than at its next check.
  if (m_replaced || wakes_waiters(current, m_store.clock().latest_now()))
    append_wake_event(m_store, current, m_log, m_replaced);
  return {ReleaseOutcome::min_hold, current.hold_until, {}};
}

namespace {

// Whether `current` meets every condition of the renewal filter `which` but its renewed_before: still named by
// `which`, not released, unexpired, and stamped at or after this renewal by another renewal of the same
// acquisition (`renew --token` from another process, whose clock estimate may run ahead: red team 4, F3).
// Only a filter that names the acquisition (its _id or token) proves that: by holder alone, a later
// acquisition of the same holder looks the same (red team 6, F1: a late `renew --process H` cut H's next
// acquisition to the old TTL, and a contender took the lock while H held it).
bool outstamped(const LockRecord& current, const LockSelector& which) {
  const auto is = [](const auto& wanted, const auto& value) { return !wanted || *wanted == value; };
  if (!which.id && !which.token) return false;
  return which.renewed_before && current.renewed_at >= *which.renewed_before && is(which.id, current.id) &&
         is(which.token, current.token) && is(which.process, current.process) &&
         (!which.place || place_matches(current, *which.place)) && !current.released_at &&
         (!which.run_ttl_at_most || current.run_ttl <= *which.run_ttl_at_most) &&
         (!which.expires_after || current.expires_at > *which.expires_after);
}

} // namespace

std::optional<ServerTime> Locker::renew(const LockSelector& which, Millis ttl, bool mark_waiters) {
  // renewed_at from the earliest the server's clock can read, so it is never in the server's future: a slow
  // handshake puts latest() up to its round trip ahead, and a future renewed_at made the holder's next
  // renewal match nothing (red team 4, F3: a run whose job renewed its own lock lost its lease). The expiry
  // and the "unexpired" condition from the latest, as everywhere (a lease never looks shorter to others).
  const auto at = LeaseClock::now();
  auto stamp = m_store.clock().earliest(at);
  auto live = which;
  live.expires_after = m_store.clock().latest(at);
  live.not_released = true;
  live.run_ttl_at_most = ttl; // never below a run's own lease (red team 8, F1)
  for (int attempt = 0;; ++attempt) {
    live.renewed_before = stamp; // a late copy of this renewal never undoes a newer one
    const auto expires = std::max(*live.expires_after, stamp) + ttl;
    if (m_store.renew(live, expires, stamp, ttl, mark_waiters) == 1) {
      refuse_if_ended(which, expires);
      return expires;
    }
    // Renewed at or after this stamp by the holder (its heartbeat stamps from the latest): once more above it.
    const auto current = attempt == 0 ? m_store.find(which.program) : std::nullopt;
    // Unexpired now, not at the command's start (red team 7, F3): a renewal that reached the server late must
    // not revive a lock that expired meanwhile (FerretDB refuses the server-time condition that would).
    live.expires_after = m_store.clock().latest(LeaseClock::now());
    if (!current || !outstamped(*current, live)) return std::nullopt;
    m_log.debugf("lock '{}' was renewed by its holder at {}, not before this renewal's stamp; renewing above it",
                 which.program, format_time(current->renewed_at));
    stamp = current->renewed_at + Millis(1);
  }
}

void Locker::refuse_if_ended(const LockSelector& which, ServerTime expires) {
  const auto now = m_store.clock().latest(LeaseClock::now());
  if (expires > now) return;
  throw Error(which.token ? k_exit_token_gone : k_exit_not_holder,
              fmt::format("lock '{}': the renewal reached the server after the lease had ended (renewed until {}, "
                          "{} before the server's time now, as this host estimates it); the lock may have been "
                          "taken: acquire it again",
                          which.program, format_time(expires), format_duration(now - expires)));
}

bool Locker::renew(LockRecord& lock, Millis ttl, LocalTime sent) {
  for (int attempt = 0;; ++attempt) {
    const auto result = renew_once(lock, ttl, sent);
    if (result.matched) return true;
    // Matched nothing: gone, unless another renewal of this acquisition (`renew --token` by the job or an
    // operator) stamped renewed_at at or after ours (red team 4, F3: its clock estimate after a slow
    // handshake runs ahead). Then the lock is still ours and live: stamp above it and renew once more. The
    // stamp only grows (stamp_sent), so a late copy of any earlier renewal still matches nothing.
    const auto current = attempt == 0 ? m_store.find(lock.program) : std::nullopt;
    if (!current || !outstamped(*current, result.which)) return false;
    m_log.debugf("lock '{}' was renewed by another process with its token, stamped {} (not before this renewal's "
                 "{}); renewing above it",
                 lock.program, format_time(current->renewed_at), format_time(*result.which.renewed_before));
    lock.stamp_sent = std::max(lock.stamp_sent, current->renewed_at);
  }
}

Locker::RenewalSent Locker::renew_once(LockRecord& lock, Millis ttl, LocalTime sent) {
  // From the latest the server's clock can read, and after every earlier renewal's stamp, confirmed or
  // not (a new handshake may have moved the estimate back): renewed_at grows in send order, so an earlier
  // renewal whose outcome was unknown matches nothing once a later one has been applied (renewed_before),
  // however late it lands (issue 27: the renewal call bound abandons hung calls).
  const auto server_sent =
      std::max(m_store.clock().latest(sent), std::max(lock.renewed_at, lock.stamp_sent) + Millis(1));
  lock.stamp_sent = server_sent;
  const auto expires = server_sent + ttl;
  // renewed_before: a renewal that reaches the server after a newer one (a retried call whose first copy
  // was still on its way) matches nothing, so it cannot move the expiry back. not_released: nor can one that
  // reaches it after the run released into its minimum hold (expires_at = hold_until; issue 26 item 10).
  const LockSelector which{.program = lock.program,
                           .id = lock.id,
                           .token = lock.token,
                           .expires_after = server_sent,
                           .renewed_before = server_sent,
                           .not_released = true};
  const bool mark = lock.mark_next && !lock.waiters;
  if (m_store.renew(which, expires, server_sent, ttl, mark) == 0) return {false, which};
  lock.expires_at = expires;
  lock.renewed_at = server_sent;
  lock.ttl = ttl;
  lock.sent = sent;
  if (mark) {
    lock.waiters = true;
    m_log.debugf("marked lock '{}': waiters are queued, its release wakes them", lock.program);
  }
  return {true, which};
}

std::vector<LockRecord> Locker::holders(std::string_view name) {
  auto locks = m_store.list(name);
  if (locks.empty()) {
    if (auto plain = m_store.find(name)) locks.push_back(std::move(*plain)); // written without `name`
  }
  return locks;
}

std::string Locker::describe_holder(const LockRecord& lock) {
  const auto now = m_store.clock().now();
  const auto left = lock.expires_at - now;
  const auto user = lock.user.empty() ? std::string() : fmt::format(" (user {})", lock.user);
  const auto expiry = left > Millis(0) ? fmt::format("expires in {}", format_duration(left))
                                       : fmt::format("expired {} ago", format_duration(-left));
  const auto released =
      lock.released_at ? fmt::format(", released at {} but kept for its minimum hold", format_time(*lock.released_at))
                       : std::string();
  if (!lock.malformed.empty()) {
    // Not a lease the protocol can end: say so, and the way out, instead of an expiry that never comes.
    return fmt::format("held by a malformed lock document ({}; holder '{}') that never expires (once nobody "
                       "uses it: 'mongolock break {} --force')",
                       lock.malformed, lock.process, lock.program.empty() ? lock.name : lock.program);
  }
  return fmt::format("held by {}{} since {}{}, {}", holder_label(lock.process, lock.pid_ns), user,
                     format_time(lock.acquired_at), released, expiry);
}

} // namespace mongolock
