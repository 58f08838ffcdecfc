// MongoStore: the run history (<collection>_runs) and each name's last executed run (<collection>_lastrun).
#include <mongolock/history.hpp>
#include <mongolock/store/impl.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <thread>

namespace mongolock {

using namespace store;

// --- the run history --------------------------------------------------------------------------------

namespace {

void append_string_array(bson_t* doc, const char* key, const std::vector<std::string>& values) {
  bson_t array;
  BSON_APPEND_ARRAY_BEGIN(doc, key, &array);
  for (std::size_t i = 0; i < values.size(); ++i)
    append_string(&array, std::to_string(i).c_str(), values[i]);
  bson_append_array_end(doc, &array);
}

std::vector<std::string> iter_strings(const bson_iter_t& it) {
  std::vector<std::string> out;
  bson_iter_t item;
  if (BSON_ITER_HOLDS_ARRAY(&it) && bson_iter_recurse(&it, &item)) {
    while (bson_iter_next(&item))
      out.push_back(iter_string(item));
  }
  return out;
}

// A run document; without `with_id`, no _id (the caller appends its own).
void to_bson(const RunRecord& run, bson_t* doc, bool with_id = true) {
  if (with_id) append_id(doc, run.id);
  append_string(doc, "name", run.name);
  append_string(doc, "process", run.process);
  append_string(doc, "host", run.host);
  if (!run.pid_ns.empty()) append_string(doc, "pid_ns", run.pid_ns);
  append_string(doc, "user", run.user);
  append_string_array(doc, "command", run.command);
  if (run.started_at) BSON_APPEND_DATE_TIME(doc, "started_at", to_bson_date(*run.started_at));
  BSON_APPEND_DATE_TIME(doc, "ended_at", to_bson_date(run.ended_at));
  if (run.duration) BSON_APPEND_INT64(doc, "duration_ms", run.duration->count());
  BSON_APPEND_INT64(doc, "waited_ms", run.waited.count());
  append_string(doc, "outcome", run.outcome);
  BSON_APPEND_INT32(doc, "exit_code", run.exit_code);
  if (!run.signal.empty()) append_string(doc, "signal", run.signal);
  if (!run.held_by.empty()) append_string(doc, "held_by", run.held_by);
  if (run.fence) BSON_APPEND_INT64(doc, "fence", *run.fence);
  if (!run.lock.empty()) append_string(doc, "lock", run.lock);
  if (!run.held_lock.empty()) append_string(doc, "held_lock", run.held_lock);
  if (run.keep_until) BSON_APPEND_DATE_TIME(doc, "keep_until", to_bson_date(*run.keep_until));
  if (run.skips > 0) {
    BSON_APPEND_INT64(doc, "skips", run.skips);
    BSON_APPEND_INT64(doc, "skip_hosts", run.skip_hosts);
    append_string_array(doc, "skipped_on", run.skipped_on);
  }
}

// The fields that fold skipped attempts into runs (lock, held_lock, skips, skip_hosts, skipped_on) and
// keep_until, when `key` is one of them.
void read_fold_field(std::string_view key, const bson_iter_t& it, RunRecord& run) {
  if (BSON_ITER_HOLDS_DATE_TIME(&it) && key == "keep_until") {
    run.keep_until = from_bson_date(bson_iter_date_time(&it));
  } else if (key == "skipped_on") {
    run.skipped_on = iter_strings(it);
  } else if (key == "lock") {
    run.lock = iter_string(it);
  } else if (key == "held_lock") {
    run.held_lock = iter_string(it);
  } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "skips") {
    run.skips = std::max<std::int64_t>(number(it).value_or(0), 0);
  } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "skip_hosts") {
    run.skip_hosts = std::max<std::int64_t>(number(it).value_or(0), 0);
  }
}

