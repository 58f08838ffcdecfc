// MongoStore's state, shared by its files (lib/mongolock/store/): the client and its collections, the
// write concern, the server clock, the per-call deadline of the kept connection, command monitoring.
#pragma once

#include <mongolock/error.hpp>
#include <mongolock/log.hpp>
#include <mongolock/mongo_store.hpp>
#include <mongolock/store/bson.hpp>
#include <mongolock/store/commands.hpp>
#include <mongolock/uri.hpp>

#include <fmt/format.h>

#include <map>
#include <vector>

namespace mongolock::store {

// Command monitoring (APM): counts commands by name for the benchmark and logs them with -v.
struct CommandMonitor {
  const Log& log;
  std::map<std::string, int> counts; // commands sent, by name (each retry counts again)
  std::map<std::string, int> resent; // of those, sent again after the server refused them without writing
  std::uint64_t writes_started = 0;  // write commands handed to a connection (LockStore::writes_sent())

  // "2 (createIndexes 1, insert 1)"; with resends "3 (createIndexes 1, insert 2; resent: insert 1)", so that a
  // count read by tests and scripts/bench tells the commands the protocol sends from the server's refusals.
  [[nodiscard]] std::string summary() const {
    const auto list = [](const std::map<std::string, int>& by_name) {
      std::string parts;
      for (const auto& [name, count] : by_name)
        parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", name, count);
      return parts;
    };
    int total = 0;
    for (const auto& [name, count] : counts)
      total += count;
    return fmt::format("{} ({}{}{})", total, list(counts), resent.empty() ? "" : "; resent: ", list(resent));
  }
};

// When the current call must be over; shared by every stream of the client (all on one thread).
struct CallDeadline {
  std::optional<LocalTime> until; // none: only the client's own socketTimeoutMS applies
  std::optional<Millis> server;   // maxTimeMS of a renewal (CallLimits::server)
  bool may_connect = true;        // false: a new connection is refused (a kept client whose connect limit
                                  // is longer than the call allows; see MongoStore::reconnect)
  Millis connect{0};              // the client's connect limit (see connect_fits)

  // Whether a new connection may be made at `now` (the stream initiator asks): outside a bounded call
  // always; inside one only while the client's connect limit fits in what is left of it (issue 27). The
  // handshake's hello runs in libmongoc's scanner, which waits on the socket beneath the DeadlineStream
  // for up to the connect limit: past the deadline the stream refuses the hello while the socket still
  // reports the connect's EINPROGRESS as "try again", and the scanner spins to the connect limit, once
  // per server selection (docs/testing.md, the "1 s latency" hang).
  [[nodiscard]] bool connect_fits(LocalTime now) const { return !until || now + connect <= *until; }
};

// mongoc_client_set_stream_initiator()'s user data: the client (for the default initiator's TLS options)
// and the deadline its streams follow.
struct StreamFactory {
  mongoc_client_t* client = nullptr;
  CallDeadline* deadline = nullptr;
  bool connected = false; // the client has made a connection (the initiator returned a stream)
};

// What a driver error most likely means, for a connection's TLS or authentication ("" when nothing
// specific). Defined in mongo_store.cpp.
[[nodiscard]] std::string connection_hint(std::string_view message);

} // namespace mongolock::store

