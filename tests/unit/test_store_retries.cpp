// The refusals MongoStore sends again (store/commands.hpp): FerretDB's SQLite "database is locked (517)"
// (sqlite_locked(): the wake-up event's insert and the history insert), the history insert's retryable codes
// (history_insert_retryable(), red team 7 F5) and the retry that met an earlier copy's records
// (only_duplicate_ids()); and the server-time probe's decision (ServerTimeCondition::decided()).
#include <doctest/doctest.h>

#include <mongolock/store/bson.hpp>
#include <mongolock/store/commands.hpp>

#include <string>

using namespace mongolock;

namespace {

bson_error_t error_of(std::uint32_t domain, std::uint32_t code, const char* message) {
  bson_error_t error{};
  bson_set_error(&error, domain, code, "%s", message);
  return error;
}

// An insert's reply with one write error per {code, errmsg}.
struct WriteErrors {
  explicit WriteErrors(std::initializer_list<std::pair<int, const char*>> errors) {
    bson_init(&reply);
    BSON_APPEND_INT32(&reply, "n", 0);
    bson_t array;
    BSON_APPEND_ARRAY_BEGIN(&reply, "writeErrors", &array);
    int i = 0;
    for (const auto& [code, message] : errors) {
      bson_t error;
      const auto key = std::to_string(i);
      bson_append_document_begin(&array, key.c_str(), -1, &error);
      BSON_APPEND_INT32(&error, "index", i++);
      BSON_APPEND_INT32(&error, "code", code);
      BSON_APPEND_UTF8(&error, "errmsg", message);
      bson_append_document_end(&array, &error);
    }
    bson_append_array_end(&reply, &array);
  }
  ~WriteErrors() { bson_destroy(&reply); }
  [[nodiscard]] const bson_t* get() const { return &reply; }
  WriteErrors(const WriteErrors&) = delete;
  WriteErrors& operator=(const WriteErrors&) = delete;
  bson_t reply;
};

constexpr const char* k_locked = "sqlite3: database is locked (517) (SQLITE_BUSY)";
constexpr const char* k_dup_id = "E11000 duplicate key error collection: db.locks_runs index: _id_ dup key";

} // namespace

TEST_CASE("sqlite_locked: FerretDB's SQLITE_BUSY text, nothing else") {
  CHECK(store::sqlite_locked(k_locked));
  CHECK(store::sqlite_locked("database is locked (517)"));
  CHECK_FALSE(store::sqlite_locked("database is locked (5)")); // another SQLite code: not the busy refusal
  CHECK_FALSE(store::sqlite_locked("database is locked"));
  CHECK_FALSE(store::sqlite_locked(""));
}

TEST_CASE("history_insert_retryable: the server's passing refusals only") {
  // FerretDB's SQLITE_BUSY: nothing written, sent again.
  CHECK(store::history_insert_retryable(error_of(MONGOC_ERROR_SERVER, 1, k_locked)));
  CHECK(store::history_insert_retryable(error_of(MONGOC_ERROR_QUERY, 1, k_locked))); // error API version 1
  // An election's codes, every one of them.
  for (const std::uint32_t code : {6U, 7U, 89U, 91U, 189U, 262U, 9001U, 10107U, 11600U, 11602U, 13435U, 13436U}) {
    CAPTURE(code);
    CHECK(store::history_insert_retryable(error_of(MONGOC_ERROR_SERVER, code, "x")));
  }
  // Not the server's answer (the connection's or the driver's, whose write may have been applied): never.
  CHECK_FALSE(store::history_insert_retryable(error_of(MONGOC_ERROR_STREAM, 9001, k_locked)));
  CHECK_FALSE(store::history_insert_retryable(error_of(MONGOC_ERROR_WRITE_CONCERN, 10107, "x")));
  // The server's lasting refusals: a duplicate key, a document it refuses, a time limit of its own.
  CHECK_FALSE(store::history_insert_retryable(error_of(MONGOC_ERROR_SERVER, 11000, k_dup_id)));
  CHECK_FALSE(store::history_insert_retryable(error_of(MONGOC_ERROR_SERVER, 2, "bad value")));
  CHECK_FALSE(store::history_insert_retryable(error_of(MONGOC_ERROR_SERVER, 50, "operation exceeded time limit")));
  CHECK_FALSE(store::history_insert_retryable(error_of(MONGOC_ERROR_SERVER, 0, "x")));
}

TEST_CASE("only_duplicate_ids: a retry that met the records its earlier copy wrote, and nothing else") {
  CHECK(store::only_duplicate_ids(WriteErrors({{11000, k_dup_id}}).get()));
  CHECK(store::only_duplicate_ids(WriteErrors({{11000, k_dup_id}, {11000, k_dup_id}}).get()));
  // One other error among them: the server refused a record.
  CHECK_FALSE(store::only_duplicate_ids(WriteErrors({{11000, k_dup_id}, {2, "bad value"}}).get()));
  CHECK_FALSE(store::only_duplicate_ids(WriteErrors({{2, "bad value"}, {11000, k_dup_id}}).get()));
  // A duplicate key of another index (not the client's own _id).
  CHECK_FALSE(store::only_duplicate_ids(
      WriteErrors({{11000, "E11000 duplicate key error index: name_1_seq_1 dup key: { name: \"a\" }"}}).get()));
  CHECK_FALSE(store::only_duplicate_ids(WriteErrors({{11000, "E11000 duplicate key error collection: db.c_runs "
                                                             "index: name_1 dup key: { name: \"a\" }"}})
                                            .get()));
  // FerretDB v1's text names no index (on the run history only _id's is unique): the earlier copy's records
  // (red team 10, F6: a recorded --once-per success exited 69).
  CHECK(store::only_duplicate_ids(WriteErrors({{11000, "E11000 duplicate key error collection: db.c_runs"}}).get()));
  // No write error at all: not "only duplicates" (nothing to excuse).
  CHECK_FALSE(store::only_duplicate_ids(WriteErrors({}).get()));
  bson_t empty;
  bson_init(&empty);
  CHECK_FALSE(store::only_duplicate_ids(&empty));
  BSON_APPEND_UTF8(&empty, "writeErrors", "not an array");
  CHECK_FALSE(store::only_duplicate_ids(&empty));
  bson_destroy(&empty);
}

TEST_CASE("ServerTimeCondition::decided: after accepted() or lacking(), not after a refusal alone") {
  const auto refusal = error_of(MONGOC_ERROR_SERVER, 238, "The operator $gt is not implemented yet");
  store::ServerTimeCondition accepted;
  CHECK_FALSE(accepted.decided());
  CHECK(accepted.resend_without(refusal)); // refused, the resend not answered yet: still undecided
  CHECK_FALSE(accepted.decided());
  accepted.accepted();
  CHECK(accepted.decided());
  store::ServerTimeCondition lacking;
  (void)lacking.lacking();
  CHECK(lacking.decided());
  CHECK_FALSE(lacking.sent(true));
}
