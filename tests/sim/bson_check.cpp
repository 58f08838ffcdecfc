// mongolock-bson-check URI DATABASE COLLECTION: checks the simulator's BSON evaluator (bson_eval.hpp) against a
// real server (integration.bson_eval): MongoStore's own filters and updates (store/commands.hpp), and
// hand-made ones for every operator the evaluator implements, on the same documents in the evaluator and in
// COLLECTION (dropped first; the suite drops it at the end). For each filter the set of matched _ids must
// be the same, for each update the document written. Prints one line per difference and exits 1; 0 when
// the evaluator and the server agree on everything (it prints how many filters and updates it compared).
#include "bson_eval.hpp"

#include <mongolock/store/bson.hpp>
#include <mongolock/store/commands.hpp>

#include <mongoc/mongoc.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace {

using mongolock::LockRecord;
using mongolock::LockSelector;
using mongolock::Millis;
using mongolock::ServerTime;
using mongolock::TicketRecord;

// An owned document.
struct Doc {
  bson_t* p = bson_new();
  Doc() = default;
  explicit Doc(const bson_t* from) : p(bson_copy(from)) {}
  Doc(const Doc& o) : p(bson_copy(o.p)) {}
  Doc& operator=(const Doc& o) {
    if (this != &o) {
      bson_destroy(p);
      p = bson_copy(o.p);
    }
    return *this;
  }
  ~Doc() { bson_destroy(p); }
};

const ServerTime T0{Millis(1'780'000'000'000)}; // a fixed "now" (2026)
ServerTime at(long ms) { return T0 + Millis(ms); }

std::string id_of(const bson_t* doc) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, doc, "_id")) return "?";
  if (BSON_ITER_HOLDS_OID(&it)) {
    char hex[25];
    bson_oid_to_string(bson_iter_oid(&it), hex);
    return hex;
  }
  return BSON_ITER_HOLDS_UTF8(&it) ? bson_iter_utf8(&it, nullptr) : "?";
}

// The document with its fields sorted by key, as canonical extended JSON (order-free comparison).
std::string canonical(const bson_t* doc) {
  std::map<std::string, bson_iter_t> fields;
  bson_iter_t it;
  if (bson_iter_init(&it, doc)) {
    while (bson_iter_next(&it))
      fields[bson_iter_key(&it)] = it;
  }
  Doc sorted;
  for (auto& [key, value] : fields)
    bson_append_iter(sorted.p, key.c_str(), -1, &value);
  char* json = bson_as_canonical_extended_json(sorted.p, nullptr);
  std::string out = json;
  bson_free(json);
  return out;
}

std::string json(const bson_t* doc) {
  char* s = bson_as_canonical_extended_json(doc, nullptr);
  std::string out = s;
  bson_free(s);
  return out;
}

struct Checker {
  mongoc_collection_t* coll;
  sim::Server on;        // the server's clock ($$NOW) and whether it refuses $expr (FerretDB v1)
  std::vector<Doc> docs; // what the collection holds, in the evaluator
  int filters = 0;
  int updates = 0;
  int failures = 0;

  void reset(const std::vector<Doc>& corpus) {
    bson_error_t error;
    const Doc all;
    if (!mongoc_collection_delete_many(coll, all.p, nullptr, nullptr, &error)) die("deleteMany", error);
    docs = corpus;
    for (const auto& d : docs) {
      if (!mongoc_collection_insert_one(coll, d.p, nullptr, nullptr, &error)) die("insert", error);
    }
  }

  [[noreturn]] static void die(const char* what, const bson_error_t& error) {
    std::fprintf(stderr, "mongolock-bson-check: error: %s failed: %s\n", what, error.message);
    std::exit(2);
  }

  std::set<std::string> server_ids(const bson_t* filter) const {
    std::set<std::string> out;
    mongoc_cursor_t* cursor = mongoc_collection_find_with_opts(coll, filter, nullptr, nullptr);
    const bson_t* doc = nullptr;
    while (mongoc_cursor_next(cursor, &doc))
      out.insert(id_of(doc));
    bson_error_t error;
    if (mongoc_cursor_error(cursor, &error) && error.code == 238) {
      out = {"<refused>"}; // FerretDB v1: $expr (bson_eval.hpp: Refused)
    } else if (mongoc_cursor_error(cursor, &error)) {
      std::printf("FAIL: the server rejected the filter %s: %s\n", json(filter).c_str(), error.message);
      out.insert("<server error>");
    }
    mongoc_cursor_destroy(cursor);
    return out;
  }

