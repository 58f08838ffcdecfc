// The lock store: the small interface between the lock protocol (locker.hpp, queue.hpp, waiter.hpp) and
// MongoDB (mongo_store.hpp): lock documents, fencing tokens, queue tickets and wake-up events. It knows
// documents and server round trips, not policy. The run history has its own interface (run_store.hpp).
#pragma once

#include <mongolock/clock.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mongolock {

// One lock document: one acquisition of one lock name. Field names in MongoDB are in brackets.
struct LockRecord {
  std::string id;           // [_id] ObjectId as 24 hex digits, new for every acquisition
  std::string program;      // [program] the unique key (index "program_1"): the lock name; "NAME#K" for slot K >= 2
  std::string name;         // [name] the lock name as the user gave it
  int slot = 0;             // [slot] semaphore slot 1..N (with --slots N >= 2), 0 for a plain lock
  std::string process;      // [process] the holder, "<host>:<pid>"
  std::string token;        // [token] 128 random bits as hex; whoever knows it may release or renew
  ServerTime acquired_at{}; // [acquired_at] server clock, UTC
  ServerTime expires_at{};  // [expires_at] server clock, UTC; free for takeover after this (+ grace)
  ServerTime renewed_at{};  // [renewed_at] server clock, UTC; equals acquired_at until renewed
  ServerTime hold_until{};  // [hold_until] server clock, UTC; a release before this only ends the
                            // lease at hold_until (--min-hold); the epoch (1970) without it
  std::optional<ServerTime> released_at;   // [released_at] set by a release during the minimum hold
  Millis ttl{0};                           // [ttl_ms] the lease length, milliseconds
  Millis run_ttl{0};                       // [run_ttl_ms] run: the run's own lease length, milliseconds, set at
                                           // the insert and never changed (the run counts its lease from its
                                           // own renewals of this length: `renew --ttl` shorter is refused,
                                           // red team 8 F1); 0 for acquire and documents written before it
  std::string host;                        // [host] the holder's host name
  std::string user;                        // [user] the holder's user name
  std::string command;                     // [command] run: the command's name only, never its arguments
  std::optional<std::int64_t> fence;       // [fence] fencing token, when taken with --fence
  bool waiters = false;                    // [waiters] true when waiters were queued for the name: its
                                           // release appends a wake-up event (queue.hpp). Set only by the
                                           // holder: at its insert (taken from the queue) or after it read the
                                           // queue (Locker::mark_if_waited), never by a waiter
  bool mark_next = false;                  // not stored: the holder saw waiters; its next renewal sets `waiters`
  LocalTime sent{};                        // not stored: the local time (LeaseClock) at which this holder sent
                                           // the insert or its last successful renewal; the lease's renew
                                           // deadline counts from it
  ServerTime stamp_sent{};                 // not stored: the latest renewed_at this holder has sent, answered
                                           // or not; the next renewal's is later (Locker::renew), so a copy
                                           // of an earlier one that lands after it matches nothing (issue 27)
  std::string boot_id;                     // [boot_id] the holder host's boot id (liveness.hpp); "" when
                                           // unknown or not recorded (--process, older versions' acquire)
  std::string pid_ns;                      // [pid_ns] the holder's PID namespace, e.g. "pid:[4026531836]"
  std::optional<std::int64_t> pid_start;   // [pid_start] when the holder process started (clock ticks after
                                           // boot, /proc/PID/stat): run's mongolock, acquire's caller; a later
                                           // process with its pid is not the holder (HolderPlace)
  std::string ticket;                      // [ticket] taken from the queue: the _id of the holder's queue ticket
                                           // of this name (deleted once the lock was taken); "" otherwise. The
                                           // wake-up event of its release names it (WakeEvent)
  std::string malformed;                   // not stored: read from a document whose expires_at is missing or one
                                           // of the protocol's fields (dates, program, process, token) has
                                           // another BSON type, e.g. "expires_at is not a date"; "" otherwise.
                                           // Such a document never expires by the protocol's filters (MongoDB
                                           // compares values of different types by type order, so
                                           // `expires_at <= date` never matches a string): it counts as held
                                           // until `break --force` removes it
  std::optional<std::int64_t> replace_seq; // [replace_seq] taken by run --replace from the queue: the seq of
                                           // its ticket (< 0; a newer replacing run's is lower, WaitQueue::join)
};

// A place field that could not be read (HolderPlace::boot_id, pid_ns): recorded as such, and it matches
// nobody without --token (place_matches()); a missing field would match anyone (red team X1, X2).
inline constexpr std::string_view k_unknown_place = "unknown";
// A start that could not be read (HolderPlace::pid_start): matches only a caller whose start is unknown too.
inline constexpr std::int64_t k_unknown_start = -1;