namespace mongolock {

using store::ApmCallbacksPtr;
using store::Bson;
using store::CallDeadline;
using store::ClientPtr;
using store::CollectionPtr;
using store::CommandMonitor;
using store::connection_hint;
using store::CursorPtr;
using store::Reply;
using store::StreamFactory;
using store::UriPtr;

struct MongoStore::Impl {
  StoreConfig config;
  const Log& log;
  std::string namespace_name; // "db.collection", for messages
  CommandMonitor monitor;     // before the client: destroying the client may still send commands
  UriPtr uri;
  CallDeadline call_deadline; // before the client: its streams point here
  StreamFactory streams;      // mongoc_client_set_stream_initiator()'s user data
  ClientPtr client;
  // Clients replaced (open_client) while an event feed's cursor, made on them, was still open: a cursor must not
  // outlive its client. Kept (reset: the cursor's next getMore fails without I/O) until the last feed is closed
  // (MongoEventFeed, store/queue.cpp; a Waiter's bounded queue call that fails makes a new client, WaitQueue).
  std::vector<ClientPtr> retired;
  int feeds_open = 0; // MongoEventFeeds alive
  CollectionPtr collection;
  CollectionPtr fences;    // "<collection>_fences", opened on first use
  CollectionPtr queue;     // "<collection>_queue", opened on first use (queue of waiters)
  CollectionPtr events;    // "<database>_events.<collection>_events", opened on first use (wake-ups of waiters)
  CollectionPtr runs;      // "<collection>_runs", opened on first use (run history)
  CollectionPtr last_runs; // "<collection>_lastrun", opened on first use (each name's last executed run)
  Bson write_opts;         // {writeConcern: {w: "majority", j: true, wtimeout}}
  std::optional<ServerClock> clock;
  std::int64_t clock_hello_time = 0; // localTime of the hello the clock was taken from
  Millis connect_limit{0};           // the current client's connectTimeoutMS = serverSelectionTimeoutMS
  Millis socket_limit{0};            // the current client's socketTimeoutMS
  int clients_made = 0;              // clients made so far (each one connects anew), for -v
  bool clock_due = false;            // re-read the server's time at the next clock() (reconnect with limits)
  mutable bool failed = false;       // a call of the current client failed
  std::optional<bool> ferretdb;      // the server is FerretDB (buildInfo.ferretdbVersion), asked once: is_ferretdb()

  // Whether renewals carry {$expr: {$gt: ["$expires_at", "$$NOW"]}} (red team 4, F4): until the server
  // refuses it (FerretDB v1), for the rest of the process then.
  store::ServerTimeCondition server_time;

  Impl(const StoreConfig& c, const Log& l) : config(c), log(l), monitor{l, {}, {}, 0} {}
  ~Impl() {
    collection.reset();
    fences.reset();
    queue.reset();
    events.reset();
    runs.reset();
    last_runs.reset();
    // endSessions only to a server that answered the last call: after a failure it could block the exit
    // for a whole socket timeout (a server that accepts connections and never answers).
    if (failed && client) mongoc_client_reset(client.get());
    client.reset(); // may send endSessions, which is counted too
    retired.clear();
    if (config.count_commands) log.diagnostic(fmt::format("server commands: {}", monitor.summary()));
  }

  // Driver and server text, scrubbed of the URI's password: only this text is scrubbed, so that our own
  // words (and the redacted URI) stay intact even when the password is an ordinary word.
  [[nodiscard]] std::string driver_text(const bson_error_t& error) const {
    return scrub_secrets(error.message, config.uri);
  }