  // The filter selects the same documents in the evaluator and on the server.
  void filter(const std::string& label, const bson_t* f) {
    ++filters;
    std::set<std::string> mine;
    try {
      for (const auto& d : docs) {
        if (sim::matches(f, d.p, on)) mine.insert(id_of(d.p));
      }
    } catch (const sim::Refused&) {
      mine = {"<refused>"};
    } catch (const sim::Unsupported& e) {
      mine = {std::string("<") + e.what() + ">"};
    }
    const auto theirs = server_ids(f);
    if (mine == theirs) return;
    ++failures;
    std::printf("FAIL: %s: filter %s: the evaluator matched %zu documents, the server %zu\n", label.c_str(),
                json(f).c_str(), mine.size(), theirs.size());
    for (const auto& id : mine)
      if (theirs.count(id) == 0) std::printf("  only the evaluator: %s\n", id.c_str());
    for (const auto& id : theirs)
      if (mine.count(id) == 0) std::printf("  only the server: %s\n", id.c_str());
  }

  // updateOne({_id}, u) on document `index` writes the same document in the evaluator and on the server.
  void update(const std::string& label, std::size_t index, const bson_t* u) {
    ++updates;
    const bson_t* before = docs.at(index).p;
    Doc by_id;
    bson_iter_t id;
    bson_iter_init_find(&id, before, "_id");
    bson_append_iter(by_id.p, "_id", 3, &id);
    Doc mine;
    sim::apply_update(u, before, mine.p);
    bson_error_t error;
    if (!mongoc_collection_update_one(coll, by_id.p, u, nullptr, nullptr, &error)) die("updateOne", error);
    mongoc_cursor_t* cursor = mongoc_collection_find_with_opts(coll, by_id.p, nullptr, nullptr);
    const bson_t* theirs = nullptr;
    const std::string server = mongoc_cursor_next(cursor, &theirs) ? canonical(theirs) : "<gone>";
    mongoc_cursor_destroy(cursor);
    docs.at(index) = mine;
    if (canonical(mine.p) == server) return;
    ++failures;
    std::printf("FAIL: %s: update %s:\n  evaluator %s\n  server    %s\n", label.c_str(), json(u).c_str(),
                canonical(mine.p).c_str(), server.c_str());
  }
};

std::string fmt_id(int n) {
  char hex[25];
  std::snprintf(hex, sizeof hex, "%024x", n);
  return hex;
}

// Lock documents as MongoStore writes them, varied around T0 in every field a filter reads; two programs,
// so that a filter without its program condition selects too much.
std::vector<LockRecord> lock_corpus() {
  std::vector<LockRecord> out;
  const long offsets[] = {-1000, -1, 0, 1, 1000};
  int n = 0;
  for (const char* program : {"a", "b"}) {
    for (const long expires : offsets) {
      for (const long other : {-1, 0, 1}) {
        LockRecord lock;
        lock.id = fmt_id(++n);
        lock.program = lock.name = program;
        lock.token = n % 3 == 0 ? "t1" : "t2";
        lock.process = n % 2 == 0 ? "h:1" : "h:2";
        lock.acquired_at = at(-5000);
        lock.expires_at = at(expires);
        lock.renewed_at = at(other * 500);
        lock.hold_until = n % 4 == 0 ? ServerTime{} : at(-other * 200);
        if (n % 5 == 0) lock.released_at = at(-other);
        lock.ttl = Millis(5000);
        lock.waiters = n % 3 == 1;
        if (n % 7 == 0) lock.fence = n;
        out.push_back(lock);
      }
    }
  }
  return out;
}

// Documents MongoStore never writes but a server may hold (an older version's, a hand-edited one): a null
// released_at, an expiry stored as a number, a string _id.
std::vector<Doc> odd_documents() {
  std::vector<Doc> out(3);
  BSON_APPEND_UTF8(out[0].p, "_id", "odd-null-released");
  BSON_APPEND_UTF8(out[0].p, "program", "a");
  BSON_APPEND_NULL(out[0].p, "released_at");
  BSON_APPEND_DATE_TIME(out[0].p, "expires_at", mongolock::store::to_bson_date(at(1000)));
  BSON_APPEND_UTF8(out[1].p, "_id", "odd-number-expiry");
  BSON_APPEND_UTF8(out[1].p, "program", "a");
  BSON_APPEND_INT64(out[1].p, "expires_at", mongolock::store::to_bson_date(at(1000)));
  BSON_APPEND_DOUBLE(out[1].p, "fence", 7.0);
  BSON_APPEND_UTF8(out[2].p, "_id", "odd-string-id");
  BSON_APPEND_UTF8(out[2].p, "program", "b");
  BSON_APPEND_INT32(out[2].p, "fence", 7);
  BSON_APPEND_DATE_TIME(out[2].p, "expires_at", mongolock::store::to_bson_date(at(-1000)));
  return out;
}

