// MongoStore: the queue of waiters (tickets) and the wake-up events (a capped collection, a tailable cursor).
#include <mongolock/store/commands.hpp>
#include <mongolock/store/impl.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string_view>
#include <thread>

namespace mongolock {

using namespace store;

// --- the queue of waiters ---------------------------------------------------------------------------

namespace store {

void to_bson(const TicketRecord& ticket, bson_t* doc) {
  append_id(doc, ticket.id);
  append_string(doc, "name", ticket.name);
  BSON_APPEND_INT64(doc, "seq", ticket.seq);
  append_string(doc, "process", ticket.process);
  BSON_APPEND_DATE_TIME(doc, "since", to_bson_date(ticket.since));
  BSON_APPEND_DATE_TIME(doc, "expires_at", to_bson_date(ticket.expires_at));
}

TicketRecord ticket_from_bson(const bson_t* doc) {
  TicketRecord ticket;
  bson_iter_t it;
  if (!bson_iter_init(&it, doc)) return ticket;
  while (bson_iter_next(&it)) {
    const std::string_view key = bson_iter_key(&it);
    if (key == "_id") {
      ticket.id = iter_id(it);
    } else if (key == "name") {
      ticket.name = iter_string(it);
    } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "seq") {
      ticket.seq = number(it).value_or(0);
    } else if (key == "process") {
      ticket.process = iter_string(it);
    } else if (BSON_ITER_HOLDS_DATE_TIME(&it) && key == "since") {
      ticket.since = from_bson_date(bson_iter_date_time(&it));
    } else if (BSON_ITER_HOLDS_DATE_TIME(&it) && key == "expires_at") {
      ticket.expires_at = from_bson_date(bson_iter_date_time(&it));
    }
  }
  return ticket;
}

void ticket_renew_filter(std::string_view id, ServerTime now, bson_t* out) {
  append_id(out, id);
  append_date_condition(out, "expires_at", "$gt", now);
}

void ticket_renew_update(ServerTime expires_at, bson_t* out) {
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(out, "$set", &set);
  BSON_APPEND_DATE_TIME(&set, "expires_at", to_bson_date(expires_at));
  bson_append_document_end(out, &set);
}

void ticket_remove_filter(std::string_view id, std::optional<ServerTime> expired_at_or_before, bson_t* out) {
  append_id(out, id);
  if (expired_at_or_before) append_date_condition(out, "expires_at", "$lte", *expired_at_or_before);
}

void tickets_filter(const std::vector<std::string>& names, bson_t* out) {
  if (!names.empty()) {
    bson_t condition, in;
    BSON_APPEND_DOCUMENT_BEGIN(out, "name", &condition);
    BSON_APPEND_ARRAY_BEGIN(&condition, "$in", &in);
    for (std::size_t i = 0; i < names.size(); ++i) {
      const auto key = std::to_string(i);
      bson_append_utf8(&in, key.c_str(), -1, names[i].data(), static_cast<int>(names[i].size()));
    }
    bson_append_array_end(&condition, &in);
    bson_append_document_end(out, &condition);
  }
}

} // namespace store

mongoc_collection_t* MongoStore::Impl::queue_collection(bool ensure_index) {
  return open(queue, "_queue", ensure_index ? &k_queue_index : nullptr, &queue_indexed);
}

std::int64_t MongoStore::highest_ticket() {
  auto& impl = *m_impl;
  impl.connect();
  auto* queue = impl.queue_collection();
  Bson filter;
  Bson opts;
  append_sort(opts.get(), {{"seq", -1}});
  BSON_APPEND_INT64(opts.get(), "limit", 1);
  const auto found =
      impl.find_docs<TicketRecord>(queue, filter.get(), opts.get(), ticket_from_bson, "read of the queue of waiters");
  return found.empty() ? 0 : found.front().seq;
}

