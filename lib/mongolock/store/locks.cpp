// MongoStore: the lock documents (insert, renew, release, purge, find, list) and the fencing tokens.
#include <mongolock/store/commands.hpp>
#include <mongolock/store/impl.hpp>
#include <mongolock/unique_seq.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

namespace mongolock {

using namespace store;

namespace store {

void to_bson(const LockRecord& lock, bson_t* doc) {
  append_id(doc, lock.id);
  append_string(doc, "program", lock.program);
  append_string(doc, "name", lock.name);
  if (lock.slot > 0) BSON_APPEND_INT32(doc, "slot", lock.slot);
  append_string(doc, "process", lock.process);
  append_string(doc, "token", lock.token);
  BSON_APPEND_DATE_TIME(doc, "acquired_at", to_bson_date(lock.acquired_at));
  BSON_APPEND_DATE_TIME(doc, "expires_at", to_bson_date(lock.expires_at));
  BSON_APPEND_DATE_TIME(doc, "renewed_at", to_bson_date(lock.renewed_at));
  BSON_APPEND_DATE_TIME(doc, "hold_until", to_bson_date(lock.hold_until));
  if (lock.released_at) BSON_APPEND_DATE_TIME(doc, "released_at", to_bson_date(*lock.released_at));
  BSON_APPEND_INT64(doc, "ttl_ms", lock.ttl.count());
  if (lock.run_ttl > Millis(0)) BSON_APPEND_INT64(doc, "run_ttl_ms", lock.run_ttl.count());
  append_string(doc, "host", lock.host);
  append_string(doc, "user", lock.user);
  if (!lock.command.empty()) append_string(doc, "command", lock.command);
  if (lock.fence) BSON_APPEND_INT64(doc, "fence", *lock.fence);
  if (lock.waiters) BSON_APPEND_BOOL(doc, "waiters", true);
  if (!lock.ticket.empty()) append_string(doc, "ticket", lock.ticket);
  if (!lock.boot_id.empty()) append_string(doc, "boot_id", lock.boot_id);
  if (!lock.pid_ns.empty()) append_string(doc, "pid_ns", lock.pid_ns);
  if (lock.pid_start && *lock.pid_start != 0) BSON_APPEND_INT64(doc, "pid_start", *lock.pid_start);
  if (lock.replace_seq) BSON_APPEND_INT64(doc, "replace_seq", *lock.replace_seq);
}

} // namespace store

namespace {

// How one field of a lock document is read into a LockRecord; a value of an unexpected type is ignored.
using LockField = void (*)(LockRecord&, const bson_iter_t&);

template <std::string LockRecord::*Member> void string_field(LockRecord& lock, const bson_iter_t& it) {
  lock.*Member = iter_string(it);
}

// A field that the protocol's decisions read, found with another BSON type: the first is named in
// LockRecord::malformed (the others are left at their defaults).
void note_malformed(LockRecord& lock, const bson_iter_t& it, std::string_view expected) {
  if (lock.malformed.empty()) lock.malformed = fmt::format("{} is not {}", bson_iter_key(&it), expected);
}

template <ServerTime LockRecord::*Member> void date_field(LockRecord& lock, const bson_iter_t& it) {
  if (BSON_ITER_HOLDS_DATE_TIME(&it)) {
    lock.*Member = from_bson_date(bson_iter_date_time(&it));
  } else {
    note_malformed(lock, it, "a date");
  }
}

template <std::string LockRecord::*Member> void checked_string_field(LockRecord& lock, const bson_iter_t& it) {
  if (BSON_ITER_HOLDS_UTF8(&it)) {
    lock.*Member = iter_string(it);
  } else {
    note_malformed(lock, it, "a string");
  }
}
// The fields of a lock document (THE LOCK DOCUMENT in the man page), by name.
const std::map<std::string_view, LockField, std::less<>>& lock_fields() {
  static const std::map<std::string_view, LockField, std::less<>> fields{
      {"_id", [](LockRecord& l, const bson_iter_t& it) { l.id = iter_id(it); }},
      {"program", checked_string_field<&LockRecord::program>},
      {"name", string_field<&LockRecord::name>},
      {"slot", [](LockRecord& l, const bson_iter_t& it) { l.slot = static_cast<int>(number(it).value_or(l.slot)); }},
      {"process", checked_string_field<&LockRecord::process>},
      {"token", checked_string_field<&LockRecord::token>},
      {"host", string_field<&LockRecord::host>},
      {"user", string_field<&LockRecord::user>},
      {"command", string_field<&LockRecord::command>},
      {"acquired_at", date_field<&LockRecord::acquired_at>},
      {"expires_at", date_field<&LockRecord::expires_at>},
      {"renewed_at", date_field<&LockRecord::renewed_at>},
      {"hold_until", date_field<&LockRecord::hold_until>},
      {"released_at",
       [](LockRecord& l, const bson_iter_t& it) {
         if (BSON_ITER_HOLDS_DATE_TIME(&it)) l.released_at = from_bson_date(bson_iter_date_time(&it));
       }},
      {"ttl_ms", [](LockRecord& l, const bson_iter_t& it) { l.ttl = Millis(number(it).value_or(l.ttl.count())); }},
      {"run_ttl_ms",
       [](LockRecord& l, const bson_iter_t& it) { l.run_ttl = Millis(number(it).value_or(l.run_ttl.count())); }},
      {"fence", [](LockRecord& l, const bson_iter_t& it) { l.fence = number(it) ? number(it) : l.fence; }},
      {"waiters",
       [](LockRecord& l, const bson_iter_t& it) {
         if (BSON_ITER_HOLDS_BOOL(&it)) l.waiters = bson_iter_bool(&it);
       }},
      {"ticket", string_field<&LockRecord::ticket>},
      {"boot_id", string_field<&LockRecord::boot_id>},
      {"pid_ns", string_field<&LockRecord::pid_ns>},
      {"pid_start", [](LockRecord& l, const bson_iter_t& it) { l.pid_start = number(it) ? number(it) : l.pid_start; }},
      {"replace_seq",
       [](LockRecord& l, const bson_iter_t& it) { l.replace_seq = number(it) ? number(it) : l.replace_seq; }},
  };
  return fields;
}

} // namespace

namespace store {

// Reads a lock document; fields of unexpected types are left at their defaults, and the first of the
// protocol's own (dates, program, process, token) is named in LockRecord::malformed, as is a missing
// expires_at.
LockRecord from_bson(const bson_t* doc) {
  LockRecord lock;
  bson_iter_t it;
  if (!bson_iter_init(&it, doc)) return lock;
  const auto& fields = lock_fields();
  bool has_expiry = false;
  while (bson_iter_next(&it)) {
    const std::string_view key(bson_iter_key(&it));
    has_expiry = has_expiry || key == "expires_at";
    if (const auto field = fields.find(key); field != fields.end()) field->second(lock, it);
  }
  if (!has_expiry && lock.malformed.empty()) lock.malformed = "expires_at is missing";
  if (lock.name.empty()) lock.name = lock.program;
  return lock;
}

// place_matches() as a filter: {boot_id: {$in: [B, null]}, pid_ns: {$in: [N, null]}, pid_start: {$in: [S,
// null]}} (null matches a missing field); an unknown boot or namespace (k_unknown_place), or no start,
// matches only a missing field.
void append_place(bson_t* doc, const HolderPlace& place) {
  const auto either = [&](const char* key, bool known, const auto& append_value) {
    bson_t cond, in;
    BSON_APPEND_DOCUMENT_BEGIN(doc, key, &cond);
    BSON_APPEND_ARRAY_BEGIN(&cond, "$in", &in);
    if (known) append_value(&in);
    BSON_APPEND_NULL(&in, known ? "1" : "0");
    bson_append_array_end(&cond, &in);
    bson_append_document_end(doc, &cond);
  };
  const auto known = [](const std::string& value) { return !value.empty() && value != k_unknown_place; };
  either("boot_id", known(place.boot_id), [&](bson_t* in) { append_string(in, "0", place.boot_id); });
  either("pid_ns", known(place.pid_ns), [&](bson_t* in) { append_string(in, "0", place.pid_ns); });
  either("pid_start", place.pid_start.has_value(), [&](bson_t* in) { BSON_APPEND_INT64(in, "0", *place.pid_start); });
}

// The filter for a LockSelector: every set field narrows it.
void append_selector(bson_t* doc, const LockSelector& which) {
  if (which.id) append_id(doc, *which.id);
  append_string(doc, "program", which.program);
  if (which.token) append_string(doc, "token", *which.token);
  if (which.process) append_string(doc, "process", *which.process);
  if (which.place) append_place(doc, *which.place);
  if (which.expires_after) append_date_condition(doc, "expires_at", "$gt", *which.expires_after);
  if (which.hold_ends_by) append_date_condition(doc, "hold_until", "$lte", *which.hold_ends_by);
  if (which.expired_by) append_date_condition(doc, "expires_at", "$lte", *which.expired_by);
  if (which.renewed_before) append_date_condition(doc, "renewed_at", "$lt", *which.renewed_before);
  if (which.run_ttl_at_most) {
    const auto most = which.run_ttl_at_most->count();
    append_not_above(doc, "run_ttl_ms", [&](bson_t* in, const char* key) { bson_append_int64(in, key, -1, most); });
  }
  if (which.not_released) {
    bson_t exists;
    BSON_APPEND_DOCUMENT_BEGIN(doc, "released_at", &exists);
    BSON_APPEND_BOOL(&exists, "$exists", false);
    bson_append_document_end(doc, &exists);
  }
}

void renew_filter(const LockSelector& which, bson_t* out, bool server_time) {
  // Never a released document (released_at set: its expiry is the end of the minimum hold), whoever built
  // the selector: a renewal that arrives after the release would move that expiry back.
  auto live = which;
  live.not_released = true;
  append_selector(out, live);
  if (!server_time) return;
  // Last: FerretDB v1 evaluates a filter's conditions in order and refuses $expr only on a document that
  // matched the rest, so a renewal of a lock that is gone is answered "matched nothing", never refused.
  bson_t expr;
  bson_t operands;
  BSON_APPEND_DOCUMENT_BEGIN(out, "$expr", &expr);
  BSON_APPEND_ARRAY_BEGIN(&expr, "$gt", &operands);
  BSON_APPEND_UTF8(&operands, "0", "$expires_at");
  BSON_APPEND_UTF8(&operands, "1", "$$NOW");
  bson_append_array_end(&expr, &operands);
  bson_append_document_end(out, &expr);
}

bool refuses_server_time(const bson_error_t& error) {
  if (error.domain != MONGOC_ERROR_SERVER && error.domain != MONGOC_ERROR_QUERY) return false;
  constexpr std::uint32_t not_implemented = 238;      // FerretDB v1
  constexpr std::uint32_t undefined_variable = 17276; // MongoDB 3.6-4.0: no $$NOW
  constexpr std::uint32_t bad_value = 2;              // MongoDB before 3.6: no $expr
  return error.code == not_implemented || error.code == undefined_variable ||
         (error.code == bad_value && std::string_view(error.message).find("$expr") != std::string_view::npos);
}

bool renewal_refused(const bson_error_t& error, std::uint64_t writes_started, std::uint64_t sends) {
  constexpr std::uint32_t max_time_expired = 50;     // MaxTimeMSExpired: cut while it ran
  constexpr std::uint32_t exceeded_time_limit = 262; // ExceededTimeLimit: the same, from a mongos
  return (error.domain == MONGOC_ERROR_SERVER || error.domain == MONGOC_ERROR_QUERY) &&
         error.code != max_time_expired && error.code != exceeded_time_limit && writes_started == sends;
}

void renew_update(ServerTime expires_at, ServerTime renewed_at, Millis ttl, bool mark_waiters, bson_t* out) {
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(out, "$set", &set);
  BSON_APPEND_DATE_TIME(&set, "expires_at", to_bson_date(expires_at));
  BSON_APPEND_DATE_TIME(&set, "renewed_at", to_bson_date(renewed_at));
  BSON_APPEND_INT64(&set, "ttl_ms", ttl.count());
  if (mark_waiters) BSON_APPEND_BOOL(&set, "waiters", true);
  bson_append_document_end(out, &set);
}

void release_update(ServerTime released_at, ServerTime expires_at, bson_t* out) {
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(out, "$set", &set);
  BSON_APPEND_DATE_TIME(&set, "released_at", to_bson_date(released_at));
  BSON_APPEND_DATE_TIME(&set, "expires_at", to_bson_date(expires_at));
  bson_append_document_end(out, &set);
}

void fence_update(std::int64_t fence, bson_t* out) {
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(out, "$set", &set);
  BSON_APPEND_INT64(&set, "fence", fence);
  bson_append_document_end(out, &set);
}

std::string index_difference(const bson_t* spec, std::initializer_list<const char*> fields, bool unique) {
  bool key_matches = false;
  bool is_unique = false;
  std::string other;
  bson_iter_t it;
  if (!bson_iter_init(&it, spec)) return "other fields";
  while (bson_iter_next(&it)) {
    const std::string_view option = bson_iter_key(&it);
    if (option == "key" && BSON_ITER_HOLDS_DOCUMENT(&it)) {
      bson_iter_t key;
      if (!bson_iter_recurse(&it, &key)) return "other fields";
      auto field = fields.begin();
      bool same = true;
      while (same && bson_iter_next(&key)) {
        same = field != fields.end() && std::string_view(bson_iter_key(&key)) == *field &&
               BSON_ITER_HOLDS_NUMBER(&key) && bson_iter_as_double(&key) == 1.0;
        if (same) ++field;
      }
      key_matches = same && field == fields.end();
    } else if (option == "unique") {
      // true, or a number other than 0 (older servers list 1); a string or anything else is no unique index
      is_unique = BSON_ITER_HOLDS_BOOL(&it)     ? bson_iter_bool(&it)
                  : BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_double(&it) != 0.0
                                                : false;
    } else if (option != "v" && option != "name" && option != "ns" && other.empty()) {
      other = option == "partialFilterExpression" ? "partial" : std::string(option.substr(0, 40));
    }
  }
  if (!key_matches) return "other fields";
  if (is_unique != unique) return unique ? "not unique" : "unique";
  return other;
}

} // namespace store

bool MongoStore::insert(LockRecord& lock) {
  auto& impl = *m_impl;
  impl.connect();
  if (lock.id.empty()) {
    bson_oid_t oid;
    bson_oid_init(&oid, nullptr);
    char hex[25];
    bson_oid_to_string(&oid, hex);
    lock.id = hex;
  }
  Bson doc;
  to_bson(lock, doc.get());
  Reply reply;
  bson_error_t error;
  if (mongoc_collection_insert_one(impl.collection.get(), doc.get(), impl.write_opts.get(), reply.get(), &error)) {
    return true;
  }
  if (error.code == MONGOC_ERROR_DUPLICATE_KEY) return false; // MongoDB error 11000: duplicate key
  impl.fail_write(fmt::format("insert of lock '{}'", lock.program), error,
                  fmt::format("who holds it with 'mongolock status {}'", lock.name));
}

std::int64_t MongoStore::remove(const LockSelector& which) {
  auto& impl = *m_impl;
  impl.connect();
  Bson selector;
  append_selector(selector.get(), which);
  Reply reply;
  bson_error_t error;
  if (!mongoc_collection_delete_one(impl.collection.get(), selector.get(), impl.write_opts.get(), reply.get(),
                                    &error)) {
    impl.fail_write(fmt::format("delete of lock '{}'", which.program), error,
                    fmt::format("with 'mongolock status {}' whether it is still held", which.program));
  }
  return reply.integer("deletedCount");
}

std::int64_t MongoStore::Impl::update(const LockSelector& which, const bson_t* update, std::string_view what) {
  Bson selector;
  append_selector(selector.get(), which);
  Reply reply;
  bson_error_t error;
  if (!mongoc_collection_update_one(collection.get(), selector.get(), update, write_opts.get(), reply.get(), &error)) {
    fail_write(fmt::format("{} of lock '{}'", what, which.program), error,
               fmt::format("the lock with 'mongolock status {}'", which.program));
  }
  return reply.integer("matchedCount");
}

bool MongoStore::Impl::send_renewal(const LockSelector& which, const bson_t* update, bool with_condition, Reply& reply,
                                    bson_error_t& error) {
  // findAndModify rather than update: both MongoDB and FerretDB v1 honour its maxTimeMS (FerretDB ignores it
  // on update), so a renewal the server could not finish in time is aborted rather than written late.
  // Never a released document: renew_filter().
  Bson selector;
  renew_filter(which, selector.get(), with_condition);
  Bson command;
  BSON_APPEND_UTF8(command.get(), "findAndModify", mongoc_collection_get_name(collection.get()));
  BSON_APPEND_DOCUMENT(command.get(), "query", selector.get());
  BSON_APPEND_DOCUMENT(command.get(), "update", update);
  if (call_deadline.server) {
    BSON_APPEND_INT64(command.get(), "maxTimeMS", std::max<std::int64_t>(call_deadline.server->count(), 1));
  }
  return mongoc_collection_write_command_with_opts(collection.get(), command.get(), write_opts.get(), reply.get(),
                                                   &error);
}

namespace {

// Whether a findAndModify's reply returned a document (`value`): its filter matched one.
bool returned_document(Reply& reply) {
  bson_iter_t it;
  return bson_iter_init_find(&it, reply.get(), "value") && BSON_ITER_HOLDS_DOCUMENT(&it);
}

} // namespace

std::int64_t MongoStore::renew(const LockSelector& which, ServerTime expires_at, ServerTime renewed_at, Millis ttl,
                               bool mark_waiters) {
  m_impl->connect();
  Bson update;
  renew_update(expires_at, renewed_at, ttl, mark_waiters, update.get());
  auto& impl = *m_impl;
  Reply first;
  Reply again;
  bson_error_t error;
  // Time for a resend: a round trip (the clock's last measure, at least 10 ms) left after this one.
  const auto round_trip = std::max(impl.clock ? impl.clock->round_trip() : Millis(0), Millis(10));
  const bool time_for_resend =
      !impl.call_deadline.until || *impl.call_deadline.until - LeaseClock::now() >= 2 * round_trip;
  const bool with_condition = impl.server_time.sent(time_for_resend);
  const auto started_before = impl.monitor.writes_started;
  std::uint64_t sends = 1;
  Reply* reply = &first;
  bool ok = impl.send_renewal(which, update.get(), with_condition, first, error);
  // Accepted only when it matched a document: FerretDB answers "matched nothing" without evaluating the
  // condition when the rest of the filter matches no document (a semaphore's other slot, a wrong token).
  if (ok && with_condition && returned_document(first)) impl.server_time.accepted();
  if (!ok && with_condition && impl.server_time.resend_without(error)) {
    // The server refused the server-time condition before it read anything: the same renewal without it,
    // once; renewals go without it from now on only when this one is accepted (ServerTimeCondition).
    const auto refusal = impl.driver_text(error);
    reply = &again;
    ++sends;
    ok = impl.send_renewal(which, update.get(), false, again, error);
    if (ok && impl.server_time.lacking()) impl.say_lacking(refusal);
  }
  if (!ok) {
    const auto what = fmt::format("renewal of lock '{}'", which.program);
    if (renewal_refused(error, impl.monitor.writes_started - started_before, sends)) impl.fail_refused(what, error);
    impl.fail_write(what, error, fmt::format("its expiry with 'mongolock status {}'", which.program));
  }
  return returned_document(*reply) ? 1 : 0;
}

void MongoStore::Impl::say_lacking(std::string_view refusal) const {
  log.debugf("the server refuses a renewal's server-time condition ({}); renewals are sent without it from now on, "
             "so a late copy of an abandoned renewal can extend a lock that expired and was not taken over yet, by "
             "up to the TTL from its send (docs/compatibility.md)",
             refusal);
}

std::optional<bool> MongoStore::Impl::probe_find(const LockSelector& which, bool with_condition, bson_error_t& error) {
  Bson filter;
  renew_filter(which, filter.get(), with_condition);
  Bson opts;
  BSON_APPEND_INT64(opts.get(), "limit", 1);
  CursorPtr cursor(mongoc_collection_find_with_opts(collection.get(), filter.get(), opts.get(), nullptr));
  bool read = false;
  if (!for_each_doc(
          cursor.get(),
          [&](const bson_t*) {
            read = true;
            return false;
          },
          error)) {
    return std::nullopt;
  }
  return read;
}

bool MongoStore::server_time_undecided() const { return !m_impl->server_time.decided(); }

// The probe: reads only (nothing of it can land on the document later), with the renewal's own filter, so that
// the server evaluates the condition exactly where a renewal would have it evaluated (FerretDB v1 refuses it only
// on a document that matched the rest of the filter: a probe that read nothing decides nothing).
void MongoStore::probe_server_time(const LockSelector& which) {
  auto& impl = *m_impl;
  if (impl.server_time.decided()) return;
  impl.connect();
  bson_error_t error{}; // set by a failed find only: a zeroed one refuses nothing (refuses_server_time())
  auto read = impl.probe_find(which, true, error);
  if (read && *read) impl.server_time.accepted();
  if (!read && impl.server_time.resend_without(error)) {
    const auto refusal = impl.driver_text(error);
    read = impl.probe_find(which, false, error);
    if (read && *read && impl.server_time.lacking()) impl.say_lacking(refusal);
  }
  if (!read) impl.fail(fmt::format("read of lock '{}' (the renewals' server-time condition)", which.program), error);
}

std::int64_t MongoStore::mark_released(const LockSelector& which, ServerTime released_at, ServerTime expires_at) {
  m_impl->connect();
  Bson update;
  release_update(released_at, expires_at, update.get());
  return m_impl->update(which, update.get(), "release");
}

std::int64_t MongoStore::set_fence(const LockSelector& which, std::int64_t fence) {
  m_impl->connect();
  Bson update;
  fence_update(fence, update.get());
  return m_impl->update(which, update.get(), "fencing token update");
}

std::int64_t MongoStore::next_fence(std::string_view name) {
  auto& impl = *m_impl;
  impl.connect();
  if (!impl.fences) {
    (void)impl.open(impl.fences, "_fences", &MongoStore::Impl::k_fence_index);
  }
  // Highest token so far, plus one; a concurrent allocation of the same value loses on the unique index
  // and tries the next one.
  const auto next = [&] {
    Bson filter;
    append_string(filter.get(), "name", name);
    Bson opts;
    append_sort(opts.get(), {{"fence", -1}});
    BSON_APPEND_INT64(opts.get(), "limit", 1);
    const auto found = impl.find_docs<std::int64_t>(
        impl.fences.get(), filter.get(), opts.get(),
        [](const bson_t* doc) {
          bson_iter_t it;
          return bson_iter_init_find(&it, doc, "fence") ? number(it).value_or(0) : 0;
        },
        fmt::format("read of fencing tokens of '{}'", name));
    return (found.empty() ? 0 : found.front()) + 1;
  };
  const auto insert = [&](std::int64_t fence) {
    Bson entry;
    append_string(entry.get(), "name", name);
    BSON_APPEND_INT64(entry.get(), "fence", fence);
    BSON_APPEND_DATE_TIME(entry.get(), "allocated_at", to_bson_date(clock().now()));
    Reply reply;
    bson_error_t error;
    if (mongoc_collection_insert_one(impl.fences.get(), entry.get(), impl.write_opts.get(), reply.get(), &error)) {
      return true;
    }
    if (error.code != MONGOC_ERROR_DUPLICATE_KEY)
      impl.fail(fmt::format("allocation of a fencing token for '{}'", name), error, "_fences");
    return false;
  };
  return allocate_unique(next, insert, fmt::format("allocate a fencing token for '{}'", name));
}

std::optional<LockRecord> MongoStore::find(std::string_view program) {
  auto& impl = *m_impl;
  impl.connect();
  Bson filter;
  append_string(filter.get(), "program", program);
  Bson opts;
  BSON_APPEND_INT64(opts.get(), "limit", 1);
  auto found = impl.find_docs<LockRecord>(impl.collection.get(), filter.get(), opts.get(), from_bson,
                                          fmt::format("find of lock '{}'", program));
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::vector<LockRecord> MongoStore::list(std::optional<std::string_view> name) {
  auto& impl = *m_impl;
  impl.connect();
  Bson filter;
  if (name) append_string(filter.get(), "name", *name);
  Bson opts;
  append_sort(opts.get(), {{"program", 1}});
  // Every lock in the first reply (up to 16 MiB of them): `list` is one find however many are held.
  BSON_APPEND_INT64(opts.get(), "batchSize", k_one_reply);
  return impl.find_docs<LockRecord>(impl.collection.get(), filter.get(), opts.get(), from_bson, "listing of locks");
}

std::optional<LockRecord> MongoStore::remove_returning(const LockSelector& which) {
  auto& impl = *m_impl;
  impl.connect();
  Bson selector;
  append_selector(selector.get(), which);
  Bson command;
  BSON_APPEND_UTF8(command.get(), "findAndModify", mongoc_collection_get_name(impl.collection.get()));
  BSON_APPEND_DOCUMENT(command.get(), "query", selector.get());
  BSON_APPEND_BOOL(command.get(), "remove", true);
  Reply reply;
  bson_error_t error;
  if (!mongoc_collection_write_command_with_opts(impl.collection.get(), command.get(), impl.write_opts.get(),
                                                 reply.get(), &error)) {
    impl.fail_write(fmt::format("delete of lock '{}'", which.program), error,
                    fmt::format("with 'mongolock status {}' whether it is still held", which.program));
  }
  bson_iter_t it;
  if (!bson_iter_init_find(&it, reply.get(), "value") || !BSON_ITER_HOLDS_DOCUMENT(&it)) return std::nullopt;
  std::uint32_t len = 0;
  const std::uint8_t* data = nullptr;
  bson_iter_document(&it, &len, &data);
  bson_t value;
  if (!bson_init_static(&value, data, len)) return std::nullopt;
  return from_bson(&value);
}

} // namespace mongolock