// Every selector MongoStore builds, and more: each condition alone and with the others, at and around T0.
std::vector<LockSelector> selectors(const std::vector<LockRecord>& corpus) {
  std::vector<LockSelector> out;
  for (const char* program : {"a", "b"}) {
    for (const long t : {-1, 0, 1}) {
      out.push_back({.program = program});
      out.push_back({.program = program, .expires_after = at(t)});
      out.push_back({.program = program, .hold_ends_by = at(t * 200)});
      out.push_back({.program = program, .expired_by = at(t)});
      out.push_back({.program = program, .renewed_before = at(t * 500)});
      out.push_back({.program = program,
                     .token = "t1",
                     .process = "h:1",
                     .expires_after = at(t),
                     .hold_ends_by = at(0),
                     .renewed_before = at(500),
                     .not_released = true});
    }
    out.push_back({.program = program, .process = "h:2", .not_released = true});
  }
  for (std::size_t i = 0; i < corpus.size(); i += 4) {
    const auto& lock = corpus[i];
    out.push_back({.program = lock.program, .id = lock.id, .token = lock.token});
    out.push_back({.program = lock.program, .id = lock.id, .token = lock.token, .expires_after = at(0)});
    out.push_back({.program = lock.program, .id = lock.id, .token = lock.token, .hold_ends_by = at(0)});
    out.push_back({.program = lock.program, .id = lock.id, .token = "t-other"});
    out.push_back({.program = "b", .id = lock.id, .token = lock.token}); // the id of a lock of another program
  }
  out.push_back({.program = "a", .id = "odd-string-id"});
  out.push_back({.program = "b", .id = "odd-string-id"});
  return out;
}

// Filters for the operators the evaluator implements beyond MongoStore's own, and across BSON types.
std::vector<Doc> operator_filters() {
  const auto date = [](const char* field, const char* op, long t) {
    Doc d;
    mongolock::store::append_date_condition(d.p, field, op, at(t));
    return d;
  };
  std::vector<Doc> out;
  for (const char* op : {"$lt", "$lte", "$gt", "$gte", "$ne"}) {
    out.push_back(date("expires_at", op, 0));
    out.push_back(date("released_at", op, 0));
  }
  const char* json[] = {
      R"({"fence": 7})",
      R"({"fence": {"$gte": 7}})",
      R"({"fence": {"$lt": 7.5}})",
      R"({"fence": {"$gt": 6}})",
      R"({"expires_at": {"$gt": 0}})",
      R"({"fence": {"$ne": 7}})",
      R"({"released_at": null})",
      R"({"released_at": {"$exists": true}})",
      R"({"released_at": {"$exists": false}})",
      R"({"program": {"$in": ["b", "c"]}})",
      R"({"program": {"$nin": ["b"]}})",
      R"({"fence": {"$in": [7, 14]}})",
      R"({"fence": {"$nin": [7]}})",
      R"({"token": {"$ne": "t1"}})",
      R"({"$or": [{"token": "t1"}, {"process": "h:1"}]})",
      R"({"$and": [{"token": "t1"}, {"process": "h:1"}]})",
      R"({"program": "a", "$or": [{"waiters": true}, {"fence": {"$gt": 10}}]})",
      R"({"waiters": {"$ne": true}})",
      R"({"token": {"$gt": "t1"}})",
      R"({"nothing": {"$exists": false}})",
      R"({"program": {"$gte": "b"}})",
      R"({"ttl_ms": {"$gte": 5000, "$lte": 5000}})",
      R"({"_id": {"$gt": "odd-o"}})",
  };
  for (const char* text : json) {
    bson_error_t error;
    bson_t* d = bson_new_from_json(reinterpret_cast<const std::uint8_t*>(text), -1, &error);
    if (d == nullptr) std::abort();
    out.emplace_back(d);
    bson_destroy(d);
  }
  return out;
}

