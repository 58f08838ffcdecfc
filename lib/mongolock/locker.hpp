// The lock protocol on top of a LockStore: acquire, release, renew and inspect one lock name.
//
// Acquire inserts a document whose `program` is unique (unique index "program_1"). On a duplicate key it
// purges the name's expired document (expires_at <= now - takeover grace, server clock) and, only if
// exactly one was purged, inserts once more. Every acquisition has its own _id, and every later
// conditional write names that _id or the token, so a write can only touch the acquisition it targets,
// even on servers whose conditional writes read then write (FerretDB v1).
#pragma once

#include <mongolock/lock_store.hpp>
#include <mongolock/log.hpp>

#include <optional>

namespace mongolock {

struct AcquireRequest {
  std::string name;            // lock name, already validated
  std::string process;         // holder identity "host:pid"
  std::string user;            // the holder's user name, informational
  Millis ttl{0};               // lease length
  Millis takeover_grace{2000}; // purge expired locks only this long after expires_at
  std::string command;         // run: the command's name (never its arguments); "" otherwise
};

class Locker {
public:
  Locker(LockStore& store, const Log& log) : m_store(store), m_log(log) {}

  // One acquisition attempt. With `ensure_index`, first creates the unique index (createIndexes). Then
  // insert; on duplicate key, purge an expired lock and insert again. Returns the new lock, or nullopt
  // when the name is held. Server commands: 1 or 2 when free (insert, plus createIndexes), at most 3
  // (4 with the index) when held or taken over. Throws Error (exit 69) on server errors; when an insert
  // failed in a way that may still have written it, first tries to delete that exact acquisition.
  [[nodiscard]] std::optional<LockRecord> try_acquire(const AcquireRequest& request, bool ensure_index = true);

  // Deletes the one document that `which` selects. Returns true when exactly one was removed.
  [[nodiscard]] bool release(const LockSelector& which);

  // Extends `lock` to (now + ttl) on the server's clock, where now is the server's time at `sent`
  // (the local monotonic time the renewal is sent). Updates lock.expires_at/renewed_at/ttl on success.
  // Returns false when the lease is gone (no document with this _id and token).
  [[nodiscard]] bool renew(LockRecord& lock, Millis ttl, SteadyTime sent);

  // The current document of `name`, expired or not (nullopt when none).
  [[nodiscard]] std::optional<LockRecord> holder(std::string_view name);

  // "held by web1:4242 (user alice) since 2026-...Z, expires in 25s" for messages.
  [[nodiscard]] std::string describe_holder(const LockRecord& lock);

  [[nodiscard]] LockStore& store() { return m_store; }

private:
  LockStore& m_store;
  const Log& m_log;
};

} // namespace mongolock