// Where a holder runs, as recorded in its lock document (LockRecord::boot_id, pid_ns, pid_start; issue 26
// item 7): "host:pid" alone is not unique (containers that share a host name, PID 1 in each, are both "vm:1").
struct HolderPlace {
  std::string boot_id;                   // the kernel's boot id; k_unknown_place when unreadable
  std::string pid_ns;                    // the holder's PID namespace, "pid:[INODE]"; k_unknown_place when unreadable
  std::optional<std::int64_t> pid_start; // the holder process's start (clock ticks after boot); k_unknown_start
                                         // when unreadable; unset for a caller outside the namespace ("host:0")
};

// Whether document `lock` may be the holder at `place`: each of boot_id, pid_ns and pid_start that the
// document has equals place's, and neither boot_id nor pid_ns is k_unknown_place (an unknown place is
// nobody's: matched by --token only); a pid_start of k_unknown_start matches only the same unknown. A
// document without the fields (acquire before issue 26, --process) matches by `process` alone, as before.
// The store's filter (LockSelector::place) and the memory stores say the same.
[[nodiscard]] inline bool place_matches(const LockRecord& lock, const HolderPlace& place) {
  const auto field = [](const std::string& recorded, const std::string& own) {
    return recorded.empty() || (recorded == own && recorded != k_unknown_place);
  };
  return field(lock.boot_id, place.boot_id) && field(lock.pid_ns, place.pid_ns) &&
         (!lock.pid_start || lock.pid_start == place.pid_start);
}

// Which lock document a write may touch: always by program, narrowed by every field that is set.
struct LockSelector {
  std::string program;
  std::optional<std::string> id = std::nullopt;
  std::optional<std::string> token = std::nullopt;
  std::optional<std::string> process = std::nullopt;
  std::optional<ServerTime> expires_after = std::nullopt;  // expires_at > this (the lease has not run out)
  std::optional<ServerTime> hold_ends_by = std::nullopt;   // hold_until <= this (no minimum hold left)
  std::optional<ServerTime> expired_by = std::nullopt;     // expires_at <= this (expired that long ago)
  std::optional<ServerTime> renewed_before = std::nullopt; // renewed_at < this (a renewal never undoes a newer one)
  bool not_released = false;                               // released_at does not exist
  std::optional<Millis> run_ttl_at_most = std::nullopt;    // run_ttl_ms <= this, or no run_ttl_ms (not a run's
                                                           // lock): a renewal never shortens a run's lease below
                                                           // the TTL it counts from (red team 8, F1)
  std::optional<HolderPlace> place = std::nullopt;         // with `process`: place_matches() (issue 26 item 7)
};

// One waiter's place in the queue of one lock name (--wait), a document in "<collection>_queue". Field
// names in MongoDB are in brackets. A waiter of several names has one ticket per name, all with the same seq.
struct TicketRecord {
  std::string id;          // [_id] ObjectId as 24 hex digits
  std::string name;        // [name] the lock name waited for
  std::int64_t seq = 0;    // [seq] place in line: lower goes first; unique per name (index "name_1_seq_1")
  std::string process;     // [process] the waiter, "<host>:<pid>"
  ServerTime since{};      // [since] server clock, UTC: when the waiter joined the queue
  ServerTime expires_at{}; // [expires_at] server clock, UTC: the ticket's lease; skipped (dead) after this
};

// A wake-up event: lock `name` was released (deleted, broken, or released into its minimum hold).
struct WakeEvent {
  std::string name;   // [name] the lock name
  std::string ticket; // [ticket] the queue ticket the released lock was taken with (LockRecord::ticket): that
                      // waiter has left the line; "" when the lock was not taken from the queue
};

// WakeEvent::ticket of the event a replacing run (run --replace) appends when it joins the queue at the
// front: every waiter reads the queue again before it takes the lock (no ticket _id looks like this).
inline constexpr std::string_view k_replace_event = "replace";

// A follower of the wake-up events of "<collection>_events" (a tailable awaitData cursor on a capped
// collection). Destruction closes the cursor.
class EventFeed {
public:
  virtual ~EventFeed() = default;
  // Waits up to the feed's await time (follow_events) for the next event of one of `names` and returns it
  // (at once when one was already read); nullopt when the await time passed without one. Events of other
  // names are skipped. One getMore per call when nothing was read ahead. Throws Error (69) when the cursor
  // fails or the server closed it: the caller then polls instead. On FerretDB v1 events that arrive in
  // the last ~10 ms of an await period can be lost (README): after a nullopt, the caller checks.
  [[nodiscard]] virtual std::optional<WakeEvent> wait(const std::vector<std::string>& names) = 0;
};

