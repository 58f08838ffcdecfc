// BSON helpers and RAII wrappers of libmongoc's handles, shared by the MongoStore files (lib/mongolock/store/:
// the connection, the lock documents, the queue and its events, the run history). Internal to MongoStore.
#pragma once

#include <mongolock/clock.hpp>

#include <mongoc/mongoc.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mongolock::store {

// --- RAII wrappers -------------------------------------------------------------------------------

template <auto Destroy> struct Deleter {
  template <typename T> void operator()(T* p) const noexcept { Destroy(p); }
};
using UriPtr = std::unique_ptr<mongoc_uri_t, Deleter<mongoc_uri_destroy>>;
using ClientPtr = std::unique_ptr<mongoc_client_t, Deleter<mongoc_client_destroy>>;
using CollectionPtr = std::unique_ptr<mongoc_collection_t, Deleter<mongoc_collection_destroy>>;
using CursorPtr = std::unique_ptr<mongoc_cursor_t, Deleter<mongoc_cursor_destroy>>;
using WriteConcernPtr = std::unique_ptr<mongoc_write_concern_t, Deleter<mongoc_write_concern_destroy>>;
using ServerDescriptionPtr = std::unique_ptr<mongoc_server_description_t, Deleter<mongoc_server_description_destroy>>;
using ApmCallbacksPtr = std::unique_ptr<mongoc_apm_callbacks_t, Deleter<mongoc_apm_callbacks_destroy>>;

// A number field (int32, int64 or double) as an int64; a double is truncated and clamped to the int64
// range (bson_iter_as_int64 casts it, undefined beyond that range); NaN and other types give nullopt.
inline std::optional<std::int64_t> number(const bson_iter_t& it) {
  if (!BSON_ITER_HOLDS_NUMBER(&it)) return std::nullopt;
  if (!BSON_ITER_HOLDS_DOUBLE(&it)) return bson_iter_as_int64(&it);
  const double d = bson_iter_double(&it);
  if (std::isnan(d)) return std::nullopt;
  if (d <= -0x1p63) return std::numeric_limits<std::int64_t>::min();
  if (d >= 0x1p63) return std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(d);
}

// A driver out-parameter document; the driver (re)initializes it, we always destroy it.
class Reply {
public:
  Reply() { bson_init(&m_doc); }
  ~Reply() { bson_destroy(&m_doc); }
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;
  bson_t* get() { return &m_doc; }

  // An integer field of the reply (int32, int64 or double), or 0 when absent.
  [[nodiscard]] std::int64_t integer(const char* key) const {
    bson_iter_t it;
    return bson_iter_init_find(&it, &m_doc, key) ? number(it).value_or(0) : 0;
  }

private:
  bson_t m_doc;
};

// An owned heap document (bson_new). A class rather than unique_ptr<bson_t>: bson_t's alignment
// attribute does not survive as a template argument.
class Bson {
public:
  Bson() : m_doc(bson_new()) {}
  ~Bson() { bson_destroy(m_doc); }
  Bson(const Bson&) = delete;
  Bson& operator=(const Bson&) = delete;
  [[nodiscard]] bson_t* get() const { return m_doc; }

private:
  bson_t* m_doc;
};

// --- conversions ----------------------------------------------------------------------------------

inline std::int64_t to_bson_date(ServerTime t) { return t.time_since_epoch().count(); }
inline ServerTime from_bson_date(std::int64_t ms) { return ServerTime(Millis(ms)); }

inline bool parse_oid(std::string_view hex, bson_oid_t& oid) {
  const std::string s(hex);
  if (!bson_oid_is_valid(s.c_str(), s.size())) return false;
  bson_oid_init_from_string(&oid, s.c_str());
  return true;
}

// Appends `_id: ObjectId(id)`; ids not written by mongolock (not ObjectIds) are matched as strings.
// batchSize of a find whose every document should come in its first reply (the reply's 16 MiB bound
// still applies: beyond it the driver sends getMores).
constexpr std::int64_t k_one_reply = 100'000;

inline void append_id(bson_t* doc, std::string_view id) {
  bson_oid_t oid;
  if (parse_oid(id, oid)) {
    BSON_APPEND_OID(doc, "_id", &oid);
  } else {
    bson_append_utf8(doc, "_id", 3, id.data(), static_cast<int>(id.size()));
  }
}

inline void append_string(bson_t* doc, const char* key, std::string_view value) {
  bson_append_utf8(doc, key, -1, value.data(), static_cast<int>(value.size()));
}

inline std::string iter_string(const bson_iter_t& it) {
  if (BSON_ITER_HOLDS_UTF8(&it)) {
    std::uint32_t len = 0;
    const char* s = bson_iter_utf8(&it, &len);
    return std::string(s, len);
  }
  return {};
}

// An _id as text: an ObjectId as 24 hex digits, a string as it is.
inline std::string iter_id(const bson_iter_t& it) {
  if (!BSON_ITER_HOLDS_OID(&it)) return iter_string(it);
  char hex[25];
  bson_oid_to_string(bson_iter_oid(&it), hex);
  return hex;
}

// Appends `{field: {op: date}}`.
inline void append_date_condition(bson_t* doc, const char* field, const char* op, ServerTime t) {
  bson_t condition;
  bson_append_document_begin(doc, field, -1, &condition);
  bson_append_date_time(&condition, op, -1, to_bson_date(t));
  bson_append_document_end(doc, &condition);
}

// Appends `{field: {$not: {$gt: VALUE}}}`: at most VALUE, or no such field. `append_value(bson_t* into, const
// char* key)` appends VALUE (a date, a number).
template <typename AppendValue> void append_not_above(bson_t* doc, const char* field, AppendValue append_value) {
  bson_t condition, not_above;
  bson_append_document_begin(doc, field, -1, &condition);
  bson_append_document_begin(&condition, "$not", -1, &not_above);
  append_value(&not_above, "$gt");
  bson_append_document_end(&condition, &not_above);
  bson_append_document_end(doc, &condition);
}

inline std::int32_t to_int32_ms(Millis d) {
  return static_cast<std::int32_t>(std::min<Millis::rep>(d.count(), INT32_MAX));
}

// One cursor loop: calls `each` (bool(const bson_t*)) with every document of `cursor` (stops early when it
// returns false);
// returns false with `error` set when the cursor failed (a server error, or the connection).
// A new ObjectId as 24 hex digits (made on the client, as drivers do).
inline std::string new_object_id() {
  bson_oid_t oid;
  bson_oid_init(&oid, nullptr);
  char hex[25];
  bson_oid_to_string(&oid, hex);
  return hex;
}

template <typename Each> bool for_each_doc(mongoc_cursor_t* cursor, Each&& each, bson_error_t& error) {
  const bson_t* doc = nullptr;
  while (mongoc_cursor_next(cursor, &doc)) {
    if (!each(doc)) break;
  }
  return !mongoc_cursor_error(cursor, &error);
}

// One sort builder: appends `{sort: {field: direction, ...}}` to a find's options (1 ascending, -1 descending).
inline void append_sort(bson_t* opts, std::initializer_list<std::pair<const char*, int>> fields) {
  bson_t sort;
  BSON_APPEND_DOCUMENT_BEGIN(opts, "sort", &sort);
  for (const auto& [field, direction] : fields)
    BSON_APPEND_INT32(&sort, field, direction);
  bson_append_document_end(opts, &sort);
}

} // namespace mongolock::store