bool MongoStore::insert_ticket(TicketRecord& ticket) {
  auto& impl = *m_impl;
  impl.connect();
  auto* queue = impl.queue_collection(/*ensure_index=*/true);
  ticket.id = new_object_id();
  Bson doc;
  to_bson(ticket, doc.get());
  Reply reply;
  bson_error_t error;
  if (mongoc_collection_insert_one(queue, doc.get(), impl.write_opts.get(), reply.get(), &error)) return true;
  if (error.code == MONGOC_ERROR_DUPLICATE_KEY) return false;
  impl.fail_write(fmt::format("insert of a queue ticket for '{}'", ticket.name), error,
                  "nothing: a ticket nobody renews expires on its own", "_queue");
}

std::int64_t MongoStore::renew_ticket(std::string_view id, ServerTime now, ServerTime expires_at) {
  auto& impl = *m_impl;
  impl.connect();
  Bson selector;
  ticket_renew_filter(id, now, selector.get());
  Bson update;
  ticket_renew_update(expires_at, update.get());
  Reply reply;
  bson_error_t error;
  if (!mongoc_collection_update_one(impl.queue_collection(), selector.get(), update.get(), impl.write_opts.get(),
                                    reply.get(), &error)) {
    impl.fail("renewal of a queue ticket", error, "_queue");
  }
  return reply.integer("matchedCount");
}

std::int64_t MongoStore::remove_ticket(std::string_view id, std::optional<ServerTime> expired_at_or_before) {
  auto& impl = *m_impl;
  impl.connect();
  Bson selector;
  ticket_remove_filter(id, expired_at_or_before, selector.get());
  Reply reply;
  bson_error_t error;
  if (!mongoc_collection_delete_one(impl.queue_collection(), selector.get(), impl.write_opts.get(), reply.get(),
                                    &error)) {
    impl.fail("delete of a queue ticket", error, "_queue");
  }
  return reply.integer("deletedCount");
}

std::vector<TicketRecord> MongoStore::tickets(const std::vector<std::string>& names) {
  auto& impl = *m_impl;
  impl.connect();
  Bson filter;
  tickets_filter(names, filter.get());
  Bson opts;
  append_sort(opts.get(), {{"seq", 1}, {"name", 1}});
  BSON_APPEND_INT64(opts.get(), "batchSize", k_one_reply); // every ticket in the first reply
  // (A stored ticket does not show that the unique index is in force: an expired one outlives a change of the
  // indexes, red team 12b, G2. Every waiter lists the index before its first ticket: a read.)
  return impl.find_docs<TicketRecord>(impl.queue_collection(), filter.get(), opts.get(), ticket_from_bson,
                                      "read of the queue of waiters");
}

namespace {

// Appends {t: {<op>: t}} to `filter`: the wake-up events by their time (ms since the epoch, server clock).
void append_events_time(bson_t* filter, const char* op, std::int64_t t) {
  bson_t range;
  BSON_APPEND_DOCUMENT_BEGIN(filter, "t", &range);
  BSON_APPEND_INT64(&range, op, t);
  bson_append_document_end(filter, &range);
}

mongoc_collection_t* open_events(mongoc_client_t* client, const StoreConfig& config, CollectionPtr& events) {
  if (!events) {
    // In a database of its own: on FerretDB v1 (SQLite) an open tailable cursor keeps its database from
    // creating collections and indexes ("database is locked").
    const auto database = config.database + "_events";
    const auto name = config.collection + "_events";
    events.reset(mongoc_client_get_collection(client, database.c_str(), name.c_str()));
  }
  return events.get();
}

// Inserts one event per name (at most two), each {name, ticket (unless empty), t}.
bool insert_events(mongoc_collection_t* events, std::initializer_list<std::string_view> names, std::string_view ticket,
                   std::int64_t t, const bson_t* write_opts, bson_error_t& error) {
  Bson docs[2];
  const bson_t* pointers[2] = {docs[0].get(), docs[1].get()};
  std::size_t count = 0;
  for (const auto name : names) {
    if (count == 2) break;
    append_string(docs[count].get(), "name", name);
    if (!ticket.empty()) append_string(docs[count].get(), "ticket", ticket);
    BSON_APPEND_INT64(docs[count].get(), "t", t);
    ++count;
  }
  Reply reply;
  return mongoc_collection_insert_many(events, pointers, count, write_opts, reply.get(), &error);
}

class MongoEventFeed final : public EventFeed {
public:
  // `fail` throws the Error for a driver error message.
  // `open` and `retired`: the store's count of open feeds and its retired clients (MongoStore::Impl::retired).
  MongoEventFeed(int& open, std::vector<ClientPtr>& retired, mongoc_cursor_t* cursor,
                 std::function<void(const char*, bool)> fail)
      : m_open(open), m_retired(retired), m_cursor(cursor), m_fail(std::move(fail)) {
    ++m_open;
  }
  ~MongoEventFeed() override {
    m_cursor.reset(); // before its client (Impl::retired)
    if (--m_open == 0) m_retired.clear();
  }
  MongoEventFeed(const MongoEventFeed&) = delete;
  MongoEventFeed& operator=(const MongoEventFeed&) = delete;