// Reads a run document; fields of unexpected types are left at their defaults (another client may have
// written it).
RunRecord run_from_bson(const bson_t* doc) {
  RunRecord run;
  bson_iter_t it;
  if (!bson_iter_init(&it, doc)) return run;
  while (bson_iter_next(&it)) {
    const std::string_view key = bson_iter_key(&it);
    if (key == "_id") {
      run.id = iter_id(it);
    } else if (key == "name") {
      run.name = iter_string(it);
    } else if (key == "process") {
      run.process = iter_string(it);
    } else if (key == "host") {
      run.host = iter_string(it);
    } else if (key == "pid_ns") {
      run.pid_ns = iter_string(it);
    } else if (key == "user") {
      run.user = iter_string(it);
    } else if (key == "command") {
      run.command = iter_strings(it);
    } else if (BSON_ITER_HOLDS_DATE_TIME(&it) && key == "started_at") {
      run.started_at = from_bson_date(bson_iter_date_time(&it));
    } else if (BSON_ITER_HOLDS_DATE_TIME(&it) && key == "ended_at") {
      run.ended_at = from_bson_date(bson_iter_date_time(&it));
    } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "duration_ms") {
      run.duration = Millis(number(it).value_or(0));
    } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "waited_ms") {
      run.waited = Millis(number(it).value_or(0));
    } else if (key == "outcome") {
      run.outcome = iter_string(it);
    } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "exit_code") {
      run.exit_code = static_cast<int>(std::clamp<std::int64_t>(number(it).value_or(0), -1, 255));
    } else if (key == "signal") {
      run.signal = iter_string(it);
    } else if (key == "held_by") {
      run.held_by = iter_string(it);
    } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "fence") {
      run.fence = number(it).value_or(0);
    } else {
      read_fold_field(key, it, run);
    }
  }
  return run;
}

// {keep_until: {$not: {$gt: NOW}}}: not a --once-per success whose period lasts past `now` (RunRecord::keep_until;
// a document without the field matches).
void append_not_kept(bson_t* selector, ServerTime now) {
  append_not_above(selector, "keep_until",
                   [&](bson_t* in, const char* key) { bson_append_date_time(in, key, -1, to_bson_date(now)); });
}

// {sort: {ended_at: -1, _id: -1}}: newest first, ties in a fixed order.
void append_newest_first(bson_t* opts) { append_sort(opts, {{"ended_at", -1}, {"_id", -1}}); }

} // namespace

bool store::server_in_transition(const bson_error_t& error) {
  if (error.domain != MONGOC_ERROR_SERVER && error.domain != MONGOC_ERROR_QUERY) return false;
  constexpr std::uint32_t codes[] = {6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436};
  return std::find(std::begin(codes), std::end(codes), error.code) != std::end(codes);
}

bool store::transient_failure(const bson_error_t& error) {
  return error.domain == MONGOC_ERROR_STREAM || error.domain == MONGOC_ERROR_SERVER_SELECTION ||
         server_in_transition(error);
}

bool store::history_insert_retryable(const bson_error_t& error) {
  if (error.domain != MONGOC_ERROR_SERVER && error.domain != MONGOC_ERROR_QUERY) return false;
  return sqlite_locked(error.message) || server_in_transition(error);
}

bool store::only_duplicate_ids(const bson_t* reply) {
  bson_iter_t it;
  bson_iter_t errors;
  if (!bson_iter_init_find(&it, reply, "writeErrors") || !BSON_ITER_HOLDS_ARRAY(&it) ||
      !bson_iter_recurse(&it, &errors)) {
    return false;
  }
  bool any = false;
  while (bson_iter_next(&errors)) {
    bson_iter_t code;
    bson_iter_t message;
    if (!BSON_ITER_HOLDS_DOCUMENT(&errors) || !bson_iter_recurse(&errors, &code) || !bson_iter_find(&code, "code") ||
        bson_iter_as_int64(&code) != 11000 || !bson_iter_recurse(&errors, &message) ||
        !bson_iter_find(&message, "errmsg")) {
      return false;
    }
    const auto text = iter_string(message);
    // MongoDB names the index ("index: _id_ dup key: ..."); FerretDB v1 names none (the _id's, on _runs).
    if (text.find("_id") == std::string::npos && text.find("index:") != std::string::npos) return false;
    any = true;
  }
  return any;
}

mongoc_collection_t* MongoStore::Impl::runs_collection(bool ensure_index) {
  const Index by_name{"name_1_ended_at_1", {"name", "ended_at"}, false};
  return open(runs, "_runs", ensure_index ? &by_name : nullptr, &runs_indexed);
}