  // Throws Error (69) "<what> on <namespace> failed: <driver text>"; `suffix` names a side collection
  // ("_queue", "_runs", ...: "<db>.<collection><suffix>"), events_suffix the wake-up events' collection.
  // store::transient_failure() errors (a network error, a failed server selection, a failover's error answer: red
  // team 9, F2) are transient (Error::transient()): fail() is for reads and for writes known not to have been
  // applied (fail_write() sends the others' "outcome unknown").
  [[noreturn]] void fail(std::string_view what, const bson_error_t& error, std::string_view suffix = {}) const {
    failed = true;
    auto message = fmt::format("{} on {} failed: {}{}", what, where(suffix), driver_text(error), hint_suffix(error));
    if (store::transient_failure(error)) throw unreachable_error(message);
    throw unavailable_error(message);
  }
  // "<db>.<collection><suffix>", or the wake-up events' collection.
  [[nodiscard]] std::string where(std::string_view suffix) const {
    return suffix == events_suffix ? fmt::format("{}_events.{}_events", config.database, config.collection)
                                   : fmt::format("{}{}", namespace_name, suffix);
  }
  // For a write: as fail(), but when the write may have been applied although it failed (the connection
  // was lost or timed out after it was sent, or a writeConcernError: outcome_unknown()), Error (69) says
  // "<what> on <namespace>: outcome unknown ...; check <check>" (issue 27).
  [[noreturn]] void fail_write(std::string_view what, const bson_error_t& error, std::string_view check,
                               std::string_view suffix = {}) const {
    if (!outcome_unknown(error)) fail(what, error, suffix);
    failed = true;
    throw unavailable_error(fmt::format("{} on {}: outcome unknown, the server may have applied it ({}); check {}",
                                        what, where(suffix), driver_text(error), check));
  }
  // For a write every copy of which the server refused (store::renewal_refused()): as fail(), an Error (69)
  // that says refused(), so that the heartbeat does not count it as a renewal of unknown outcome.
  [[noreturn]] void fail_refused(std::string_view what, const bson_error_t& error) const {
    failed = true;
    throw refused_error(fmt::format("{} on {} failed: {}{}", what, where({}), driver_text(error), hint_suffix(error)));
  }
  // True when a write that failed with `error` may still have been applied: a network error or timeout
  // after it was sent (the stream's errors; server selection again for a retried write), or a write
  // concern error (applied on the primary, not confirmed by a majority). An error answer of the server
  // (e.g. 10107 NotWritablePrimary) means it was not applied.
  [[nodiscard]] static bool outcome_unknown(const bson_error_t& error) {
    return error.domain == MONGOC_ERROR_STREAM || error.domain == MONGOC_ERROR_WRITE_CONCERN ||
           error.domain == MONGOC_ERROR_SERVER_SELECTION;
  }
  static constexpr std::string_view events_suffix = "_events";
  // The same for a call on collection `from` (the locks collection or a side collection).
  [[noreturn]] void fail(std::string_view what, const bson_error_t& error, const mongoc_collection_t* from) const {
    const std::string name = mongoc_collection_get_name(const_cast<mongoc_collection_t*>(from));
    const auto prefix = config.collection.size();
    fail(what, error,
         name.size() > prefix && name.compare(0, prefix, config.collection) == 0 ? std::string_view(name).substr(prefix)
                                                                                 : std::string_view{});
  }

  // True when the server is FerretDB (its buildInfo reply has `ferretdbVersion`; MongoDB's has none).
  // One buildInfo on the first call, then the cached answer. Throws Error (69) when buildInfo fails.
  [[nodiscard]] bool is_ferretdb();
  // The wake-up events (store/queue.cpp; `events` opened): creates their capped collection unless it
  // exists (Error 69 on another failure); reads the `t` of the newest ones, newest first (Error 69);
  // deletes the old ones on FerretDB only, best effort (`newest` as read, `now` in ms since the epoch,
  // the server's clock).
  void create_events_collection();
  // Drops the events collection and creates it capped (Error 69 on failure): one that a release's insert
  // made before any waiter created it capped is a plain collection, which no tailable cursor can follow
  // (`reason`: the server's refusal, for -v).
  void recreate_events_collection(std::string_view reason);
  [[nodiscard]] std::vector<std::int64_t> newest_event_times();
  void trim_events(const std::vector<std::int64_t>& newest, std::int64_t now);

  // For server commands that concern no collection (hello, buildInfo).
  [[noreturn]] void fail_server(std::string_view what, const bson_error_t& error) const {
    failed = true;
    throw unavailable_error(
        fmt::format("{} on {} failed: {}{}", what, redact_uri(config.uri), driver_text(error), hint_suffix(error)));
  }

  // "; <what it most likely means>" for a TLS or authentication error, else "".
  [[nodiscard]] static std::string hint_suffix(const bson_error_t& error) {
    const auto hint = connection_hint(error.message);
    return hint.empty() ? "" : "; " + hint;
  }