  std::optional<WakeEvent> wait(const std::vector<std::string>& names) override {
    const bson_t* doc = nullptr;
    // Read what is there (next() sends a getMore when the batch read so far is used up, which waits up to
    // the await time when there is nothing new); stop at the first event of one of our names.
    while (mongoc_cursor_next(m_cursor.get(), &doc)) {
      bson_iter_t it;
      if (!bson_iter_init_find(&it, doc, "name")) continue;
      WakeEvent event{iter_string(it), {}};
      if (std::find(names.begin(), names.end(), event.name) == names.end()) continue;
      if (bson_iter_init_find(&it, doc, "ticket")) event.ticket = iter_string(it);
      return event;
    }
    bson_error_t error;
    // A network error (a silent or lost connection) is transient: the Waiter then knows the server could not be
    // reached (WaitQueue::unreachable(), red team 7 F4).
    if (mongoc_cursor_error(m_cursor.get(), &error)) m_fail(error.message, error.domain == MONGOC_ERROR_STREAM);
    if (!mongoc_cursor_more(m_cursor.get())) m_fail("the server closed the tailable cursor", false);
    return std::nullopt;
  }

private:
  int& m_open;
  std::vector<ClientPtr>& m_retired;
  CursorPtr m_cursor;
  std::function<void(const char*, bool)> m_fail; // message, transient (a network error)
};

} // namespace

bool store::sqlite_locked(std::string_view message) {
  return message.find("database is locked (517)") != std::string_view::npos;
}

void MongoStore::append_event(std::string_view name, std::string_view ticket) {
  auto& impl = *m_impl;
  impl.connect();
  auto* events = open_events(impl.client.get(), impl.config, impl.events);
  for (int attempt = 1;; ++attempt) {
    bson_error_t error;
    if (insert_events(events, {name}, ticket, to_bson_date(clock().now()), impl.write_opts.get(), error)) return;
    // FerretDB v1 on SQLite refuses a write to the events database while another client's tailable cursor
    // reads it ("database is locked (517)", docs/compatibility.md); nothing was written: try again shortly
    // (a repeated event is one more wake-up, harmless).
    if (attempt < 4 && sqlite_locked(error.message)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
      ++impl.monitor.resent["insert"];
      impl.log.debugf("the server refused the wake-up event for '{}' (database is locked); sending it again", name);
      continue;
    }
    impl.fail(fmt::format("append of a wake-up event for '{}'", name), error, Impl::events_suffix);
  }
}

bool MongoStore::Impl::is_ferretdb() {
  if (!ferretdb) {
    Bson command;
    BSON_APPEND_INT32(command.get(), "buildInfo", 1);
    Reply reply;
    bson_error_t error;
    if (!mongoc_client_command_simple(client.get(), "admin", command.get(), nullptr, reply.get(), &error)) {
      fail_server("buildInfo", error);
    }
    bson_iter_t it;
    ferretdb = bson_iter_init_find(&it, reply.get(), "ferretdbVersion");
  }
  return *ferretdb;
}