void MongoStore::insert_runs(std::vector<RunRecord>& records) {
  auto& impl = *m_impl;
  impl.connect();
  if (records.empty()) return;
  auto* runs = impl.runs_collection();
  // {insert: "<collection>_runs", documents: [...]}: one command for every record.
  Bson command;
  BSON_APPEND_UTF8(command.get(), "insert", mongoc_collection_get_name(runs));
  bson_t documents;
  BSON_APPEND_ARRAY_BEGIN(command.get(), "documents", &documents);
  for (std::size_t i = 0; i < records.size(); ++i) {
    if (records[i].id.empty()) records[i].id = new_object_id();
    bson_t doc;
    bson_append_document_begin(&documents, std::to_string(i).c_str(), -1, &doc);
    to_bson(records[i], &doc);
    bson_append_document_end(&documents, &doc);
  }
  bson_append_array_end(command.get(), &documents);
  BSON_APPEND_BOOL(command.get(), "ordered", false); // a retry inserts every record an earlier copy did not
  Reply reply;
  bson_error_t error;
  int attempt = 1;
  for (;; ++attempt) {
    if (mongoc_collection_write_command_with_opts(runs, command.get(), impl.write_opts.get(), reply.get(), &error)) {
      break;
    }
    // Refused in passing (nothing written): again, within the time the call has (red team 7, F5: one refusal
    // of a --once-per success record let the next host run the job again in the same period).
    const auto pause = std::min(Millis(50) * (1 << std::min(attempt - 1, 4)), Millis(1000));
    const auto until = impl.call_deadline.until;
    if (history_insert_retryable(error) && (until ? LeaseClock::now() + pause < *until : attempt < 5)) {
      impl.log.debugf("the server refused the history record of '{}' ({}); sending it again", records.front().name,
                      impl.driver_text(error));
      ++impl.monitor.resent["insert"];
      std::this_thread::sleep_for(pause);
      bson_destroy(reply.get()); // the next call initializes it again (libmongoc: always, also on failure)
      continue;
    }
    impl.fail_write(fmt::format("insert of the run history of '{}'", records.front().name), error,
                    fmt::format("with 'mongolock history {}'", records.front().name), "_runs");
  }
  if (attempt > 1 && only_duplicate_ids(reply.get())) return; // records an earlier copy wrote: recorded
  // A write error (e.g. a document the server refuses) is in the reply, not in `error`.
  bson_iter_t it;
  if (bson_iter_init_find(&it, reply.get(), "writeErrors") && BSON_ITER_HOLDS_ARRAY(&it)) {
    bson_iter_t message;
    std::string text = "the server refused the document";
    if (bson_iter_init(&it, reply.get()) && bson_iter_find_descendant(&it, "writeErrors.0.errmsg", &message)) {
      text = iter_string(message);
    }
    bson_set_error(&error, MONGOC_ERROR_SERVER, MONGOC_ERROR_COLLECTION_INSERT_FAILED, "%s", text.c_str());
    impl.fail(fmt::format("insert of the run history of '{}'", records.front().name), error, "_runs");
  }
}

std::vector<RunRecord> MongoStore::runs(std::optional<std::string_view> name, std::optional<ServerTime> since,
                                        std::int64_t limit) {
  return runs_of_kind(name, since, limit, RunKind::all);
}

namespace {

const char* const k_attempt_outcomes[] = {"skipped", "not-due"}; // history.hpp: is_attempt()

// {outcome: {$in|$nin: ["skipped", "not-due"]}}: the attempts, or every other run (RunKind::all: nothing).
void append_kind(bson_t* filter, RunKind kind) {
  if (kind == RunKind::all) return;
  bson_t condition, outcomes;
  BSON_APPEND_DOCUMENT_BEGIN(filter, "outcome", &condition);
  BSON_APPEND_ARRAY_BEGIN(&condition, kind == RunKind::attempts ? "$in" : "$nin", &outcomes);
  for (std::size_t i = 0; i < std::size(k_attempt_outcomes); ++i)
    BSON_APPEND_UTF8(&outcomes, std::to_string(i).c_str(), k_attempt_outcomes[i]);
  bson_append_array_end(&condition, &outcomes);
  bson_append_document_end(filter, &condition);
}

// {field: {$in: values}}
void append_in(bson_t* filter, const char* field, const std::vector<std::string>& values) {
  bson_t condition;
  BSON_APPEND_DOCUMENT_BEGIN(filter, field, &condition);
  append_string_array(&condition, "$in", values);
  bson_append_document_end(filter, &condition);
}

} // namespace

std::vector<RunRecord> MongoStore::Impl::read_runs(mongoc_collection_t* from, const bson_t* filter, bson_t* opts,
                                                   std::int64_t limit, const char* what) {
  BSON_APPEND_INT64(opts, "limit", std::max<std::int64_t>(limit, 1));
  // One more than the limit: FerretDB keeps a cursor open (a getMore) when the first batch is exactly full.
  BSON_APPEND_INT64(opts, "batchSize", std::clamp<std::int64_t>(limit + 1, 2, k_one_reply));
  return find_docs<RunRecord>(from, filter, opts, run_from_bson, what);
}