// What the evaluator must refuse (throw Unsupported) rather than guess: operators MongoStore does not send,
// and $exists of a number, where the servers differ (docs/compatibility.md).
int check_unsupported(const std::vector<Doc>& docs) {
  const char* json[] = {
      R"({"fence": {"$exists": 1}})",
      R"({"program": {"$regex": "^a"}})",
      R"({"a.b": 1})",
      R"({"$nor": [{"program": "a"}]})",
      R"({"fence": {"$mod": [2, 0]}})",
      R"({"program": {"$eq": "a"}})",
      R"({"$or": []})",
      R"({"program": {"$in": "a"}})",
  };
  int failures = 0;
  for (const char* text : json) {
    bson_error_t error;
    bson_t* filter = bson_new_from_json(reinterpret_cast<const std::uint8_t*>(text), -1, &error);
    if (filter == nullptr) std::abort();
    try {
      for (const auto& d : docs)
        (void)sim::matches(filter, d.p);
      std::printf("FAIL: the evaluator accepted the unsupported filter %s\n", text);
      ++failures;
    } catch (const sim::Unsupported&) {}
    bson_destroy(filter);
  }
  return failures;
}

void check_locks(Checker& c) {
  const auto corpus = lock_corpus();
  std::vector<Doc> docs;
  for (const auto& lock : corpus) {
    docs.emplace_back();
    mongolock::store::to_bson(lock, docs.back().p);
  }
  for (const auto& odd : odd_documents())
    docs.push_back(odd);
  c.reset(docs);
  for (const auto& which : selectors(corpus)) {
    Doc f;
    mongolock::store::append_selector(f.p, which);
    c.filter("append_selector", f.p);
    Doc r;
    mongolock::store::renew_filter(which, r.p, false);
    c.filter("renew_filter", r.p);
    Doc t;
    mongolock::store::renew_filter(which, t.p, true);
    c.filter("renew_filter (server time)", t.p);
  }
  for (const auto& f : operator_filters())
    c.filter("operator", f.p);
  c.failures += check_unsupported(docs);
  for (std::size_t i = 0; i < corpus.size(); i += 3) {
    Doc u;
    if (i % 2 == 0) mongolock::store::renew_update(at(7000), at(2000), Millis(6000), i % 4 == 0, u.p);
    if (i % 2 == 1) mongolock::store::release_update(at(100), at(3000), u.p);
    c.update(i % 2 == 0 ? "renew_update" : "release_update", i, u.p);
    Doc f;
    mongolock::store::fence_update(static_cast<std::int64_t>(i) + 100, f.p);
    c.update("fence_update", i, f.p);
  }
  Doc unset;
  bson_t fields;
  BSON_APPEND_DOCUMENT_BEGIN(unset.p, "$unset", &fields);
  BSON_APPEND_UTF8(&fields, "released_at", "");
  BSON_APPEND_UTF8(&fields, "nothing", "");
  bson_append_document_end(unset.p, &fields);
  c.update("$unset", 5, unset.p);
  c.update("$unset", 6, unset.p);
}

