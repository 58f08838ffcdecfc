#include "bson_eval.hpp"

#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

namespace sim {

namespace {

// MongoDB's canonical type classes, as far as the evaluator compares them.
enum class Kind { null, number, string, oid, boolean, date };

Kind kind_of(const bson_iter_t& it) {
  switch (bson_iter_type(&it)) {
  case BSON_TYPE_NULL:
    return Kind::null;
  case BSON_TYPE_INT32:
  case BSON_TYPE_INT64:
  case BSON_TYPE_DOUBLE:
    return Kind::number;
  case BSON_TYPE_UTF8:
    return Kind::string;
  case BSON_TYPE_OID:
    return Kind::oid;
  case BSON_TYPE_BOOL:
    return Kind::boolean;
  case BSON_TYPE_DATE_TIME:
    return Kind::date;
  default:
    throw Unsupported("a value of BSON type " + std::to_string(static_cast<int>(bson_iter_type(&it))) + " ('" +
                      bson_iter_key(&it) + "')");
  }
}

template <typename T> int order(T a, T b) { return a < b ? -1 : (b < a ? 1 : 0); }

int compare_numbers(const bson_iter_t& a, const bson_iter_t& b) {
  if (!BSON_ITER_HOLDS_DOUBLE(&a) && !BSON_ITER_HOLDS_DOUBLE(&b))
    return order(bson_iter_as_int64(&a), bson_iter_as_int64(&b));
  return order(bson_iter_as_double(&a), bson_iter_as_double(&b));
}

int compare_strings(const bson_iter_t& a, const bson_iter_t& b) {
  std::uint32_t la = 0;
  std::uint32_t lb = 0;
  const char* sa = bson_iter_utf8(&a, &la);
  const char* sb = bson_iter_utf8(&b, &lb);
  return order(std::string_view(sa, la), std::string_view(sb, lb)); // bytewise: the simple collation
}

// Orders two values of the same kind (-1, 0, 1).
int compare(Kind kind, const bson_iter_t& a, const bson_iter_t& b) {
  switch (kind) {
  case Kind::null:
    return 0;
  case Kind::number:
    return compare_numbers(a, b);
  case Kind::string:
    return compare_strings(a, b);
  case Kind::oid:
    return order(bson_oid_compare(bson_iter_oid(&a), bson_iter_oid(&b)), 0);
  case Kind::boolean:
    return order(bson_iter_bool(&a), bson_iter_bool(&b));
  case Kind::date:
    return order(bson_iter_date_time(&a), bson_iter_date_time(&b));
  }
  return 0;
}

// The field `key` of `doc`, when present.
std::optional<bson_iter_t> field(const bson_t* doc, const char* key) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, doc, key)) return std::nullopt;
  return it;
}

// {field: value}: a missing field equals only null.
bool equals(const std::optional<bson_iter_t>& have, const bson_iter_t& want) {
  const Kind want_kind = kind_of(want);
  if (!have) return want_kind == Kind::null;
  const Kind have_kind = kind_of(*have);
  return have_kind == want_kind && compare(have_kind, *have, want) == 0;
}

// $in: the field equals one of the array's values.
bool in(const std::optional<bson_iter_t>& have, const bson_iter_t& array) {
  if (!BSON_ITER_HOLDS_ARRAY(&array)) throw Unsupported("$in/$nin without an array");
  bson_iter_t each;
  if (!bson_iter_recurse(&array, &each)) throw Unsupported("an unreadable $in array");
  while (bson_iter_next(&each)) {
    if (BSON_ITER_HOLDS_DOCUMENT(&each) || BSON_ITER_HOLDS_ARRAY(&each) || BSON_ITER_HOLDS_REGEX(&each))
      throw Unsupported("a document, array or regex in $in/$nin");
    if (equals(have, each)) return true;
  }
  return false;
}

