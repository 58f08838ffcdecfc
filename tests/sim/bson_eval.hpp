// A small evaluator of MongoDB query filters and update documents on BSON documents: exactly the operators
// MongoStore's filters and updates use (lib/mongolock/store/commands.hpp), with the server's semantics, so
// that the simulator runs MongoStore's own documents instead of a re-implementation of their conditions.
// Checked against the test server on the same documents by integration.bson_eval (mongolock-bson-check).
//
// Filters: top-level fields only (no dotted paths, no arrays in documents), an implicit AND of
//   {field: value} (equality) and {field: {$lt|$lte|$gt|$gte|$ne|$in|$nin|$exists: ...}} ($exists of a
//   boolean only: the servers differ on a number), and $or/$and of such filters. Comparisons follow MongoDB's type
//   bracketing: a field of another type than the value (a number against a date, a missing field) never matches
//   $lt/$lte/$gt/$gte; numbers compare across int32/int64/double; strings by their bytes (the simple collation); a
//   missing field equals only null.
// Updates: {$set: {...}} and {$unset: {...}} of top-level fields (not _id). Anything else (another operator,
// a replacement document, a pipeline, $$NOW) throws Unsupported: a new operator in MongoStore must be added
// here, and checked against the server, before the simulator can run it.
#pragma once

#include <bson/bson.h>

#include <stdexcept>
#include <string>

namespace sim {

// A filter or update the evaluator does not implement; the message names the operator or field.
struct Unsupported : std::runtime_error {
  explicit Unsupported(const std::string& what) : std::runtime_error("bson_eval: unsupported: " + what) {}
};

// True when `doc` matches `filter` (the server's semantics, above). Throws Unsupported.
[[nodiscard]] bool matches(const bson_t* filter, const bson_t* doc);

// Appends to `out` (initialized, empty) the document `doc` with `update` applied: fields kept in their
// order, set fields replaced in place, new fields appended in the order of $set. Throws Unsupported.
void apply_update(const bson_t* update, const bson_t* doc, bson_t* out);

} // namespace sim