namespace {

// The newest events a waiter reads before it tails (and the trim keeps, FerretDB only).
constexpr std::int64_t k_events_kept = 10;
// Events younger than this are kept too (FerretDB only): a cursor that has not been read for this long
// (its last event trimmed) is rare; it fails and is made anew (Waiter::on_feed_error).
constexpr std::int64_t k_events_kept_ms = 2'000;

} // namespace

void MongoStore::Impl::create_events_collection() {
  Bson opts;
  BSON_APPEND_BOOL(opts.get(), "capped", true);
  BSON_APPEND_INT64(opts.get(), "size", 1 << 20);
  // MongoDB trims a capped collection to `max` on every insert; FerretDB v1 only once a minute (see
  // trim_events()).
  BSON_APPEND_INT64(opts.get(), "max", 100);
  const auto database_name = config.database + "_events";
  std::unique_ptr<mongoc_database_t, Deleter<mongoc_database_destroy>> database(
      mongoc_client_get_database(client.get(), database_name.c_str()));
  bson_error_t error;
  mongoc_collection_t* created =
      mongoc_database_create_collection(database.get(), mongoc_collection_get_name(events.get()), opts.get(), &error);
  if (created != nullptr) {
    mongoc_collection_destroy(created);
  } else if (error.code != 48) { // 48: NamespaceExists
    fail("creation of the capped collection of wake-up events", error, events_suffix);
  }
}

// The `t` of the newest events (at most k_events_kept), newest first.
std::vector<std::int64_t> MongoStore::Impl::newest_event_times() {
  Bson all;
  Bson opts;
  append_sort(opts.get(), {{"$natural", -1}});
  BSON_APPEND_INT64(opts.get(), "limit", k_events_kept);
  const auto times = find_docs<std::optional<std::int64_t>>(
      events.get(), all.get(), opts.get(),
      [](const bson_t* doc) {
        bson_iter_t it;
        return bson_iter_init_find(&it, doc, "t") ? number(it) : std::nullopt;
      },
      "read of the newest wake-up events");
  std::vector<std::int64_t> found;
  for (const auto& t : times) {
    if (!t) break; // not ours: tail from markers
    found.push_back(*t);
  }
  return found;
}

// FerretDB v1 only: deletes the events older than both the k_events_kept newest and k_events_kept_ms.
// Every awaitData getMore of every waiting cursor re-runs its query over the whole collection each 10 ms,
// and FerretDB trims to `max` only once a minute: the handover slowed as events piled up
// (docs/benchmarks.md). A FerretDB cursor fails when the last event it read is gone (it looks for that
// record again on every getMore), so the newest events stay. Not on MongoDB: there a deleted event under
// a cursor loses its place (CappedPositionLost), and its capped collection never holds more than `max`.
// Best effort: a failure is tried once more at once (the delete is idempotent; FerretDB's SQLite backend once
// answered "no such table" for the collection that the same waiter had just read, in a CI run of session 10), then
// leaves the events to FerretDB's own trim.
void MongoStore::Impl::trim_events(const std::vector<std::int64_t>& newest, std::int64_t now) {
  if (static_cast<std::int64_t>(newest.size()) < k_events_kept || !is_ferretdb()) return;
  const auto before = std::min(*std::min_element(newest.begin(), newest.end()), now - k_events_kept_ms);
  Bson filter;
  append_events_time(filter.get(), "$lt", before);
  for (const bool last : {false, true}) {
    Reply reply;
    bson_error_t error;
    if (mongoc_collection_delete_many(events.get(), filter.get(), nullptr, reply.get(), &error)) {
      log.debugf("trimmed {} wake-up events (FerretDB)", reply.integer("deletedCount"));
      return;
    }
    log.debugf("could not trim the wake-up events ({}){}", driver_text(error), last ? "" : "; once more");
  }
}