// $lt/$lte/$gt/$gte: only a value of the same type class compares (type bracketing).
bool ordered(std::string_view op, const std::optional<bson_iter_t>& have, const bson_iter_t& want) {
  const Kind want_kind = kind_of(want);
  if (want_kind == Kind::null) throw Unsupported(std::string(op) + " null");
  if (!have || kind_of(*have) != want_kind) return false;
  const int c = compare(want_kind, *have, want);
  if (op == "$lt") return c < 0;
  if (op == "$lte") return c <= 0;
  if (op == "$gt") return c > 0;
  return c >= 0; // $gte
}

bool is_operator_document(const bson_iter_t& value);

// One operator of {field: {op: value}}.
bool apply_operator(std::string_view op, const std::optional<bson_iter_t>& have, const bson_iter_t& value) {
  if (op == "$lt" || op == "$lte" || op == "$gt" || op == "$gte") return ordered(op, have, value);
  if (op == "$not") {
    // {$not: {ops}}: true where the operators do not all hold, a missing field included (run_ttl_ms's bound).
    bson_iter_t inner;
    if (!is_operator_document(value) || !bson_iter_recurse(&value, &inner)) throw Unsupported("$not of a non-operator");
    bool all = true;
    while (bson_iter_next(&inner))
      all = all && apply_operator(bson_iter_key(&inner), have, inner);
    return !all;
  }
  if (op == "$ne") return !equals(have, value);
  if (op == "$in") return in(have, value);
  if (op == "$nin") return !in(have, value);
  if (op == "$exists") {
    // Only a boolean: MongoDB reads a number by its truth, FerretDB v1 matches every document for {$exists: 1}
    // (docs/compatibility.md); MongoStore sends false.
    if (!BSON_ITER_HOLDS_BOOL(&value)) throw Unsupported("$exists of a non-boolean");
    return bson_iter_bool(&value) == have.has_value();
  }
  throw Unsupported("the query operator " + std::string(op));
}

// True when the value of a filter's field is an operator document ({$op: ...}).
bool is_operator_document(const bson_iter_t& value) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&value)) return false;
  bson_iter_t first;
  if (!bson_iter_recurse(&value, &first) || !bson_iter_next(&first)) return false;
  return bson_iter_key(&first)[0] == '$';
}

bool matches_field(const char* key, const bson_iter_t& value, const bson_t* doc) {
  if (std::strchr(key, '.') != nullptr) throw Unsupported(std::string("the dotted path '") + key + "'");
  const auto have = field(doc, key);
  if (have && (BSON_ITER_HOLDS_ARRAY(&*have) || BSON_ITER_HOLDS_DOCUMENT(&*have)))
    throw Unsupported(std::string("a document field that holds an array or a document ('") + key + "')");
  if (!is_operator_document(value)) {
    if (BSON_ITER_HOLDS_DOCUMENT(&value) || BSON_ITER_HOLDS_ARRAY(&value))
      throw Unsupported(std::string("equality to a document or array ('") + key + "')");
    return equals(have, value);
  }
  bson_iter_t op;
  if (!bson_iter_recurse(&value, &op)) throw Unsupported("an unreadable operator document");
  while (bson_iter_next(&op)) {
    if (bson_iter_key(&op)[0] != '$') throw Unsupported(std::string("a field mixed with operators in '") + key + "'");
    if (!apply_operator(bson_iter_key(&op), have, op)) return false;
  }
  return true;
}