std::vector<RunRecord> MongoStore::runs_of_kind(std::optional<std::string_view> name, std::optional<ServerTime> since,
                                                std::int64_t limit, RunKind kind) {
  auto& impl = *m_impl;
  impl.connect();
  Bson filter;
  if (name) append_string(filter.get(), "name", *name);
  if (since) append_date_condition(filter.get(), "ended_at", "$gte", *since);
  append_kind(filter.get(), kind);
  Bson opts;
  append_newest_first(opts.get());
  return impl.read_runs(impl.runs_collection(), filter.get(), opts.get(), limit, "read of the run history");
}

std::vector<RunRecord> MongoStore::runs_holding(std::string_view name, const std::vector<std::string>& locks) {
  if (locks.empty()) return {};
  auto& impl = *m_impl;
  impl.connect();
  Bson filter;
  append_string(filter.get(), "name", name);
  append_in(filter.get(), "lock", locks);
  Bson opts;
  bson_t projection;
  BSON_APPEND_DOCUMENT_BEGIN(opts.get(), "projection", &projection);
  for (const char* field : {"name", "lock", "skips", "skip_hosts", "skipped_on", "ended_at", "outcome"})
    BSON_APPEND_INT32(&projection, field, 1);
  bson_append_document_end(opts.get(), &projection);
  return impl.read_runs(impl.runs_collection(), filter.get(), opts.get(), static_cast<std::int64_t>(locks.size()) * 2,
                        "read of the runs that held the locks");
}

namespace {

// The statements of one update command at most. FerretDB v1.24.2 keeps the query of every statement that matched
// a document open, each on a connection of its pool, until the command ends: an update of 101 matching statements
// waits for a 101st of its 100 SQLite connections (50 by default on PostgreSQL) and never ends, with the
// registry's lock taken, and the server answers nothing more (docs/compatibility.md; 99 statements: 0.2 s).
constexpr std::size_t k_statements_per_update = 25;

} // namespace

void MongoStore::update_skips(const std::vector<RunRecord>& runs) {
  auto& impl = *m_impl;
  impl.connect();
  if (runs.empty()) return;
  auto* collection = impl.runs_collection();
  // {update: "<collection>_runs", updates: [{q: {_id}, u: {$max: {skips, skip_hosts}, $set: {skipped_on}}}, ...]}:
  // a filter of _id alone, which FerretDB's SQLite backend serves by its primary key (any other field in it is a
  // scan of the whole collection per update: 4-6 s for 6 runs among 3,300 on a loaded machine, near the
  // operation timeout), and $max, so that two purges counting at once never lower a count.
  // At most k_statements_per_update statements a command (FerretDB's pool, below).
  for (std::size_t first = 0; first < runs.size(); first += k_statements_per_update) {
    const std::size_t last = std::min(runs.size(), first + k_statements_per_update);
    Bson command;
    BSON_APPEND_UTF8(command.get(), "update", mongoc_collection_get_name(collection));
    bson_t updates;
    BSON_APPEND_ARRAY_BEGIN(command.get(), "updates", &updates);
    for (std::size_t i = first; i < last; ++i) {
      bson_t update, query, change, counts, fields;
      bson_append_document_begin(&updates, std::to_string(i - first).c_str(), -1, &update);
      BSON_APPEND_DOCUMENT_BEGIN(&update, "q", &query);
      append_id(&query, runs[i].id);
      bson_append_document_end(&update, &query);
      BSON_APPEND_DOCUMENT_BEGIN(&update, "u", &change);
      BSON_APPEND_DOCUMENT_BEGIN(&change, "$max", &counts);
      BSON_APPEND_INT64(&counts, "skips", runs[i].skips);
      BSON_APPEND_INT64(&counts, "skip_hosts", runs[i].skip_hosts);
      bson_append_document_end(&change, &counts);
      BSON_APPEND_DOCUMENT_BEGIN(&change, "$set", &fields);
      append_string_array(&fields, "skipped_on", runs[i].skipped_on);
      bson_append_document_end(&change, &fields);
      bson_append_document_end(&update, &change);
      bson_append_document_end(&updates, &update);
    }
    bson_append_array_end(command.get(), &updates);
    BSON_APPEND_BOOL(command.get(), "ordered", false);
    Reply reply;
    bson_error_t error;
    if (!mongoc_collection_write_command_with_opts(collection, command.get(), impl.write_opts.get(), reply.get(),
                                                   &error)) {
      impl.fail("update of the skip counts", error, "_runs");
    }
  }
}