// The server-time condition ($expr with $$NOW) on documents that expire around the server's own now (read just
// before; the documents are a minute or more from it), and of every kind an expiry can have: MongoStore's filter,
// and each comparison operator both ways round. On FerretDB v1 the server refuses each filter on the first
// document that reaches its $expr, and so must the evaluator (Server::refuses_expr).
void check_server_time(Checker& c, std::int64_t now_ms) {
  std::vector<Doc> docs;
  int n = 200;
  for (const long offset : {-3'600'000L, -60'000L, 60'000L, 3'600'000L}) {
    for (const char* token : {"t1", "t2"}) {
      docs.emplace_back();
      const auto id = fmt_id(++n);
      BSON_APPEND_UTF8(docs.back().p, "_id", id.c_str());
      BSON_APPEND_UTF8(docs.back().p, "program", "a");
      BSON_APPEND_UTF8(docs.back().p, "token", token);
      BSON_APPEND_DATE_TIME(docs.back().p, "expires_at", now_ms + offset);
    }
  }
  for (int kind = 0; kind < 4; ++kind) { // an expiry that is no date: missing, a number, a string, null
    docs.emplace_back();
    const auto id = fmt_id(++n);
    BSON_APPEND_UTF8(docs.back().p, "_id", id.c_str());
    BSON_APPEND_UTF8(docs.back().p, "program", "b");
    if (kind == 1) BSON_APPEND_INT64(docs.back().p, "expires_at", now_ms + 60'000);
    if (kind == 2) BSON_APPEND_UTF8(docs.back().p, "expires_at", "later");
    if (kind == 3) BSON_APPEND_NULL(docs.back().p, "expires_at");
  }
  c.reset(docs);
  for (const char* program : {"a", "b", "zz"}) {
    for (const char* token : {"t1", "t3"}) {
      Doc f;
      mongolock::store::renew_filter({.program = program, .token = token}, f.p, true);
      c.filter("renew_filter (server time, around now)", f.p);
    }
  }
  for (const char* op : {"$gt", "$gte", "$lt", "$lte"}) {
    for (const bool swapped : {false, true}) {
      Doc f;
      bson_t expr;
      bson_t args;
      BSON_APPEND_DOCUMENT_BEGIN(f.p, "$expr", &expr);
      bson_append_array_begin(&expr, op, -1, &args);
      BSON_APPEND_UTF8(&args, "0", swapped ? "$$NOW" : "$expires_at");
      BSON_APPEND_UTF8(&args, "1", swapped ? "$expires_at" : "$$NOW");
      bson_append_array_end(&expr, &args);
      bson_append_document_end(f.p, &expr);
      c.filter("operator ($expr)", f.p);
    }
  }
}

void check_tickets(Checker& c) {
  std::vector<TicketRecord> tickets;
  std::vector<Doc> docs;
  int n = 100;
  for (const char* name : {"a", "b", "c"}) {
    for (const long t : {-1, 0, 1}) {
      TicketRecord ticket{fmt_id(++n), name, n, "h:1", at(-9000), at(t)};
      tickets.push_back(ticket);
      docs.emplace_back();
      mongolock::store::to_bson(ticket, docs.back().p);
    }
  }
  c.reset(docs);
  for (std::size_t i = 0; i < tickets.size(); i += 2) {
    for (const long t : {-1, 0, 1}) {
      Doc renew;
      mongolock::store::ticket_renew_filter(tickets[i].id, at(t), renew.p);
      c.filter("ticket_renew_filter", renew.p);
      Doc remove;
      mongolock::store::ticket_remove_filter(tickets[i].id, at(t), remove.p);
      c.filter("ticket_remove_filter", remove.p);
    }
    Doc remove;
    mongolock::store::ticket_remove_filter(tickets[i].id, std::nullopt, remove.p);
    c.filter("ticket_remove_filter", remove.p);
  }
  for (const auto& names : std::vector<std::vector<std::string>>{{}, {"a"}, {"a", "c"}, {"zz"}}) {
    Doc f;
    mongolock::store::tickets_filter(names, f.p);
    c.filter("tickets_filter", f.p);
  }
  for (std::size_t i = 0; i < tickets.size(); i += 4) {
    Doc u;
    mongolock::store::ticket_renew_update(at(60000), u.p);
    c.update("ticket_renew_update", i, u.p);
  }
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: mongolock-bson-check URI DATABASE COLLECTION\n");
    return 2;
  }
  mongoc_init();
  bson_error_t error;
  mongoc_uri_t* uri = mongoc_uri_new_with_error(argv[1], &error);
  if (uri == nullptr) Checker::die("the URI", error);
  mongoc_client_t* client = mongoc_client_new_from_uri(uri);
  mongoc_collection_t* coll = mongoc_client_get_collection(client, argv[2], argv[3]);
  // The server's kind (FerretDB's buildInfo names its version) and clock (hello's localTime).
  const auto command = [&](const char* name) {
    bson_t cmd;
    bson_t reply;
    bson_init(&cmd);
    BSON_APPEND_INT32(&cmd, name, 1);
    bson_error_t err;
    if (!mongoc_client_command_simple(client, "admin", &cmd, nullptr, &reply, &err)) Checker::die(name, err);
    bson_destroy(&cmd);
    Doc out(&reply);
    bson_destroy(&reply);
    return out;
  };
  bson_iter_t it;
  const auto info = command("buildInfo");
  const bool ferretdb = bson_iter_init_find(&it, info.p, "ferretdbVersion");
  const auto hello = command("hello");
  if (!bson_iter_init_find(&it, hello.p, "localTime") || !BSON_ITER_HOLDS_DATE_TIME(&it)) {
    std::fprintf(stderr, "mongolock-bson-check: error: hello has no localTime\n");
    return 2;
  }
  const auto now_ms = bson_iter_date_time(&it);
  Checker c{coll, sim::Server{now_ms, ferretdb}, {}};
  check_locks(c);
  check_server_time(c, now_ms);
  check_tickets(c);
  std::printf("mongolock-bson-check: %d filters and %d updates compared, %d differ\n", c.filters, c.updates,
              c.failures);
  mongoc_collection_destroy(coll);
  mongoc_client_destroy(client);
  mongoc_uri_destroy(uri);
  mongoc_cleanup();
  return c.failures == 0 ? 0 : 1;
}