// $or / $and: an array of filters.
bool matches_logical(std::string_view op, const bson_iter_t& value, const bson_t* doc, const Server& server) {
  if (!BSON_ITER_HOLDS_ARRAY(&value)) throw Unsupported(std::string(op) + " without an array");
  bson_iter_t each;
  if (!bson_iter_recurse(&value, &each)) throw Unsupported("an unreadable " + std::string(op));
  bool any = false;
  int count = 0;
  while (bson_iter_next(&each)) {
    ++count;
    if (!BSON_ITER_HOLDS_DOCUMENT(&each)) throw Unsupported(std::string(op) + " of a non-document");
    std::uint32_t len = 0;
    const std::uint8_t* data = nullptr;
    bson_iter_document(&each, &len, &data);
    bson_t sub;
    if (!bson_init_static(&sub, data, len)) throw Unsupported("an unreadable " + std::string(op) + " clause");
    const bool m = matches(&sub, doc, server);
    if (op == "$or" && m) any = true;
    if (op == "$and" && !m) return false;
  }
  if (count == 0) throw Unsupported(std::string(op) + " of an empty array"); // the server rejects it
  return op == "$or" ? any : true;
}

// One operand of a $expr comparison: a top-level field's value (nullopt: missing), $$NOW, or a date.
struct Operand {
  std::optional<Kind> kind; // nullopt: a missing field
  std::int64_t date_ms = 0; // Kind::date
  std::optional<bson_iter_t> value;
};

Operand operand(const bson_iter_t& it, const bson_t* doc, const Server& server) {
  if (BSON_ITER_HOLDS_DATE_TIME(&it)) return {Kind::date, bson_iter_date_time(&it), it};
  if (!BSON_ITER_HOLDS_UTF8(&it))
    throw Unsupported(std::string("a $expr operand of another kind than a field, $$NOW or a date"));
  const std::string text = bson_iter_utf8(&it, nullptr);
  if (text == "$$NOW") {
    if (!server.now_ms) throw Unsupported("$$NOW without the server's clock");
    return {Kind::date, *server.now_ms, std::nullopt};
  }
  if (text.size() < 2 || text[0] != '$' || text[1] == '$' || text.find('.') != std::string::npos)
    throw Unsupported("the $expr operand '" + text + "'");
  const auto have = field(doc, text.c_str() + 1);
  if (!have) return {std::nullopt, 0, std::nullopt};
  const Kind kind = kind_of(*have);
  return {kind, kind == Kind::date ? bson_iter_date_time(&*have) : 0, have};
}

// Orders two operands as MongoDB's aggregation does: by type class first (a missing field lowest), then by value.
int compare_operands(const Operand& a, const Operand& b) {
  if (!a.kind || !b.kind) {
    if (!a.kind && !b.kind) return 0;
    if ((a.kind && *a.kind == Kind::null) || (b.kind && *b.kind == Kind::null))
      throw Unsupported("a $expr comparison of a missing field with null");
    return a.kind ? 1 : -1;
  }
  if (*a.kind != *b.kind) return order(static_cast<int>(*a.kind), static_cast<int>(*b.kind));
  if (*a.kind == Kind::date) return order(a.date_ms, b.date_ms);
  if (!a.value || !b.value) throw Unsupported("a $expr comparison");
  return compare(*a.kind, *a.value, *b.value);
}

// {$expr: {$gt|$gte|$lt|$lte: [a, b]}}.
bool matches_expr(const bson_iter_t& value, const bson_t* doc, const Server& server) {
  if (server.refuses_expr) throw Refused();
  bson_iter_t op;
  if (!BSON_ITER_HOLDS_DOCUMENT(&value) || !bson_iter_recurse(&value, &op) || !bson_iter_next(&op))
    throw Unsupported("a $expr that is not {$op: [a, b]}");
  const std::string name = bson_iter_key(&op);
  if (name != "$gt" && name != "$gte" && name != "$lt" && name != "$lte")
    throw Unsupported("the $expr operator " + name);
  bson_iter_t args;
  if (!BSON_ITER_HOLDS_ARRAY(&op) || !bson_iter_recurse(&op, &args)) throw Unsupported(name + " without an array");
  std::vector<Operand> operands;
  while (bson_iter_next(&args))
    operands.push_back(operand(args, doc, server));
  bson_iter_t rest = op;
  if (operands.size() != 2 || bson_iter_next(&rest)) throw Unsupported("a $expr that is not {$op: [a, b]}");
  const int c = compare_operands(operands[0], operands[1]);
  if (name == "$gt") return c > 0;
  if (name == "$gte") return c >= 0;
  if (name == "$lt") return c < 0;
  return c <= 0; // $lte
}

} // namespace

