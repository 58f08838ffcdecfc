// The documents MongoStore sends, as pure functions (inputs in, BSON out; no driver call, no server): the
// lock and ticket documents it inserts and reads back, the filter of every write, and the update of every
// updateOne and findAndModify. MongoStore (lib/mongolock/store/*.cpp) sends exactly these; the simulator
// evaluates them on its in-memory documents (tests/sim/bson_eval.hpp, checked against the test server by
// integration.bson_eval), so a wrong operator or a missing condition in one of them is caught there.
// Every `out` is an initialized, empty (or being built) document of the caller; the functions append to it.
#pragma once

#include <mongolock/lock_store.hpp>

#include <bson/bson.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mongolock::store {

// --- lock documents (store/locks.cpp) ---------------------------------------------------------------

// The lock document MongoStore inserts for `lock` (THE LOCK DOCUMENT in the man page): its stored fields,
// `_id` as an ObjectId when lock.id is 24 hex digits (else a string).
void to_bson(const LockRecord& lock, bson_t* doc);
// A lock document read back; fields of unexpected types are left at their defaults; name defaults to program.
[[nodiscard]] LockRecord from_bson(const bson_t* doc);
// The filter for a LockSelector: `program`, narrowed by every field that is set (_id, token, process, the
// expiry/hold/renewal comparisons, `released_at` absent). Used by delete, release, fence update, takeover.
void append_selector(bson_t* doc, const LockSelector& which);
// A renewal's findAndModify query: `which`, and never a released document (LockStore::renew); with
// `server_time`, last, {$expr: {$gt: ["$expires_at", "$$NOW"]}}: unexpired on the server's own clock when
// the server reads the document (MongoDB 4.2+), so that a late copy of an abandoned renewal never revives an
// expired lock (red team 4, F4). FerretDB v1 refuses it (refuses_server_time()) when a document matches the
// rest of the filter; MongoStore then sends it without (ServerTimeCondition).
void renew_filter(const LockSelector& which, bson_t* out, bool server_time);
// Whether `error`, the answer to a renewal sent with the server-time condition, is the server's refusal of
// that condition (nothing was read or written): an error answer (domain SERVER or QUERY) with code 238
// NotImplemented (FerretDB v1.24: "The operator $gt is not implemented yet", "Aggregation expression variables
// are not implemented yet"), 17276 (MongoDB 3.6-4.0: "Use of undefined variable: NOW") or 2 BadValue naming
// $expr (MongoDB before 3.6: "unknown top level operator: $expr"). Codes from FerretDB's source
// (internal/handler/common/aggregations/operators/expr.go) and MongoDB's error_codes.yml.
[[nodiscard]] bool refuses_server_time(const bson_error_t& error);

// Whether a renewal that failed with `error` was refused, nothing of it applied: the server answered it with
// an error (domain SERVER or QUERY: neither a lost reply nor a writeConcernError; not a time limit, 50 or 262,
// which cuts a write while it runs, and FerretDB v1 writes back after its read) and every copy handed to a
// connection was one of mongolock's own sends (`writes_started`, the write commands started during the call,
// equals `sends`), so no driver retry of a copy whose reply was lost hides behind the last answer (red team 7,
// F6: a renewal refused for its server-time condition and again without it is not of unknown outcome).
[[nodiscard]] bool renewal_refused(const bson_error_t& error, std::uint64_t writes_started, std::uint64_t sends);

// Whether one store (one mongolock process) sends the server-time condition with its renewals: until a
// renewal refused for it (refuses_server_time()) is accepted when sent once more without it; never again
// after that (one refused findAndModify per process on FerretDB v1). A resend that fails too (refused again:
// the same code for another reason, on a server that has the condition; or any other error) leaves the
// condition on: that renewal's error stands, and the next renewal sends the condition again: at most one
// resend per renewal, never a loop. Until a renewal with the condition has been answered (the server has
// it), a renewal carries it only when its call has time left for that resend: on a slow link the refusal's
// round trip would otherwise cost the first renewal its call bound (red team 5, F1's budget). The heartbeat
// decides it before its first renewal, outside the renew deadline: LockStore::probe_server_time() reads the
// holder's own document with the condition (and, refused, once more without it) under the same rules, so that
// on FerretDB v1 no renewal pays the refusal's round trip (the simulator's seed 4824 of --semantics ferretdb
// --edge: a lease lost to it with no fault).
class ServerTimeCondition {
public:
  // Whether the server was found to evaluate the condition (accepted()) or to lack it (lacking()): a probe
  // (LockStore::probe_server_time) then sends nothing.
  [[nodiscard]] bool decided() const { return m_accepted || m_lacking; }
  // Whether the next renewal carries the condition; `time_for_resend`: its call has time for a second
  // findAndModify (one round trip) after the first.
  [[nodiscard]] bool sent(bool time_for_resend) const { return !m_lacking && (m_accepted || time_for_resend); }
  // A renewal (or the probe's read) with the condition matched a document (so the server evaluated it): the
  // server has it; every
  // renewal carries it from now on. (FerretDB answers "matched nothing" without evaluating it when the rest
  // of the filter matches no document: that is no proof.)
  void accepted() { m_accepted = true; }
  // A renewal sent with the condition failed with `error`: true when it is to be sent once more without it.
  // Never once the server has accepted the condition (accepted()): a refusal then (a mixed-version cluster,
  // a proxy) is that renewal's error, and the condition stays on for the process (red team 7, F6).
  [[nodiscard]] bool resend_without(const bson_error_t& error) const {
    return !m_lacking && !m_accepted && refuses_server_time(error);
  }
  // The resend without the condition succeeded: the server lacks it; renewals go without it from now on.
  // Returns true the first time only (to say so once).
  bool lacking() {
    const bool first = !m_lacking;
    m_lacking = true;
    return first;
  }

private:
  bool m_accepted = false;
  bool m_lacking = false;
};

