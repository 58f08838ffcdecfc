#include <mongolock/clock.hpp>
#include <mongolock/error.hpp>
#include <mongolock/exit_codes.hpp>
#include <mongolock/history.hpp>
#include <mongolock/liveness.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/orphan.hpp>
#include <mongolock/process.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <limits>
#include <optional>
#include <unistd.h>

namespace mongolock {

namespace {

constexpr std::size_t k_max_request = 64 * 1024;
constexpr Millis k_max_call{5000};

void put(std::string& out, std::string_view field) { out += fmt::format("{}:{},", field.size(), field); }

class Fields {
public:
  explicit Fields(std::string_view text) : m_text(text) {}
  [[nodiscard]] bool done() const { return m_text.empty(); }
  std::string next() {
    const auto colon = m_text.find(':');
    std::size_t size = 0;
    const auto [end, ec] = std::from_chars(m_text.data(), m_text.data() + std::min(colon, m_text.size()), size);
    if (colon == std::string_view::npos || ec != std::errc() || end != m_text.data() + colon ||
        m_text.size() < colon + 2 + size || m_text[colon + 1 + size] != ',') {
      throw usage_error("the orphaned-lock release request is malformed");
    }
    auto field = std::string(m_text.substr(colon + 1, size));
    m_text.remove_prefix(colon + 2 + size);
    return field;
  }
  std::int64_t number() {
    const auto text = next();
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
      throw usage_error("the orphaned-lock release request has a malformed number");
    }
    return value;
  }

private:
  std::string_view m_text;
};

std::string read_request(std::string_view fd_text) {
  int fd = -1;
  const auto [end, ec] = std::from_chars(fd_text.data(), fd_text.data() + fd_text.size(), fd);
  if (ec != std::errc() || end != fd_text.data() + fd_text.size() || fd < 0) {
    throw usage_error(fmt::format("{} takes a file descriptor number, not '{}'", k_release_orphaned_command, fd_text));
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    const auto n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw usage_error(fmt::format("cannot read the orphaned-lock release request on fd {}", fd));
    if (n == 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > k_max_request) throw usage_error("the orphaned-lock release request is over 64 KiB");
  }
  close(fd);
  return text;
}

} // namespace

namespace {

void put_number(std::string& out, std::int64_t value) { put(out, std::to_string(value)); }

// A run record's fields that the run prepared (OrphanRequest::runs).
void put_run(std::string& out, const RunRecord& run) {
  for (const auto* field : {&run.id, &run.name, &run.process, &run.pid_ns, &run.host, &run.user})
    put(out, *field);
  put_number(out, static_cast<std::int64_t>(run.command.size()));
  for (const auto& arg : run.command)
    put(out, arg);
  put(out, run.started_at ? std::to_string(run.started_at->time_since_epoch().count()) : std::string());
  put_number(out, run.waited.count());
  put(out, run.lock);
  put(out, run.fence ? std::to_string(*run.fence) : std::string());
  put(out, run.outcome);
  put_number(out, run.exit_code);
}

// A count of items that follow, each of at least 2 bytes ("0:,"): bounded by what is left of the text.
std::size_t count(Fields& fields, std::size_t left) {
  const auto n = fields.number();
  if (static_cast<std::size_t>(n) > left / 2) throw usage_error("the orphaned-lock release request has a bad count");
  return static_cast<std::size_t>(n);
}

std::optional<std::int64_t> optional_number(Fields& fields) {
  const auto text = fields.next();
  if (text.empty()) return std::nullopt;
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw usage_error("the orphaned-lock release request has a malformed number");
  }
  return value;
}

RunRecord next_run(Fields& fields, std::size_t left) {
  RunRecord run;
  for (auto* field : {&run.id, &run.name, &run.process, &run.pid_ns, &run.host, &run.user})
    *field = fields.next();
  for (auto n = count(fields, left); n > 0; --n)
    run.command.push_back(fields.next());
  if (const auto started = optional_number(fields)) run.started_at = ServerTime(Millis(*started));
  run.waited = Millis(fields.number());
  run.lock = fields.next();
  run.fence = optional_number(fields);
  run.outcome = fields.next();
  run.exit_code = static_cast<int>(fields.number());
  return run;
}

} // namespace