bool matches(const bson_t* filter, const bson_t* doc, const Server& server) {
  bson_iter_t it;
  if (!bson_iter_init(&it, filter)) throw Unsupported("an unreadable filter");
  while (bson_iter_next(&it)) {
    const char* key = bson_iter_key(&it);
    if (std::strcmp(key, "$or") == 0 || std::strcmp(key, "$and") == 0) {
      if (!matches_logical(key, it, doc, server)) return false;
    } else if (std::strcmp(key, "$expr") == 0) {
      if (!matches_expr(it, doc, server)) return false;
    } else if (key[0] == '$') {
      throw Unsupported(std::string("the top-level operator ") + key);
    } else if (!matches_field(key, it, doc)) {
      return false;
    }
  }
  return true;
}

namespace {

// The keys of one update operator's document ({$set: {a: 1}} -> a), checked: top-level, not _id.
void collect_keys(const bson_iter_t& op, std::set<std::string>& keys) {
  if (!BSON_ITER_HOLDS_DOCUMENT(&op)) throw Unsupported(std::string(bson_iter_key(&op)) + " of a non-document");
  bson_iter_t each;
  if (!bson_iter_recurse(&op, &each)) throw Unsupported("an unreadable update");
  while (bson_iter_next(&each)) {
    const std::string key = bson_iter_key(&each);
    if (key.find('.') != std::string::npos || key.empty() || key[0] == '$')
      throw Unsupported("the update path '" + key + "'");
    if (key == "_id") throw Unsupported("an update of _id");
    if (!keys.insert(key).second) throw Unsupported("two updates of '" + key + "'"); // the server: a conflict
  }
}

} // namespace

void apply_update(const bson_t* update, const bson_t* doc, bson_t* out) {
  bson_iter_t it;
  if (!bson_iter_init(&it, update)) throw Unsupported("an unreadable update");
  std::set<std::string> touched;
  std::set<std::string> unset;
  std::optional<bson_iter_t> set;
  bool any = false;
  while (bson_iter_next(&it)) {
    any = true;
    const std::string op = bson_iter_key(&it);
    if (op.empty() || op[0] != '$') throw Unsupported("a replacement document or pipeline ('" + op + "')");
    if (op == "$set") {
      if (set) throw Unsupported("two $set");
      set = it;
      collect_keys(it, touched);
    } else if (op == "$unset") {
      std::set<std::string> mine;
      collect_keys(it, mine);
      for (const auto& key : mine) {
        if (!touched.insert(key).second) throw Unsupported("two updates of '" + key + "'");
        unset.insert(key);
      }
    } else {
      throw Unsupported("the update operator " + op);
    }
  }
  if (!any) throw Unsupported("an empty update");
  std::set<std::string> written;
  bson_iter_t old;
  if (!bson_iter_init(&old, doc)) throw Unsupported("an unreadable document");
  while (bson_iter_next(&old)) {
    const std::string key = bson_iter_key(&old);
    if (unset.count(key) != 0) continue;
    bson_iter_t value;
    if (set && bson_iter_recurse(&*set, &value) && bson_iter_find(&value, key.c_str())) {
      bson_append_iter(out, key.c_str(), -1, &value);
      written.insert(key);
    } else {
      bson_append_iter(out, key.c_str(), -1, &old);
    }
  }
  bson_iter_t added;
  if (set && bson_iter_recurse(&*set, &added)) {
    while (bson_iter_next(&added)) {
      if (written.count(bson_iter_key(&added)) == 0) bson_append_iter(out, bson_iter_key(&added), -1, &added);
    }
  }
}

} // namespace sim