  // The collection "<collection><suffix>" of mongolock's database in `handle`, opened on first use; with
  // `index` (once per store, `indexed` remembers it) after its index is listed or created (ensure_index).
  struct Index {
    const char* name;
    std::initializer_list<const char*> fields;
    bool unique;
    // For a unique index: what rests on it, for a refusal ("the exclusion needs a unique one (two holders
    // could take one name)").
    const char* needs = "";
  };
  static const Index k_lock_index;  // program_1 of the lock documents: the one the exclusion rests on
  static const Index k_queue_index; // name_1_seq_1 of the queue's tickets: one place in line per seq
  static const Index k_fence_index; // name_1_fence_1 of the fencing tokens: one holder per token
  mongoc_collection_t* open(CollectionPtr& handle, std::string_view suffix, const Index* index = nullptr,
                            bool* indexed = nullptr) {
    if (!handle) {
      const auto name = config.collection + std::string(suffix);
      handle.reset(mongoc_client_get_collection(client.get(), config.database.c_str(), name.c_str()));
    }
    if (index != nullptr && (indexed == nullptr || !*indexed)) {
      if (!ensure_index(handle.get(), *index) && is_ferretdb()) {
        throw unavailable_error(unverified_index(handle.get(), *index));
      }
      if (indexed != nullptr) *indexed = true;
    }
    return handle.get();
  }

  // One find: every document of `from` that `filter` selects, with `opts` (sort, limit, batchSize), each
  // read by `read` (T(const bson_t*)). Throws Error (69) naming `what` when the find or a getMore fails.
  template <typename T, typename Read>
  std::vector<T> find_docs(mongoc_collection_t* from, const bson_t* filter, const bson_t* opts, Read read,
                           std::string_view what) const {
    CursorPtr cursor(mongoc_collection_find_with_opts(from, filter, opts, nullptr));
    std::vector<T> out;
    bson_error_t error;
    if (!store::for_each_doc(
            cursor.get(),
            [&](const bson_t* doc) {
              out.push_back(read(doc));
              return true;
            },
            error)) {
      fail(what, error, from);
    }
    return out;
  }

  // Connects on first use, so that an unreachable server is always reported as such, with its URI.
  void connect() {
    if (!clock) refresh_clock();
  }

  // A renewal's findAndModify of `which` with `update` (renew_filter(), with the server-time condition when
  // `with_condition`), bounded on the server by the call's maxTimeMS; false with `error` set when it failed.
  bool send_renewal(const LockSelector& which, const bson_t* update, bool with_condition, Reply& reply,
                    bson_error_t& error);

  // The server-time probe's find of `which` (renew_filter(), with the condition when `with_condition`), limit 1:
  // whether it read a document; nullopt with `error` set when it failed.
  std::optional<bool> probe_find(const LockSelector& which, bool with_condition, bson_error_t& error);
  // Says once, with -v, that the server refused the server-time condition (`refusal`, the driver's text) and that
  // renewals go without it from now on.
  void say_lacking(std::string_view refusal) const;

  // updateOne({selector}, update) (store/commands.hpp builds the update); returns matchedCount.
  std::int64_t update(const LockSelector& which, const bson_t* update, std::string_view what);

  // createIndexes on `target` with one ascending key per field. Returns false with `error` set on failure.
  // With `created_nothing`: false only when the reply says the server made an index (numIndexesAfter above
  // numIndexesBefore); true for "all indexes already exist" and for a reply without the counts (a mongos's).
  bool try_create_index(mongoc_collection_t* target, const char* name, std::initializer_list<const char*> fields,
                        bool unique, std::optional<Millis> expire_after, bson_error_t& error,
                        bool* created_nothing = nullptr) const;

