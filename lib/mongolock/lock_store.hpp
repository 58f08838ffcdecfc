// The lock store: the small interface between the lock protocol (locker.hpp) and MongoDB
// (mongo_store.hpp). It knows documents and server round trips, not policy.
#pragma once

#include <mongolock/clock.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mongolock {

// One lock document: one acquisition of one lock name. Field names in MongoDB are in brackets.
struct LockRecord {
  std::string id;                    // [_id] ObjectId as 24 hex digits, new for every acquisition
  std::string program;               // [program] the lock name; unique index "program_1"
  std::string process;               // [process] the holder, "<host>:<pid>"
  std::string token;                 // [token] 128 random bits as hex; whoever knows it may release or renew
  ServerTime acquired_at{};          // [acquired_at] server clock, UTC
  ServerTime expires_at{};           // [expires_at] server clock, UTC; free for takeover after this (+ grace)
  ServerTime renewed_at{};           // [renewed_at] server clock, UTC; equals acquired_at until renewed
  Millis ttl{0};                     // [ttl_ms] the lease length, milliseconds
  std::string host;                  // [host] the holder's host name
  std::string user;                  // [user] the holder's user name
  std::string command;               // [command] run: the command's name only, never its arguments
  std::optional<std::int64_t> fence; // [fence] fencing token, when taken with --fence
};

// Which lock document a delete may remove: always by program, narrowed by the acquisition's id, the
// token and/or the holder. Every unset field is ignored.
struct LockSelector {
  std::string program;
  std::optional<std::string> id;
  std::optional<std::string> token;
  std::optional<std::string> process;
};

// Every method is one server command (plus the connection handshake on first use). Errors of the
// server or the connection are thrown as Error with exit code 69; nothing here retries.
class LockStore {
public:
  virtual ~LockStore() = default;

  // The server's clock; the first call connects (server selection) and reads the handshake's time.
  virtual const ServerClock& clock() = 0;

  // Creates the unique index on `program` (createIndexes; a no-op when it exists).
  virtual void ensure_indexes() = 0;

  // Inserts `lock`, assigning lock.id when it is empty. Returns false when another document has the
  // same program (MongoDB error 11000: duplicate key), true when inserted.
  [[nodiscard]] virtual bool insert(LockRecord& lock) = 0;

  // Deletes at most one document of `program` whose expires_at <= `expired_at_or_before`.
  // Returns the number deleted (0 or 1).
  [[nodiscard]] virtual std::int64_t purge_expired(std::string_view program, ServerTime expired_at_or_before) = 0;

  // Deletes at most one document matching `which`. Returns the number deleted (0 or 1).
  [[nodiscard]] virtual std::int64_t remove(const LockSelector& which) = 0;

  // Sets expires_at, renewed_at and ttl_ms of the document with this _id and token.
  // Returns the number of documents matched (0: the lease is gone, 1: renewed).
  [[nodiscard]] virtual std::int64_t renew(std::string_view id, std::string_view token, ServerTime expires_at,
                                           ServerTime renewed_at, Millis ttl) = 0;

  // The lock document of `program`, expired or not; nullopt when there is none.
  [[nodiscard]] virtual std::optional<LockRecord> find(std::string_view program) = 0;

  // Every lock document, expired or not, sorted by program.
  [[nodiscard]] virtual std::vector<LockRecord> list() = 0;
};

} // namespace mongolock