void MongoStore::Impl::recreate_events_collection(std::string_view reason) {
  bson_error_t error;
  if (!mongoc_collection_drop(events.get(), &error) && error.code != 26) { // 26: NamespaceNotFound
    fail("drop of the wake-up events collection that is not capped", error, events_suffix);
  }
  create_events_collection();
  log.debugf("the wake-up events collection was not capped ({}): a release's insert made it before any waiter "
             "created it; dropped and created capped",
             reason);
}

std::unique_ptr<EventFeed> MongoStore::follow_events(Millis await) {
  try {
    return follow_events_once(await);
  } catch (const Error& e) {
    // A release that wakes waiters inserts its event whether or not a waiter ever created the capped
    // collection; the first such insert makes a plain collection, and every waiter after it would poll
    // for good ("tailable cursor requested on non capped collection"; FerretDB also "$natural sort for
    // non-capped collection is not supported"). Found in session 5: a run held 150 ms before any waiter.
    const std::string_view message = e.what();
    if (message.find("non capped") == std::string_view::npos && message.find("non-capped") == std::string_view::npos) {
      throw;
    }
    m_impl->recreate_events_collection(message);
    return follow_events_once(await);
  }
}

std::unique_ptr<EventFeed> MongoStore::follow_events_once(Millis await) {
  auto& impl = *m_impl;
  impl.connect();
  auto* events = open_events(impl.client.get(), impl.config, impl.events);
  impl.create_events_collection();
  // Tail from the two newest events when there are two (no insert: every stored event makes FerretDB's
  // waiting cursors slower); else from two marker events inserted now. The older of the two is the
  // cursor's first batch; the newer one, or a marker, is the first event read (a spurious wake-up).
  const auto newest = impl.newest_event_times();
  const auto now = to_bson_date(clock().now());
  const bool markers = newest.size() < 2;
  const auto from = markers ? now : std::min(newest[0], newest[1]);
  bson_error_t error;
  if (markers && !insert_events(events, {"", ""}, {}, from, impl.write_opts.get(), error)) {
    impl.fail("insert of wake-up event markers", error, Impl::events_suffix);
  }
  Bson filter;
  append_events_time(filter.get(), "$gte", from);
  Bson opts;
  BSON_APPEND_BOOL(opts.get(), "tailable", true);
  BSON_APPEND_BOOL(opts.get(), "awaitData", true);
  BSON_APPEND_INT64(opts.get(), "batchSize", 1);
  BSON_APPEND_INT64(opts.get(), "maxAwaitTimeMS", std::clamp<Millis::rep>(await.count(), 1, 60'000));
  auto fail = [&impl](const char* message, bool transient = false) {
    throw(transient ? unreachable_error : unavailable_error)(
        fmt::format("following the wake-up events of {}_events.{}_events failed: {}", impl.config.database,
                    impl.config.collection, scrub_secrets(message, impl.config.uri)));
  };
  mongoc_cursor_t* cursor = mongoc_collection_find_with_opts(events, filter.get(), opts.get(), nullptr);
  auto feed = std::make_unique<MongoEventFeed>(impl.feeds_open, impl.retired, cursor, fail);
  // The first batch (a marker; no getMore, no waiting): checks that the cursor stays open.
  const bson_t* first = nullptr;
  if (!mongoc_cursor_next(cursor, &first)) {
    if (mongoc_cursor_error(cursor, &error)) fail(error.message);
    fail("the tailable cursor returned no marker");
  }
  if (!mongoc_cursor_more(cursor)) fail("the server closed the tailable cursor");
  // Later getMores take whatever has come (FerretDB needs the small batch only for the first one).
  mongoc_cursor_set_batch_size(cursor, 100);
  impl.trim_events(newest, now); // after the first batch: the cursor has its place
  return feed;
}

} // namespace mongolock
