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
//   missing field equals only null. And MongoStore's server-time condition, {$expr: {$op: [a, b]}} with $op one
//   of $gt/$gte/$lt/$lte and each operand a top-level field path ("$expires_at"), "$$NOW" or a date: compared
//   by MongoDB's aggregation order (BSON type order across types: null < numbers < strings < ObjectId < bool <
//   date; a missing field below all), $$NOW being Server::now_ms; on FerretDB v1 (Server::refuses_expr) a
//   document that reaches the $expr (it matched every condition before it) makes the server refuse the whole
//   command: Refused (docs/compatibility.md; checked against the test server by integration.bson_eval).
// Updates: {$set: {...}} and {$unset: {...}} of top-level fields (not _id). Anything else (another operator,
// a replacement document, a pipeline, $$NOW in an update) throws Unsupported: a new operator in MongoStore must be
// added here, and checked against the server, before the simulator can run it.
#pragma once

#include <bson/bson.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

namespace sim {

// The server a filter is evaluated on, as far as the filter can tell: its clock and whether it evaluates $expr.
struct Server {
  std::optional<std::int64_t> now_ms; // $$NOW: the server's clock when it reads the document, epoch ms (unset:
                                      // a filter with $$NOW throws Unsupported)
  bool refuses_expr = false;          // FerretDB v1: $expr is refused (238 NotImplemented) on a document that
                                      // reaches it: Refused
};

// The server refused the filter (FerretDB v1's 238 NotImplemented for $expr): nothing was read or written.
struct Refused : std::runtime_error {
  Refused() : std::runtime_error("bson_eval: the server refuses $expr (238 NotImplemented)") {}
};

// A filter or update the evaluator does not implement; the message names the operator or field.
struct Unsupported : std::runtime_error {
  explicit Unsupported(const std::string& what) : std::runtime_error("bson_eval: unsupported: " + what) {}
};

// True when `doc` matches `filter` (the server's semantics, above) on `server`. Throws Unsupported, or Refused
// (server.refuses_expr) when `doc` reaches a $expr.
[[nodiscard]] bool matches(const bson_t* filter, const bson_t* doc, const Server& server = {});

// Appends to `out` (initialized, empty) the document `doc` with `update` applied: fields kept in their
// order, set fields replaced in place, new fields appended in the order of $set. Throws Unsupported.
void apply_update(const bson_t* update, const bson_t* doc, bson_t* out);

} // namespace sim
