#include <mongolock/error.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/token.hpp>

#include <fmt/format.h>

namespace mongolock {

std::optional<LockRecord> Locker::try_acquire(const AcquireRequest& request, bool ensure_index) {
  (void)m_store.clock(); // connect first, so the server's time is read right after the handshake
  if (ensure_index) m_store.ensure_indexes();
  LockRecord lock;
  lock.program = request.name;
  lock.process = request.process;
  lock.token = make_token();
  lock.ttl = request.ttl;
  lock.user = request.user;
  lock.command = request.command;
  const auto colon = request.process.rfind(':');
  lock.host = request.process.substr(0, colon);

  const auto insert = [&] {
    const auto now = m_store.clock().now();
    lock.acquired_at = now;
    lock.renewed_at = now;
    lock.expires_at = now + request.ttl;
    try {
      return m_store.insert(lock);
    } catch (const Error&) {
      // A failed insert (timeout, write concern error) may still have been applied: delete exactly this
      // acquisition, by _id and token, so it cannot block the name until it expires.
      try {
        (void)m_store.remove(LockSelector{lock.program, lock.id, lock.token, std::nullopt});
      } catch (const Error& cleanup) {
        m_log.warning(fmt::format("could not clean up after the failed insert ({}); if it was written, lock '{}' "
                                  "stays held until {}",
                                  cleanup.what(), lock.program, format_time(lock.expires_at)));
      }
      throw;
    }
  };

  if (insert()) return lock;
  const auto cutoff = m_store.clock().now() - request.takeover_grace;
  if (m_store.purge_expired(request.name, cutoff) != 1) return std::nullopt;
  m_log.info(fmt::format("lock '{}' had expired; its holder's lock was purged", request.name));
  if (insert()) return lock;
  return std::nullopt;
}

bool Locker::release(const LockSelector& which) { return m_store.remove(which) == 1; }

bool Locker::renew(LockRecord& lock, Millis ttl, SteadyTime sent) {
  const auto server_sent = m_store.clock().at(sent);
  const auto expires = server_sent + ttl;
  if (m_store.renew(lock.id, lock.token, expires, server_sent, ttl) == 0) return false;
  lock.expires_at = expires;
  lock.renewed_at = server_sent;
  lock.ttl = ttl;
  return true;
}

std::optional<LockRecord> Locker::holder(std::string_view name) { return m_store.find(name); }

std::string Locker::describe_holder(const LockRecord& lock) {
  const auto now = m_store.clock().now();
  const auto left = lock.expires_at - now;
  const auto user = lock.user.empty() ? std::string() : fmt::format(" (user {})", lock.user);
  const auto expiry = left > Millis(0) ? fmt::format("expires in {}", format_duration(left))
                                       : fmt::format("expired {} ago", format_duration(-left));
  return fmt::format("held by {}{} since {}, {}", lock.process, user, format_time(lock.acquired_at), expiry);
}

} // namespace mongolock