mongoc_collection_t* MongoStore::Impl::last_runs_collection() { return open(last_runs, "_lastrun"); }

void MongoStore::record_last_runs(const std::vector<RunRecord>& runs) {
  auto& impl = *m_impl;
  impl.connect();
  if (runs.empty()) return;
  auto* last = impl.last_runs_collection();
  // {update: "<collection>_lastrun", updates: [{q: {_id: NAME, ended_at: {$lt: T}}, u: {run as stored, _id
  // NAME, run_id}, upsert: true}, ...]}: a newer run's document does not match, so the upsert tries an insert
  // and fails on the duplicate _id: the newer one stays.
  // At most k_statements_per_update statements a command (FerretDB's pool, below).
  for (std::size_t first = 0; first < runs.size(); first += k_statements_per_update) {
    const std::size_t end = std::min(runs.size(), first + k_statements_per_update);
    Bson command;
    BSON_APPEND_UTF8(command.get(), "update", mongoc_collection_get_name(last));
    bson_t updates;
    BSON_APPEND_ARRAY_BEGIN(command.get(), "updates", &updates);
    for (std::size_t i = first; i < end; ++i) {
      bson_t update, query, replacement;
      bson_append_document_begin(&updates, std::to_string(i - first).c_str(), -1, &update);
      BSON_APPEND_DOCUMENT_BEGIN(&update, "q", &query);
      append_string(&query, "_id", runs[i].name);
      append_date_condition(&query, "ended_at", "$lt", runs[i].ended_at);
      bson_append_document_end(&update, &query);
      BSON_APPEND_DOCUMENT_BEGIN(&update, "u", &replacement);
      append_string(&replacement, "_id", runs[i].name);
      to_bson(runs[i], &replacement, /*with_id=*/false);
      append_string(&replacement, "run_id", runs[i].id);
      bson_append_document_end(&update, &replacement);
      BSON_APPEND_BOOL(&update, "upsert", true);
      bson_append_document_end(&updates, &update);
    }
    bson_append_array_end(command.get(), &updates);
    BSON_APPEND_BOOL(command.get(), "ordered", false);
    Reply reply;
    bson_error_t error;
    // A duplicate _id (a newer run's document) is a write error in the reply: nothing to do.
    if (!mongoc_collection_write_command_with_opts(last, command.get(), impl.write_opts.get(), reply.get(), &error)) {
      impl.fail("update of the last run", error, "_lastrun");
    }
  }
}

std::vector<RunRecord> MongoStore::last_runs(const std::vector<std::string>& names) {
  // The summaries only: history.hpp's last_runs() reads the runs that ended since.
  if (names.empty()) return {};
  auto& impl = *m_impl;
  impl.connect();
  Bson filter;
  append_in(filter.get(), "_id", names);
  Bson opts;
  auto out = impl.read_runs(impl.last_runs_collection(), filter.get(), opts.get(),
                            static_cast<std::int64_t>(names.size()), "read of the last runs");
  // The document's _id is the name; the run's own _id is kept as run_id (the name field says the same).
  for (auto& run : out)
    run.id.clear();
  return out;
}

std::vector<RunRecord>
MongoStore::executed_since(const std::vector<std::pair<std::string, std::optional<ServerTime>>>& since) {
  if (since.empty()) return {};
  auto& impl = *m_impl;
  impl.connect();
  // {$or: [{name: N, ended_at: {$gt: T}}, {name: M}, ...], outcome: {$nin: attempts}}: each branch an
  // equality on name and a range on ended_at, the index name_1_ended_at_1's prefix.
  Bson filter;
  bson_t any;
  BSON_APPEND_ARRAY_BEGIN(filter.get(), "$or", &any);
  for (std::size_t i = 0; i < since.size(); ++i) {
    bson_t branch;
    BSON_APPEND_DOCUMENT_BEGIN(&any, std::to_string(i).c_str(), &branch);
    append_string(&branch, "name", since[i].first);
    if (since[i].second) append_date_condition(&branch, "ended_at", "$gt", *since[i].second);
    bson_append_document_end(&any, &branch);
  }
  bson_append_array_end(filter.get(), &any);
  append_kind(filter.get(), RunKind::executed);
  Bson opts;
  const auto limit = static_cast<std::int64_t>(since.size()) * k_max_history_keep;
  return impl.read_runs(impl.runs_collection(), filter.get(), opts.get(), limit, "read of the names' newest runs");
}