// A renewal's update: {$set: {expires_at, renewed_at, ttl_ms (ms)[, waiters: true with mark_waiters]}}.
void renew_update(ServerTime expires_at, ServerTime renewed_at, Millis ttl, bool mark_waiters, bson_t* out);
// A release into the minimum hold: {$set: {released_at, expires_at}}.
void release_update(ServerTime released_at, ServerTime expires_at, bson_t* out);
// A fencing token's update: {$set: {fence}}.
void fence_update(std::int64_t fence, bson_t* out);

// --- queue tickets (store/queue.cpp) ----------------------------------------------------------------

// The ticket document MongoStore inserts for `ticket`.
void to_bson(const TicketRecord& ticket, bson_t* doc);
// A ticket document read back; fields of unexpected types are left at their defaults.
[[nodiscard]] TicketRecord ticket_from_bson(const bson_t* doc);
// A ticket's renewal: the filter {_id, expires_at > now} and the update {$set: {expires_at}}.
void ticket_renew_filter(std::string_view id, ServerTime now, bson_t* out);
void ticket_renew_update(ServerTime expires_at, bson_t* out);
// A ticket's delete: {_id[, expires_at <= expired_at_or_before]}.
void ticket_remove_filter(std::string_view id, std::optional<ServerTime> expired_at_or_before, bson_t* out);
// The read of the line: {name: {$in: names}}, or every ticket when `names` is empty.
void tickets_filter(const std::vector<std::string>& names, bson_t* out);

// --- refusals in passing (store/queue.cpp, store/runs.cpp) --------------------------------------------

// Whether a write's error text `message` is FerretDB v1 on SQLite refusing it because another connection holds
// the database: SQLite's SQLITE_BUSY, "database is locked (517)". Nothing was written; the write may be sent
// again (the wake-up event's insert, the history insert: docs/compatibility.md).
[[nodiscard]] bool sqlite_locked(std::string_view message);

// --- indexes (store/locks.cpp) -------------------------------------------------------------------------

// How the index `spec` (one document of a listIndexes reply) differs from the index on exactly `fields`
// (ascending, in this order) that MongoStore creates, unique when `unique`: "" when it is that index (its key
// those fields, each numerically 1, of any BSON number type; `unique` as asked, where only a boolean true or a
// number other than 0 is unique (a string is not: red team 12b, G4); no option but v, name and ns,
// whatever its name), "other fields" for another key, "not unique" / "unique", or the first other option
// ("sparse", "partial" for partialFilterExpression, "collation", ..., at most 40 bytes of the server's key).
// MongoStore accepts the first, refuses an index on its unique index's fields with any other answer
// (FerretDB v1 answers createIndexes over a non-unique one "all indexes already exist" and creates nothing),
// and creates its own otherwise (Impl::ensure_index).
[[nodiscard]] std::string index_difference(const bson_t* spec, std::initializer_list<const char*> fields, bool unique);

// --- run history (store/runs.cpp) ---------------------------------------------------------------------

// Whether the server answered `error` (domain SERVER or QUERY) with one of the codes of a primary that is
// stepping down, shutting down or being elected: the retryable writes spec's list (HostUnreachable 6,
// HostNotFound 7, NetworkTimeout 89, ShutdownInProgress 91, PrimarySteppedDown 189, ExceededTimeLimit 262,
// SocketException 9001, NotWritablePrimary 10107, InterruptedAtShutdown 11600, InterruptedDueToReplStateChange
// 11602, NotPrimaryNoSecondaryOk 13435, NotPrimaryOrSecondary 13436). Nothing of the command was applied.
[[nodiscard]] bool server_in_transition(const bson_error_t& error);
// Whether a call that failed with `error`, known not to have been applied, may be sent again: a network error
// (domain STREAM), a failed server selection, or a failover's error answer (server_in_transition(): red team 9,
// F2). MongoStore's failures of reads and of unapplied writes are transient (Error::transient()) by this rule,
// and so are the simulator's (tests/sim: SimStore's election), so that a waiter rides them out.
[[nodiscard]] bool transient_failure(const bson_error_t& error);

// Whether a history insert refused with `error` is sent again (red team 7, F5): the server answered (domain
// SERVER or QUERY), nothing was written, and the refusal is a passing one: sqlite_locked() or an election's
// (server_in_transition()).
[[nodiscard]] bool history_insert_retryable(const bson_error_t& error);
// Whether an insert's `reply` has writeErrors and all of them are duplicate keys (11000) of _id (the errmsg
// names "_id", or names no index at all: FerretDB v1's "E11000 duplicate key error collection: DB.COLL" on the
// run history, whose only unique index is _id's; red team 10, F6): a retry met the records an earlier copy of the
// same insert wrote (their _ids are the client's), so they are recorded. Only for a retry: a first copy's
// duplicate key (another unique index, a reused _id) is the server's refusal.
[[nodiscard]] bool only_duplicate_ids(const bson_t* reply);

} // namespace mongolock::store