// Time limits of the server calls after LockStore::reconnect() (ms), counted from reconnect().
struct CallLimits {
  Millis connect; // TCP connect and handshake (server selection), when the call has to connect
  Millis total;   // the whole call, handshake included
  // How long the server may work on a renewal once it has started it (maxTimeMS of the renewal's
  // findAndModify): past it, the server aborts the command instead of writing, so a renewal whose reply
  // was lost cannot write its expiry long after a newer renewal (servers whose updates read, then write:
  // FerretDB v1). Unset: no bound.
  std::optional<Millis> server = std::nullopt;
  // Re-read the server's clock at the next clock() (a hello): every renewal does; a read right after one
  // (the heartbeat's queue read) keeps the clock it just read.
  bool reread_clock = true;
};

// Every method is one server command (plus the connection handshake on first use). Errors of the
// server or the connection are thrown as Error with exit code 69; nothing here retries.
class LockStore {
public:
  virtual ~LockStore() = default;

  // The server's clock. The first call connects (server selection) and reads the handshake's localTime;
  // later calls take a newer hello reply into account (a new connection's handshake), and send a hello to
  // re-read it when the clock is 60s old or reconnect() was called with limits since that ask for it
  // (CallLimits::reread_clock: every renewal).
  virtual const ServerClock& clock() = 0;

  // How many writes (insert, update, delete, findAndModify) this store has handed to a connection since it
  // was made: a write counted may have reached the server, whatever its call answered. A call that failed
  // with the count unchanged sent no write, and nothing of it can be applied later (a failed clock hello, a
  // server selection or connect that failed: red team 6 F4, where such a renewal pinned the lease; LeaseBook).
  // nullopt: this store cannot tell, so every failed write counts as possibly sent. Never throws.
  [[nodiscard]] virtual std::optional<std::uint64_t> writes_sent() const { return std::nullopt; }

  // Sets the time limits of the next calls, and makes a new client (a new connection, server selection
  // anew) only when needed: after a call of the current client failed or timed out (so that a server that
  // failed a check is tried again at once: libmongoc's single-threaded client would wait 5s). While calls
  // succeed, the connection is kept (no TCP connect, TLS handshake or authentication per call: issue 15).
  // With `limits`, the calls until the next reconnect() end with an error (69) once limits.total has passed
  // since this call (each read and write is cut at that deadline), and a connect they need must be done
  // within limits.connect (both capped by the configured connect and operation timeouts); a kept client
  // whose connect timeout is longer does not connect again in them (the call fails instead, and the next
  // reconnect() makes a new client); without `limits`, the deadline is lifted and the configured
  // timeouts apply (a new client only after a failure). Sends nothing to the server (a dropped client's
  // session is left to expire there). Throws Error (64) only when the URI cannot make a client.
  virtual void reconnect(std::optional<CallLimits> limits) = 0;

  // Creates the unique index on `program` (createIndexes; a no-op when it exists).
  virtual void ensure_indexes() = 0;

  // Inserts `lock`, assigning lock.id when it is empty. Returns false when another document has the
  // same program (MongoDB error 11000: duplicate key), true when inserted.
  [[nodiscard]] virtual bool insert(LockRecord& lock) = 0;

  // Deletes at most one document matching `which`. Returns the number deleted (0 or 1).
  [[nodiscard]] virtual std::int64_t remove(const LockSelector& which) = 0;

  // Sets expires_at, renewed_at and ttl_ms of the one document matching `which`, and waiters: true with
  // `mark_waiters` (the holder saw the queue: one write, not a second update of the document), in one
  // findAndModify bounded on the server by the last reconnect()'s CallLimits::server (maxTimeMS).
  // A released document (released_at set, a release into the minimum hold) never matches, whatever
  // `which` says: a renewal that arrives after the release must not move the hold's end back. Nor, where
  // the server evaluates a condition on its own clock (MongoDB 4.2+: $$NOW; not FerretDB v1, where the
  // renewal is sent without it: store::ServerTimeCondition), a document that has expired on the server's
  // clock when the renewal reaches it: a late copy of an abandoned renewal never revives an expired lock.
  // Returns the number of documents matched (0: the lease is gone or released, 1: renewed).
  [[nodiscard]] virtual std::int64_t renew(const LockSelector& which, ServerTime expires_at, ServerTime renewed_at,
                                           Millis ttl, bool mark_waiters = false) = 0;