std::string encode_orphan_request(const OrphanRequest& request) {
  std::string out;
  put(out, request.store.uri);
  put(out, request.store.database);
  put(out, request.store.collection);
  put(out, std::to_string(request.store.connect_timeout.count()));
  put(out, std::to_string(request.store.operation_timeout.count()));
  put(out, std::to_string(request.holder_pid));
  put(out, std::to_string(request.holder_start));
  put_number(out, static_cast<std::int64_t>(request.locks.size()));
  for (const auto& lock : request.locks) {
    put(out, lock.program);
    put(out, lock.id);
    put(out, lock.token);
  }
  // The runs within what release_orphaned() reads: with each command cut to its program when they would
  // not fit (a run of many names, long arguments), left out when even then (the locks come first).
  const auto runs_part = [&](bool whole) {
    std::string part;
    put_number(part, static_cast<std::int64_t>(request.runs.size()));
    for (auto run : request.runs) {
      if (!whole && run.command.size() > 1) run.command.resize(1);
      put_run(part, run);
    }
    return part;
  };
  for (const bool whole : {true, false}) {
    if (auto part = runs_part(whole); out.size() + part.size() <= k_max_request) return out + part;
  }
  put_number(out, 0);
  return out;
}

OrphanRequest decode_orphan_request(std::string_view text) {
  Fields fields(text);
  OrphanRequest request;
  request.store.uri = fields.next();
  request.store.database = fields.next();
  request.store.collection = fields.next();
  request.store.connect_timeout = Millis(fields.number());
  request.store.operation_timeout = Millis(fields.number());
  request.holder_pid = static_cast<int>(fields.number());
  request.holder_start = fields.number();
  for (auto n = count(fields, text.size()); n > 0; --n) {
    LockRecord lock;
    lock.program = fields.next();
    lock.id = fields.next();
    lock.token = fields.next();
    request.locks.push_back(std::move(lock));
  }
  for (auto n = count(fields, text.size()); n > 0; --n)
    request.runs.push_back(next_run(fields, text.size()));
  if (!fields.done()) throw usage_error("the orphaned-lock release request has trailing fields");
  return request;
}

namespace {

// The dead run's history records (prepared by the run: outcome lease-lost), ended now; no purge (the next
// run does it). A failure is one warning (record_runs()).
void record_orphaned_runs(MongoStore& store, std::vector<RunRecord> runs, const Log& log) {
  if (runs.empty()) return;
  try {
    const auto now = store.clock().now();
    for (auto& run : runs) {
      run.ended_at = now;
      if (run.started_at) run.duration = std::max(Millis(0), now - *run.started_at);
    }
    HistoryPolicy policy;
    policy.purge_every = std::numeric_limits<std::int64_t>::max();
    record_runs(store, std::move(runs), policy, now, log);
  } catch (const Error& e) {
    log.warning(fmt::format("the run of the dead mongolock was not recorded in the history ({})", e.what()));
  }
}

} // namespace

int release_orphaned(std::string_view fd_text, const Log& log) {
  auto request = decode_orphan_request(read_request(fd_text));
  // The dead run's holder file: nobody holds it any more (mongolock is gone; this process no longer has
  // the guardian's descriptor); and the job's empty cgroup it names (X12c: it was left behind).
  if (request.holder_pid > 0 && request.holder_start > 0) {
    remove_dead_run_leftovers(request.holder_pid, request.holder_start);
  }
  // Bounded: whoever waits for these locks is better served by their expiry than by a hung release.
  request.store.connect_timeout = std::min(request.store.connect_timeout, k_max_call);
  request.store.operation_timeout = std::min(request.store.operation_timeout, k_max_call);
  MongoStore store(request.store, log);
  Locker locker(store, log);
  std::string released;
  std::string kept;
  try {
    for (const auto& lock : request.locks) {
      // As a release after the run: a lock within its --min-hold is marked released and stays held to its
      // hold_until (Locker::release), never deleted early.
      const auto outcome = locker.release(LockSelector{.program = lock.program, .id = lock.id, .token = lock.token});
      if (outcome.kind == ReleaseOutcome::released) {
        released += fmt::format("{}'{}'", released.empty() ? "" : ", ", lock.program);
      } else if (outcome.kind == ReleaseOutcome::min_hold) {
        kept += fmt::format("{}'{}' kept until {} (--min-hold)", kept.empty() ? "" : ", ", lock.program,
                            format_time(outcome.hold_until));
      }
    }
  } catch (const Error& e) {
    log.error(fmt::format("mongolock (pid {}) died; its job was stopped, but its locks could not be released "
                          "({}); they expire on their own",
                          request.holder_pid, e.what()));
    return k_exit_unavailable;
  }
  std::string what;
  if (!released.empty()) what = fmt::format("lock {} released", released);
  if (!kept.empty()) what += fmt::format("{}lock {}", what.empty() ? "" : "; ", kept);
  // Said as soon as the locks are given back (what an operator waits for); the history record comes after,
  // with its own bounded calls and its own warning if it fails.
  log.warning(fmt::format("mongolock (pid {}) died; its job was stopped and {}", request.holder_pid,
                          what.empty() ? std::string("its locks were already gone") : what));
  record_orphaned_runs(store, std::move(request.runs), log);
  return k_exit_ok;
}

} // namespace mongolock