std::int64_t MongoStore::purge_runs(std::string_view name, std::int64_t keep, ServerTime ended_before, ServerTime now) {
  auto& impl = *m_impl;
  impl.connect();
  auto* runs = impl.runs_collection(/*ensure_index=*/true);
  std::int64_t deleted = 0;
  bson_error_t error;
  {
    Bson selector;
    append_date_condition(selector.get(), "ended_at", "$lt", ended_before);
    append_not_kept(selector.get(), now);
    Reply reply;
    if (!mongoc_collection_delete_many(runs, selector.get(), impl.write_opts.get(), reply.get(), &error)) {
      impl.fail("purge of old runs", error, "_runs");
    }
    deleted += reply.integer("deletedCount");
    // A last run that old goes too (list shows "-" for the name, as for one never run).
    Reply last_reply;
    if (!mongoc_collection_delete_many(impl.last_runs_collection(), selector.get(), impl.write_opts.get(),
                                       last_reply.get(), &error)) {
      impl.fail("purge of old last runs", error, "_lastrun");
    }
  }
  // Executed runs and attempts are bounded apart: a fleet's skips never push an executed run out.
  for (const auto kind : {RunKind::executed, RunKind::attempts})
    deleted += impl.purge_beyond(runs, name, keep, kind, now);
  return deleted;
}

std::int64_t MongoStore::Impl::purge_beyond(mongoc_collection_t* from, std::string_view name, std::int64_t keep,
                                            RunKind kind, ServerTime now) {
  // The newest run of `kind` beyond the `keep` newest of `name`: it and everything older of that kind goes.
  bson_error_t error;
  Bson filter;
  append_string(filter.get(), "name", name);
  append_kind(filter.get(), kind);
  Bson opts;
  append_newest_first(opts.get());
  BSON_APPEND_INT64(opts.get(), "skip", std::max<std::int64_t>(keep, 1));
  BSON_APPEND_INT64(opts.get(), "limit", 1);
  const auto beyond = find_docs<RunRecord>(from, filter.get(), opts.get(), run_from_bson,
                                           fmt::format("read of the runs of '{}'", name));
  if (beyond.empty()) return 0;
  const auto& first_out = beyond.front();
  // {name, outcome of kind, $or: [{ended_at: {$lt: T}}, {ended_at: T, _id: {$lte: ID}}]}: the sort's order.
  Bson selector;
  append_string(selector.get(), "name", name);
  append_kind(selector.get(), kind);
  bson_t any, older, tie;
  BSON_APPEND_ARRAY_BEGIN(selector.get(), "$or", &any);
  BSON_APPEND_DOCUMENT_BEGIN(&any, "0", &older);
  append_date_condition(&older, "ended_at", "$lt", first_out.ended_at);
  bson_append_document_end(&any, &older);
  BSON_APPEND_DOCUMENT_BEGIN(&any, "1", &tie);
  BSON_APPEND_DATE_TIME(&tie, "ended_at", to_bson_date(first_out.ended_at));
  bson_t id_range;
  BSON_APPEND_DOCUMENT_BEGIN(&tie, "_id", &id_range);
  bson_oid_t oid;
  if (parse_oid(first_out.id, oid)) {
    BSON_APPEND_OID(&id_range, "$lte", &oid);
  } else {
    append_string(&id_range, "$lte", first_out.id);
  }
  bson_append_document_end(&tie, &id_range);
  bson_append_document_end(&any, &tie);
  bson_append_array_end(selector.get(), &any);
  append_not_kept(selector.get(), now);
  Reply reply;
  if (!mongoc_collection_delete_many(from, selector.get(), write_opts.get(), reply.get(), &error)) {
    fail(fmt::format("purge of the runs of '{}'", name), error, "_runs");
  }
  return reply.integer("deletedCount");
}

void MongoStore::ensure_runs_index() {
  m_impl->connect();
  (void)m_impl->runs_collection(/*ensure_index=*/true);
}

std::string MongoStore::create_runs_ttl_index(Millis expire_after) {
  auto& impl = *m_impl;
  impl.connect();
  bson_error_t error;
  if (impl.try_create_index(impl.runs_collection(), "ended_at_ttl", {"ended_at"}, false, expire_after, error)) {
    return {};
  }
  return scrub_secrets(fmt::format("{} (error {})", error.message, error.code), impl.config.uri);
}

} // namespace mongolock