  // What one listIndexes says of `index` in `target`: `plain` when an index on exactly its fields (ascending,
  // in this order), unique as it is, with no other option than its name and version is there, whatever its
  // name (store::index_difference()); else `other`, the name of one on those fields with other options and
  // how it `difference`s ("not unique", "sparse", ...). On FerretDB every createIndexes takes the registry's
  // write lock, even for an index that exists, and one that waited there for a pooled connection that open
  // cursors held wedged the server (docs/compatibility.md); the read takes none. Sent as a generic command,
  // once: libmongoc sends a read cursor's listIndexes again after a network error (a retryable read), each
  // copy with the whole socket timeout (red team 12, F2: 20 s where createIndexes took 10 s). `complete`: every
  // index was in the reply, or the collection does not exist (NamespaceNotFound, 26); `refused`: the server
  // refused the read (a role without listIndexes: Unauthorized, 13). Any other failure throws as fail().
  struct IndexListing {
    bool plain = false;
    bool complete = false;
    bool refused = false;
    std::string other;      // the name of an index on the fields that is not plain, "" when there is none
    std::string difference; // how it differs: "not unique", "sparse", "partial", "collation", ...
  };
  [[nodiscard]] IndexListing list_index(mongoc_collection_t* target, const Index& index) const;
  // The one-line refusal of `listing`'s `other` index for `index` in `target`: what it is, what needs `index`,
  // and the dropIndex that ends it (by name, or by key where the name is long or not plain text).
  [[nodiscard]] std::string index_refusal(mongoc_collection_t* target, const Index& index,
                                          const IndexListing& listing) const;
  // `index` listed (list_index()), else created (createIndexes; Error as fail()). For a unique index,
  // Error (69, index_refusal()) when an index on its fields is there that is not plain: MongoDB's createIndexes
  // refuses such a conflict itself, FerretDB v1's answers "all indexes already exist" over a non-unique index
  // of the same name and creates nothing, and two holders could then insert one name. So a createIndexes that
  // made nothing (try_create_index()) is believed only when a second listing shows the plain index; Error (69)
  // too when a listing said more indexes follow and none of the first 1,000 was it (no server keeps that many:
  // MongoDB allows 64). Returns false, unverified, only where listIndexes was refused (13) and createIndexes
  // made nothing: the caller proves the index by the server's behaviour (MongoStore::prove_unique_index(), the
  // lock documents') or refuses on FerretDB (open(): the queue's and the fences'); true otherwise.
  [[nodiscard]] bool ensure_index(mongoc_collection_t* target, const Index& index);
  // The refusal for an unverified `index` of `target` (ensure_index() false).
  [[nodiscard]] std::string unverified_index(mongoc_collection_t* target, const Index& index) const;

  // (Re)creates the client, collection handles and monitoring: connectTimeoutMS and
  // serverSelectionTimeoutMS `connect`, socketTimeoutMS `socket` (at least 1ms each).
  void open_client(Millis connect, Millis socket);

  // The queue collection, opened on first use; with `ensure_index`, its unique index on (name, seq) is
  // created first (once per store).
  mongoc_collection_t* queue_collection(bool ensure_index = false);
  bool queue_indexed = false; // listed or created by this client

  // The runs collection, opened on first use; with `ensure_index`, its index on (name, ended_at) is created
  // first (once per client).
  mongoc_collection_t* runs_collection(bool ensure_index = false);
  // "<collection>_lastrun", opened on first use.
  mongoc_collection_t* last_runs_collection();
  // purge_runs(): deletes the runs of `kind` of `name` beyond its `keep` newest (a find, then a delete).
  // Never a run whose keep_until is after `now` (RunRecord::keep_until).
  std::int64_t purge_beyond(mongoc_collection_t* from, std::string_view name, std::int64_t keep, RunKind kind,
                            ServerTime now);
  // Every document of a find with `filter` and `opts` (sort, projection), at most `limit`, in one reply
  // where they fit (batchSize = limit: no getMore). `what` names the read in the Error (69) thrown.
  std::vector<RunRecord> read_runs(mongoc_collection_t* from, const bson_t* filter, bson_t* opts, std::int64_t limit,
                                   const char* what);
  bool runs_indexed = false;

  // Re-reads the server's time when the driver has a newer hello reply than the one the clock came from:
  // the handshake on first use, then the driver's periodic server checks (heartbeatFrequencyMS).
  void refresh_clock();
  // Selects a server for writes (a primary): while members answered and none is primary, again every
  // 500 ms until the connect limit or the call's deadline, then Error (69) "no primary". nullptr (with
  // `error`) when selection failed otherwise.
  mongoc_server_description_t* select_primary(bson_error_t& error);
};

} // namespace mongolock