  // Decides, before a heartbeat's first renewal, whether renew() sends the server-time condition, so that no
  // renewal pays a refusal inside its renew deadline (store::ServerTimeCondition, whose rules it follows):
  // reads the document renew(`which`) would renew, with the condition last in the filter (renew_filter()); a
  // document read: the server has it; refused for it (refuses_server_time()): read once more without it, and
  // read: the server lacks it. Nothing is written, so a failure pins no lease. Sends nothing once decided (nor
  // where there is no condition to decide: the default, MemoryStore). One or two finds, bounded by the last
  // reconnect()'s limits; throws Error (69) when a find fails otherwise (the condition stays undecided: the
  // first renewal decides it, as without a probe).
  virtual void probe_server_time(const LockSelector& which) { (void)which; }
  // Whether probe_server_time() would send anything: the condition is not decided yet (false where there is
  // nothing to decide: the default, MemoryStore). Sends nothing, never throws.
  [[nodiscard]] virtual bool server_time_undecided() const { return false; }

  // Sets released_at and expires_at of the one document matching `which` (a release during the minimum
  // hold). Returns the number of documents matched (0 or 1).
  [[nodiscard]] virtual std::int64_t mark_released(const LockSelector& which, ServerTime released_at,
                                                   ServerTime expires_at) = 0;

  // Sets the fencing token of the one document matching `which`. Returns the number matched (0 or 1).
  [[nodiscard]] virtual std::int64_t set_fence(const LockSelector& which, std::int64_t fence) = 0;

  // Allocates the next fencing token of lock `name`: one more than any before it, never reused. Kept in
  // its own collection ("<collection>_fences"), one document per token under a unique index on
  // (name, fence), so it stays correct where $inc is not atomic (FerretDB v1). Returns the token (>= 1).
  [[nodiscard]] virtual std::int64_t next_fence(std::string_view name) = 0;

  // The lock document of `program`, expired or not; nullopt when there is none.
  [[nodiscard]] virtual std::optional<LockRecord> find(std::string_view program) = 0;

  // Every lock document, expired or not, sorted by program; only those of lock `name` (its plain lock
  // and its semaphore slots) when given.
  [[nodiscard]] virtual std::vector<LockRecord> list(std::optional<std::string_view> name = std::nullopt) = 0;

  // --- the queue of waiters (queue.hpp), in its own collection "<collection>_queue" ----------------

  // The highest seq of any ticket of any name (0 when there is none).
  [[nodiscard]] virtual std::int64_t highest_ticket() = 0;

  // Inserts `ticket`, assigning ticket.id. Returns false when `ticket.name` already has a ticket with
  // this seq (duplicate key 11000), true when inserted. Its unique index on (name, seq) of the queue
  // collection is created first (createIndexes), once per store, unless tickets() has read a stored
  // ticket, which shows that the index exists (every ticket is inserted after it).
  [[nodiscard]] virtual bool insert_ticket(TicketRecord& ticket) = 0;

  // Sets expires_at of ticket `id` to `expires_at` if its lease has not run out (expires_at > `now`).
  // Returns the number matched (0: the ticket is gone or expired, 1: renewed).
  [[nodiscard]] virtual std::int64_t renew_ticket(std::string_view id, ServerTime now, ServerTime expires_at) = 0;

  // Deletes ticket `id`; only when it expired at or before `expired_at_or_before`, when given.
  // Returns the number deleted (0 or 1).
  [[nodiscard]] virtual std::int64_t remove_ticket(std::string_view id,
                                                   std::optional<ServerTime> expired_at_or_before = std::nullopt) = 0;

  // The tickets of `names` (every name when empty), expired or not, in line order: by seq, then name. One
  // read is enough to know the queue's unique index exists (see insert_ticket).
  [[nodiscard]] virtual std::vector<TicketRecord> tickets(const std::vector<std::string>& names) = 0;

  // --- push wake-ups of waiters ------------------------------------------------------------------

  // Deletes at most one document matching `which` and returns it (findAndModify with remove: one
  // command, like remove()); nullopt when none matched.
  [[nodiscard]] virtual std::optional<LockRecord> remove_returning(const LockSelector& which) = 0;

  // Appends a wake-up event {name, ticket, t} to the capped collection "<collection>_events" (one insert);
  // `ticket` as in WakeEvent ("" leaves the field out).
  // Only after follow_events() created the collection somewhere (a waiter did): an insert would
  // otherwise create an uncapped one, so this is only called for a lock marked `waiters`.
  virtual void append_event(std::string_view name, std::string_view ticket) = 0;

  // Creates "<collection>_events" (capped: 1 MiB, at most 100 events) unless it exists and opens a tailable
  // awaitData cursor from its two newest events on (when it has fewer, from two marker events it inserts:
  // FerretDB v1 keeps such a cursor open only when its first batch is neither empty nor the whole result),
  // whose getMores wait up to `await` (maxAwaitTimeMS, fixed when the cursor is made). The newest event (or
  // a marker) is the first one read: a spurious wake-up. Throws Error (69) when the server cannot do that.
  [[nodiscard]] virtual std::unique_ptr<EventFeed> follow_events(Millis await) = 0;
};

} // namespace mongolock
