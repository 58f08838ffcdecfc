// The only file that speaks libmongoc. Driver calls return bool + bson_error_t; this file turns
// failures into Error (exit 69) with the operation named and the URI's password redacted.
#include <mongolock/error.hpp>
#include <mongolock/mongo_store.hpp>
#include <mongolock/uri.hpp>

#include <mongoc/mongoc.h>

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <new>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <mutex>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mongolock {

namespace {

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
    return bson_iter_init_find(&it, &m_doc, key) && BSON_ITER_HOLDS_NUMBER(&it) ? bson_iter_as_int64(&it) : 0;
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

// --- driver set-up ----------------------------------------------------------------------------------

const Log* g_driver_log = nullptr; // the log driver messages go to (debug level only)
std::mutex g_driver_log_mutex;

void driver_log_handler(mongoc_log_level_t level, const char* domain, const char* message, void*) {
  std::lock_guard lock(g_driver_log_mutex);
  if (g_driver_log != nullptr && level <= MONGOC_LOG_LEVEL_INFO) {
    g_driver_log->debug(fmt::format("driver {}: {}", domain, g_driver_log->scrub(message)));
  }
}

// libmongoc (Debian's build initializes itself when loaded, before main) keeps counters in
// /dev/shm/mongoc-<pid> unless MONGOC_DISABLE_SHM is set in the environment, and removes the file in
// mongoc_cleanup(). A process killed outright (a holder's SIGKILL) leaves it behind, and a later process
// that gets the same pid cannot create its own and prints "Falling back to malloc for counters". So each
// mongolock removes its own file at once (the mapping stays valid; nothing else reads the counters), and
// nothing is left behind whatever ends it. Only the file this very process has mapped (same device and
// inode in /proc/self/maps) and owns: never another user's, and never one of a process with the same pid
// number in another pid namespace that shares /dev/shm (a container), which a "pid not alive" test would
// take for stale.
void remove_own_driver_counters() {
  const auto path = fmt::format("/dev/shm/mongoc-{}", getpid());
  struct stat st{};
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) return;
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return;
  char line[4096];
  bool mapped = false;
  while (!mapped && std::fgets(line, sizeof line, maps) != nullptr) {
    // address perms offset dev inode path
    unsigned long inode = 0;
    char file[4096] = "";
    if (std::sscanf(line, "%*s %*s %*s %*s %lu %4095s", &inode, file) == 2) {
      mapped = inode == static_cast<unsigned long>(st.st_ino) && path == file;
    }
  }
  std::fclose(maps);
  if (mapped) unlink(path.c_str());
}

// mongoc_init() once per process, mongoc_cleanup() at exit.
void init_driver(const Log& log) {
  static const struct Init {
    Init() {
      mongoc_log_set_handler(driver_log_handler, nullptr);
      mongoc_init(); // a no-op where libmongoc initialized itself when it was loaded
      remove_own_driver_counters();
    }
    ~Init() { mongoc_cleanup(); }
  } init;
  std::lock_guard lock(g_driver_log_mutex);
  g_driver_log = &log;
}

// --- conversions ----------------------------------------------------------------------------------

std::int64_t to_bson_date(ServerTime t) { return t.time_since_epoch().count(); }
ServerTime from_bson_date(std::int64_t ms) { return ServerTime(Millis(ms)); }

bool parse_oid(std::string_view hex, bson_oid_t& oid) {
  const std::string s(hex);
  if (!bson_oid_is_valid(s.c_str(), s.size())) return false;
  bson_oid_init_from_string(&oid, s.c_str());
  return true;
}

// Appends `_id: ObjectId(id)`; ids not written by mongolock (not ObjectIds) are matched as strings.
// batchSize of a find whose every document should come in its first reply (the reply's 16 MiB bound
// still applies: beyond it the driver sends getMores).
constexpr std::int64_t k_one_reply = 100'000;

void append_id(bson_t* doc, std::string_view id) {
  bson_oid_t oid;
  if (parse_oid(id, oid)) {
    BSON_APPEND_OID(doc, "_id", &oid);
  } else {
    bson_append_utf8(doc, "_id", 3, id.data(), static_cast<int>(id.size()));
  }
}

void append_string(bson_t* doc, const char* key, std::string_view value) {
  bson_append_utf8(doc, key, -1, value.data(), static_cast<int>(value.size()));
}

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
  append_string(doc, "host", lock.host);
  append_string(doc, "user", lock.user);
  if (!lock.command.empty()) append_string(doc, "command", lock.command);
  if (lock.fence) BSON_APPEND_INT64(doc, "fence", *lock.fence);
  if (lock.waiters) BSON_APPEND_BOOL(doc, "waiters", true);
  if (!lock.ticket.empty()) append_string(doc, "ticket", lock.ticket);
  if (!lock.boot_id.empty()) append_string(doc, "boot_id", lock.boot_id);
  if (!lock.pid_ns.empty()) append_string(doc, "pid_ns", lock.pid_ns);
  if (lock.pid_start) BSON_APPEND_INT64(doc, "pid_start", *lock.pid_start);
  if (lock.replace_seq) BSON_APPEND_INT64(doc, "replace_seq", *lock.replace_seq);
}

std::string iter_string(const bson_iter_t& it) {
  if (BSON_ITER_HOLDS_UTF8(&it)) {
    std::uint32_t len = 0;
    const char* s = bson_iter_utf8(&it, &len);
    return std::string(s, len);
  }
  return {};
}

// An _id as text: an ObjectId as 24 hex digits, a string as it is.
std::string iter_id(const bson_iter_t& it) {
  if (!BSON_ITER_HOLDS_OID(&it)) return iter_string(it);
  char hex[25];
  bson_oid_to_string(bson_iter_oid(&it), hex);
  return hex;
}

// How one field of a lock document is read into a LockRecord; a value of an unexpected type is ignored.
using LockField = void (*)(LockRecord&, const bson_iter_t&);

template <std::string LockRecord::* Member> void string_field(LockRecord& lock, const bson_iter_t& it) {
  lock.*Member = iter_string(it);
}

template <ServerTime LockRecord::* Member> void date_field(LockRecord& lock, const bson_iter_t& it) {
  if (BSON_ITER_HOLDS_DATE_TIME(&it)) lock.*Member = from_bson_date(bson_iter_date_time(&it));
}

std::optional<std::int64_t> number(const bson_iter_t& it) {
  if (!BSON_ITER_HOLDS_NUMBER(&it)) return std::nullopt;
  return bson_iter_as_int64(&it);
}

// The fields of a lock document (THE LOCK DOCUMENT in the man page), by name.
const std::map<std::string_view, LockField, std::less<>>& lock_fields() {
  static const std::map<std::string_view, LockField, std::less<>> fields{
      {"_id", [](LockRecord& l, const bson_iter_t& it) { l.id = iter_id(it); }},
      {"program", string_field<&LockRecord::program>},
      {"name", string_field<&LockRecord::name>},
      {"slot", [](LockRecord& l, const bson_iter_t& it) { l.slot = static_cast<int>(number(it).value_or(l.slot)); }},
      {"process", string_field<&LockRecord::process>},
      {"token", string_field<&LockRecord::token>},
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

// Reads a lock document; fields of unexpected types are left at their defaults.
LockRecord from_bson(const bson_t* doc) {
  LockRecord lock;
  bson_iter_t it;
  if (!bson_iter_init(&it, doc)) return lock;
  const auto& fields = lock_fields();
  while (bson_iter_next(&it)) {
    if (const auto field = fields.find(std::string_view(bson_iter_key(&it))); field != fields.end()) {
      field->second(lock, it);
    }
  }
  if (lock.name.empty()) lock.name = lock.program;
  return lock;
}

// Appends `{field: {op: date}}`.
void append_date_condition(bson_t* doc, const char* field, const char* op, ServerTime t) {
  bson_t condition;
  bson_append_document_begin(doc, field, -1, &condition);
  bson_append_date_time(&condition, op, -1, to_bson_date(t));
  bson_append_document_end(doc, &condition);
}

// The filter for a LockSelector: every set field narrows it.
void append_selector(bson_t* doc, const LockSelector& which) {
  if (which.id) append_id(doc, *which.id);
  append_string(doc, "program", which.program);
  if (which.token) append_string(doc, "token", *which.token);
  if (which.process) append_string(doc, "process", *which.process);
  if (which.expires_after) append_date_condition(doc, "expires_at", "$gt", *which.expires_after);
  if (which.hold_ends_by) append_date_condition(doc, "hold_until", "$lte", *which.hold_ends_by);
  if (which.expired_by) append_date_condition(doc, "expires_at", "$lte", *which.expired_by);
  if (which.renewed_before) append_date_condition(doc, "renewed_at", "$lt", *which.renewed_before);
  if (which.not_released) {
    bson_t exists;
    BSON_APPEND_DOCUMENT_BEGIN(doc, "released_at", &exists);
    BSON_APPEND_BOOL(&exists, "$exists", false);
    bson_append_document_end(doc, &exists);
  }
}

// Command monitoring (APM): counts commands by name for the benchmark and logs them with -v.
struct CommandMonitor {
  const Log& log;
  std::map<std::string, int> counts;

  // "2 (createIndexes 1, insert 1)"
  [[nodiscard]] std::string summary() const {
    int total = 0;
    std::string parts;
    for (const auto& [name, count] : counts) {
      total += count;
      parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", name, count);
    }
    return fmt::format("{} ({})", total, parts);
  }
};

void on_command_started(const mongoc_apm_command_started_t* event) {
  auto* monitor = static_cast<CommandMonitor*>(mongoc_apm_command_started_get_context(event));
  const std::string name = mongoc_apm_command_started_get_command_name(event);
  ++monitor->counts[name];
  // The collection a CRUD command targets is the value of its first field: shown so that -v tells who
  // writes which collection (tests check that a waiter never writes a lock document).
  bson_iter_t it;
  const bson_t* command = mongoc_apm_command_started_get_command(event);
  if (command != nullptr && bson_iter_init(&it, command) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it)) {
    monitor->log.debugf("command {} sent to {}", name, bson_iter_utf8(&it, nullptr));
  } else {
    monitor->log.debugf("command {} sent", name);
  }
}

void on_command_succeeded(const mongoc_apm_command_succeeded_t* event) {
  auto* monitor = static_cast<CommandMonitor*>(mongoc_apm_command_succeeded_get_context(event));
  monitor->log.debugf("command {} succeeded in {:.1f}ms", mongoc_apm_command_succeeded_get_command_name(event),
                      static_cast<double>(mongoc_apm_command_succeeded_get_duration(event)) / 1000.0);
}

void on_command_failed(const mongoc_apm_command_failed_t* event) {
  auto* monitor = static_cast<CommandMonitor*>(mongoc_apm_command_failed_get_context(event));
  bson_error_t error;
  mongoc_apm_command_failed_get_error(event, &error);
  monitor->log.debugf("command {} failed in {:.1f}ms: {}", mongoc_apm_command_failed_get_command_name(event),
                      static_cast<double>(mongoc_apm_command_failed_get_duration(event)) / 1000.0,
                      monitor->log.scrub(error.message));
}

// What a driver error most likely means, for a connection's TLS or authentication ("" when nothing
// specific): libmongoc's words name the step that failed, not what to change. Matched on libmongoc 1.23's
// messages (mongoc-stream-tls-openssl.c, mongoc-cluster.c, mongoc-scram.c).
std::string connection_hint(std::string_view message) {
  const auto has = [&](std::string_view text) { return message.find(text) != std::string_view::npos; };
  if (has("Authentication failed") || has("SCRAM Failure") || has("authentication failed"))
    return "the server refused the user name or password (check them and authSource)";
  if (has("requires authentication"))
    return "the server requires authentication (give user:password@ in the URI, kept in --uri-file)";
  if (has("Failed initialize TLS state") || has("Cannot find certificate") || has("Cannot load"))
    return "the TLS files could not be loaded (check tlsCAFile and tlsCertificateKeyFile, and "
           "tlsCertificateKeyFilePassword for an encrypted key)";
  if (has("mismatch") || has("Host name verification failed"))
    return "the server's certificate is not valid for the host name or address in the URI";
  if (has("certificate verify failed") || has("certificate has expired") || has("self-signed") || has("self signed"))
    return "the server's certificate is not trusted (check tlsCAFile: the CA that signed it)";
  if (has("TLS handshake timed out") || has("TLS handshake failed"))
    return "the TLS handshake failed (a port that does not speak TLS, with tls=true?)";
  if (has("calling hello") && (has("length header") || has("connection closed")))
    return "the server closed the connection at the handshake (a TLS port without tls=true, or a client "
           "certificate the server refused: missing, expired or not signed by its CA?)";
  return "";
}

// How long a server clock read from a hello is used before it is read again (refresh_clock).
constexpr Millis k_clock_max_age{60'000};

std::int32_t to_int32_ms(Millis d) { return static_cast<std::int32_t>(std::min<Millis::rep>(d.count(), INT32_MAX)); }

// --- per-call time limits on a kept connection ----------------------------------------------------
//
// libmongoc 1.23 fixes socketTimeoutMS when a client is made (no setter), and a new client means a new
// TCP connection, TLS handshake and authentication. To bound one call (a lease renewal) on the client
// that is kept, every connection of the client is wrapped in a DeadlineStream, which caps the timeout of
// each read and write at what is left of the call's deadline and fails them once it has passed.

// When the current call must be over; shared by every stream of the client (all on one thread).
struct CallDeadline {
  std::optional<LocalTime> until; // none: only the client's own socketTimeoutMS applies
  std::optional<Millis> server;   // maxTimeMS of a renewal (CallLimits::server)
  bool may_connect = true;        // false: a new connection is refused (a kept client whose connect limit
                                  // is longer than the call allows; see MongoStore::reconnect)
};

// The driver's stream (TCP or TLS, buffered) behind a deadline. `base` comes first: the driver sees a
// mongoc_stream_t* (the public custom-stream interface of mongoc-stream.h).
struct DeadlineStream {
  mongoc_stream_t base;
  mongoc_stream_t* inner;
  CallDeadline* deadline;
  bool cut = false; // the last read or write was refused because the deadline had passed
};

constexpr int k_deadline_stream_type = 0x6d6c; // not one of libmongoc's MONGOC_STREAM_* types

DeadlineStream* deadline_stream(mongoc_stream_t* stream) { return reinterpret_cast<DeadlineStream*>(stream); }

// Caps `timeout_ms` (negative: none) at the time left; false (errno ETIMEDOUT) when none is left.
bool cap_timeout(DeadlineStream* s, std::int32_t& timeout_ms) {
  s->cut = false;
  if (!s->deadline->until) return true;
  const auto left = std::chrono::ceil<Millis>(*s->deadline->until - LeaseClock::now()).count();
  if (left <= 0) {
    s->cut = true;
    errno = ETIMEDOUT;
    return false;
  }
  if (timeout_ms < 0 || timeout_ms > left)
    timeout_ms = static_cast<std::int32_t>(std::min<Millis::rep>(left, INT32_MAX));
  return true;
}

ssize_t deadline_writev(mongoc_stream_t* stream, mongoc_iovec_t* iov, size_t iovcnt, std::int32_t timeout_ms) {
  auto* s = deadline_stream(stream);
  if (!cap_timeout(s, timeout_ms)) return -1;
  return s->inner->writev(s->inner, iov, iovcnt, timeout_ms);
}

ssize_t deadline_readv(mongoc_stream_t* stream, mongoc_iovec_t* iov, size_t iovcnt, size_t min_bytes,
                       std::int32_t timeout_ms) {
  auto* s = deadline_stream(stream);
  if (!cap_timeout(s, timeout_ms)) return -1;
  return s->inner->readv(s->inner, iov, iovcnt, min_bytes, timeout_ms);
}

void deadline_destroy(mongoc_stream_t* stream) {
  auto* s = deadline_stream(stream);
  mongoc_stream_destroy(s->inner);
  delete s;
}

void deadline_failed(mongoc_stream_t* stream) {
  auto* s = deadline_stream(stream);
  mongoc_stream_failed(s->inner);
  delete s;
}

int deadline_close(mongoc_stream_t* stream) { return mongoc_stream_close(deadline_stream(stream)->inner); }
int deadline_flush(mongoc_stream_t* stream) { return mongoc_stream_flush(deadline_stream(stream)->inner); }
int deadline_setsockopt(mongoc_stream_t* stream, int level, int name, void* value, mongoc_socklen_t length) {
  return mongoc_stream_setsockopt(deadline_stream(stream)->inner, level, name, value, length);
}
mongoc_stream_t* deadline_base(mongoc_stream_t* stream) { return deadline_stream(stream)->inner; }
bool deadline_check_closed(mongoc_stream_t* stream) {
  return mongoc_stream_check_closed(deadline_stream(stream)->inner);
}
bool deadline_timed_out(mongoc_stream_t* stream) {
  auto* s = deadline_stream(stream);
  return s->cut || mongoc_stream_timed_out(s->inner);
}
bool deadline_should_retry(mongoc_stream_t* stream) {
  return mongoc_stream_should_retry(deadline_stream(stream)->inner);
}

} // namespace
} // namespace mongolock

// libmongoc's own connection maker (TCP, TLS with the client's options, buffered): exported by libmongoc
// 1.x (a custom initiator is meant to build on it) but declared only in its private mongoc-client-private.h
// (1.23.1 and master). `user_data` is the client.
extern "C" mongoc_stream_t* mongoc_client_default_stream_initiator(const mongoc_uri_t* uri,
                                                                   const mongoc_host_list_t* host, void* user_data,
                                                                   bson_error_t* error);

namespace mongolock {
namespace {

// mongoc_client_set_stream_initiator()'s user data: the client (for the default initiator's TLS options)
// and the deadline its streams follow.
struct StreamFactory {
  mongoc_client_t* client = nullptr;
  CallDeadline* deadline = nullptr;
};

// The driver's own connection (TCP connect within connectTimeoutMS, TLS handshake), wrapped.
mongoc_stream_t* deadline_initiator(const mongoc_uri_t* uri, const mongoc_host_list_t* host, void* user_data,
                                    bson_error_t* error) {
  auto* factory = static_cast<StreamFactory*>(user_data);
  if (!factory->deadline->may_connect) {
    // A kept client reconnecting inside a bounded call (a retried write after a network error): its
    // connect and handshake would be bounded by the client's connect timeout, not by the call's. The call
    // fails instead; the next reconnect() makes a new client with a connect limit that fits.
    bson_set_error(error, MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_CONNECT,
                   "connection to %s lost; not reconnecting within this call's time limit", host->host_and_port);
    return nullptr;
  }
  mongoc_stream_t* inner = mongoc_client_default_stream_initiator(uri, host, factory->client, error);
  if (inner == nullptr) return nullptr;
  auto* s = new (std::nothrow) DeadlineStream{};
  if (s == nullptr) return inner; // no memory for the wrapper: unbounded by the deadline, bounded by socketTimeoutMS
  s->base.type = k_deadline_stream_type;
  s->base.destroy = deadline_destroy;
  s->base.close = deadline_close;
  s->base.flush = deadline_flush;
  s->base.writev = deadline_writev;
  s->base.readv = deadline_readv;
  s->base.setsockopt = deadline_setsockopt;
  s->base.get_base_stream = deadline_base;
  s->base.check_closed = deadline_check_closed;
  s->base.poll = nullptr; // mongoc_stream_poll() polls the root stream (the socket)
  s->base.failed = deadline_failed;
  s->base.timed_out = deadline_timed_out;
  s->base.should_retry = deadline_should_retry;
  s->inner = inner;
  s->deadline = factory->deadline;
  return &s->base;
}

} // namespace

// --- the store ------------------------------------------------------------------------------------

struct MongoStore::Impl {
  StoreConfig config;
  const Log& log;
  std::string namespace_name; // "db.collection", for messages
  CommandMonitor monitor;     // before the client: destroying the client may still send commands
  UriPtr uri;
  CallDeadline call_deadline; // before the client: its streams point here
  StreamFactory streams;      // mongoc_client_set_stream_initiator()'s user data
  ClientPtr client;
  CollectionPtr collection;
  CollectionPtr fences;    // "<collection>_fences", opened on first use
  CollectionPtr queue;     // "<collection>_queue", opened on first use (queue of waiters)
  CollectionPtr events;    // "<database>_events.<collection>_events", opened on first use (wake-ups of waiters)
  CollectionPtr runs;      // "<collection>_runs", opened on first use (run history)
  CollectionPtr last_runs; // "<collection>_lastrun", opened on first use (each name's last executed run)
  Bson write_opts;         // {writeConcern: {w: "majority", j: true, wtimeout}}
  std::optional<ServerClock> clock;
  std::int64_t clock_hello_time = 0; // localTime of the hello the clock was taken from
  Millis connect_limit{0};           // the current client's connectTimeoutMS = serverSelectionTimeoutMS
  Millis socket_limit{0};            // the current client's socketTimeoutMS
  int clients_made = 0;              // clients made so far (each one connects anew), for -v
  bool clock_due = false;            // re-read the server's time at the next clock() (reconnect with limits)
  mutable bool failed = false;       // a call of the current client failed

  Impl(const StoreConfig& c, const Log& l) : config(c), log(l), monitor{l, {}} {}
  ~Impl() {
    collection.reset();
    fences.reset();
    queue.reset();
    events.reset();
    runs.reset();
    last_runs.reset();
    // endSessions only to a server that answered the last call: after a failure it could block the exit
    // for a whole socket timeout (a server that accepts connections and never answers).
    if (failed && client) mongoc_client_reset(client.get());
    client.reset(); // may send endSessions, which is counted too
    if (config.count_commands) log.diagnostic(fmt::format("server commands: {}", monitor.summary()));
  }

  // Driver and server text, scrubbed of the URI's password: only this text is scrubbed, so that our own
  // words (and the redacted URI) stay intact even when the password is an ordinary word.
  [[nodiscard]] std::string driver_text(const bson_error_t& error) const {
    return scrub_secrets(error.message, config.uri);
  }

  [[noreturn]] void fail(std::string_view what, const bson_error_t& error) const {
    failed = true;
    throw unavailable_error(
        fmt::format("{} on {} failed: {}{}", what, namespace_name, driver_text(error), hint_suffix(error)));
  }

  // For server commands that concern no collection (hello, buildInfo).
  [[noreturn]] void fail_server(std::string_view what, const bson_error_t& error) const {
    failed = true;
    throw unavailable_error(
        fmt::format("{} on {} failed: {}{}", what, redact_uri(config.uri), driver_text(error), hint_suffix(error)));
  }

  // "; <what it most likely means>" for a TLS or authentication error, else "".
  [[nodiscard]] static std::string hint_suffix(const bson_error_t& error) {
    const auto hint = connection_hint(error.message);
    return hint.empty() ? "" : "; " + hint;
  }

  // Connects on first use, so that an unreachable server is always reported as such, with its URI.
  void connect() {
    if (!clock) refresh_clock();
  }

  // updateOne({selector}, {$set: set}); returns matchedCount.
  std::int64_t update(const LockSelector& which, const bson_t* set, std::string_view what);

  // createIndexes on `target` with one ascending key per field. Returns false with `error` set on failure.
  bool try_create_index(mongoc_collection_t* target, const char* name, std::initializer_list<const char*> fields,
                        bool unique, std::optional<Millis> expire_after, bson_error_t& error) const;
  void create_index(mongoc_collection_t* target, const char* name, std::initializer_list<const char*> fields,
                    bool unique, std::optional<Millis> expire_after) const {
    bson_error_t error;
    if (!try_create_index(target, name, fields, unique, expire_after, error)) {
      fail(fmt::format("createIndexes ({})", name), error);
    }
  }

  // (Re)creates the client, collection handles and monitoring: connectTimeoutMS and
  // serverSelectionTimeoutMS `connect`, socketTimeoutMS `socket` (at least 1ms each).
  void open_client(Millis connect, Millis socket);

  // The queue collection, opened on first use; with `ensure_index`, its unique index on (name, seq) is
  // created first (once per store).
  mongoc_collection_t* queue_collection(bool ensure_index = false);
  bool queue_indexed = false;

  // The runs collection, opened on first use; with `ensure_index`, its index on (name, ended_at) is created
  // first (once per client).
  mongoc_collection_t* runs_collection(bool ensure_index = false);
  // "<collection>_lastrun", opened on first use.
  mongoc_collection_t* last_runs_collection();
  // purge_runs(): deletes the runs of `kind` of `name` beyond its `keep` newest (a find, then a delete).
  std::int64_t purge_beyond(mongoc_collection_t* from, std::string_view name, std::int64_t keep, RunKind kind);
  // Every document of a find with `filter` and `opts` (sort, projection), at most `limit`, in one reply
  // where they fit (batchSize = limit: no getMore). `what` names the read in the Error (69) thrown.
  std::vector<RunRecord> read_runs(mongoc_collection_t* from, const bson_t* filter, bson_t* opts, std::int64_t limit,
                                   const char* what);
  bool runs_indexed = false;

  // Re-reads the server's time when the driver has a newer hello reply than the one the clock came from:
  // the handshake on first use, then the driver's periodic server checks (heartbeatFrequencyMS).
  void refresh_clock();
};

MongoStore::MongoStore(const StoreConfig& config, const Log& log) : m_impl(std::make_unique<Impl>(config, log)) {
  init_driver(log);
  auto& impl = *m_impl;
  impl.namespace_name = fmt::format("{}.{}", config.database, config.collection);
  bson_error_t error;
  impl.uri.reset(mongoc_uri_new_with_error(config.uri.c_str(), &error));
  if (!impl.uri) {
    throw usage_error(fmt::format("invalid --uri '{}': {}; expected mongodb://[user:password@]host[:port][/?options]",
                                  redact_uri(config.uri), scrub_secrets(error.message, config.uri)));
  }
  if (config.server_check_interval) {
    mongoc_uri_set_option_as_int32(impl.uri.get(), MONGOC_URI_HEARTBEATFREQUENCYMS,
                                   to_int32_ms(std::max(*config.server_check_interval, Millis(500))));
  } else if (mongoc_uri_get_option_as_int32(impl.uri.get(), MONGOC_URI_HEARTBEATFREQUENCYMS, 0) == 0) {
    // No periodic server checks: on a kept connection a check would be bounded by the client's connect
    // timeout, not by the call's deadline (its reads are polled on the socket, beneath DeadlineStream).
    // The clock is re-read with an explicit hello instead (refresh_clock).
    mongoc_uri_set_option_as_int32(impl.uri.get(), MONGOC_URI_HEARTBEATFREQUENCYMS, INT32_MAX);
  }
  if (mongoc_uri_get_appname(impl.uri.get()) == nullptr) mongoc_uri_set_appname(impl.uri.get(), "mongolock");
  impl.open_client(config.connect_timeout, config.operation_timeout);

  WriteConcernPtr write_concern(mongoc_write_concern_new());
  mongoc_write_concern_set_wmajority(write_concern.get(),
                                     static_cast<std::int32_t>(to_int32_ms(config.operation_timeout)));
  mongoc_write_concern_set_journal(write_concern.get(), true);
  mongoc_write_concern_append(write_concern.get(), impl.write_opts.get());
}

MongoStore::~MongoStore() = default;

void MongoStore::Impl::open_client(Millis connect, Millis socket) {
  connect_limit = std::max(connect, Millis(1));
  socket_limit = std::max(socket, Millis(1));
  mongoc_uri_set_option_as_int32(uri.get(), MONGOC_URI_CONNECTTIMEOUTMS, to_int32_ms(connect_limit));
  mongoc_uri_set_option_as_int32(uri.get(), MONGOC_URI_SERVERSELECTIONTIMEOUTMS, to_int32_ms(connect_limit));
  mongoc_uri_set_option_as_int32(uri.get(), MONGOC_URI_SOCKETTIMEOUTMS, to_int32_ms(socket_limit));
  fences.reset();
  queue.reset();
  events.reset();
  runs.reset();
  last_runs.reset();
  queue_indexed = false;
  runs_indexed = false;
  collection.reset();
  failed = false;
  if (client) {
    // No endSessions to a server that may not answer: that would block for up to the old timeouts.
    mongoc_client_reset(client.get());
    client.reset();
  }
  bson_error_t error;
  client.reset(mongoc_client_new_from_uri_with_error(uri.get(), &error));
  if (!client && error.domain == MONGOC_ERROR_STREAM) {
    // mongodb+srv: the SRV or TXT lookup failed (MONGOC_ERROR_STREAM_NAME_RESOLUTION): the server cannot be
    // found, as with a host that does not answer (69), not a malformed URI (64).
    failed = true;
    throw unavailable_error(fmt::format("cannot reach MongoDB at {}: {}; check the host name in the URI and DNS",
                                        redact_uri(config.uri), scrub_secrets(error.message, config.uri)));
  }
  if (!client) {
    throw usage_error(
        fmt::format("cannot use --uri '{}': {}", redact_uri(config.uri), scrub_secrets(error.message, config.uri)));
  }
  mongoc_client_set_error_api(client.get(), MONGOC_ERROR_API_VERSION_2);
  streams.client = client.get();
  streams.deadline = &call_deadline;
  mongoc_client_set_stream_initiator(client.get(), deadline_initiator, &streams);
  ++clients_made;
  if (config.count_commands || log.verbosity() == Verbosity::verbose) {
    ApmCallbacksPtr callbacks(mongoc_apm_callbacks_new());
    mongoc_apm_set_command_started_cb(callbacks.get(), on_command_started);
    mongoc_apm_set_command_succeeded_cb(callbacks.get(), on_command_succeeded);
    mongoc_apm_set_command_failed_cb(callbacks.get(), on_command_failed);
    mongoc_client_set_apm_callbacks(client.get(), callbacks.get(), &monitor);
  }
  collection.reset(mongoc_client_get_collection(client.get(), config.database.c_str(), config.collection.c_str()));
}

void MongoStore::reconnect(std::optional<CallLimits> limits) {
  auto& impl = *m_impl;
  if (!limits) {
    impl.call_deadline.until.reset();
    impl.call_deadline.server.reset();
    impl.call_deadline.may_connect = true;
    if (!impl.failed && impl.connect_limit <= impl.config.connect_timeout) return; // keep the connection
    impl.open_client(impl.config.connect_timeout, impl.config.operation_timeout);
    impl.log.debugf("new connection (client {}): connect and handshake within {}", impl.clients_made,
                    format_duration(impl.connect_limit));
    return;
  }
  const auto now = LeaseClock::now();
  const auto connect = std::min(impl.config.connect_timeout, limits->connect);
  const auto total = std::min(limits->total, connect + impl.config.operation_timeout);
  // A new client after a failed call; its connect and handshake get 7/8 of the connect limit, so that the
  // next calls, whose limits differ by the few ms their timers wake late, let it connect again if needed.
  // A kept client whose connect limit is longer (the acquire's) may not connect within the call: a
  // connection lost in the call (a retried write) fails the call instead, and the next one makes a client.
  if (impl.failed) {
    impl.open_client(std::max(connect - connect / 8, Millis(1)), impl.config.operation_timeout);
    impl.log.debugf("new connection (client {}): connect and handshake within {}, the call within {}",
                    impl.clients_made, format_duration(impl.connect_limit), format_duration(total));
  }
  impl.call_deadline.may_connect = impl.connect_limit <= connect;
  impl.call_deadline.until = now + total;
  impl.call_deadline.server = limits->server;
  // Every renewal re-reads the server's time (one hello on the connection, as the handshake of a new
  // connection did before issue 15): a clock estimate made stale by a paused VM is corrected at once.
  impl.clock_due = true;
}

void MongoStore::Impl::refresh_clock() {
  bson_error_t error;
  const auto started = LeaseClock::now();
  ServerDescriptionPtr server(mongoc_client_select_server(client.get(), true, nullptr, &error));
  const auto selected = LeaseClock::now();
  if (!server) {
    failed = true;
    auto hint = connection_hint(error.message);
    if (hint.empty()) hint = "check --uri and that the server is up";
    throw unavailable_error(
        fmt::format("cannot reach MongoDB at {}: {}; {}", redact_uri(config.uri), driver_text(error), hint));
  }
  const bson_t* hello = mongoc_server_description_hello_response(server.get());
  bson_iter_t it;
  std::int64_t local_time = 0;
  if (bson_iter_init_find(&it, hello, "localTime") && BSON_ITER_HOLDS_DATE_TIME(&it)) {
    local_time = bson_iter_date_time(&it);
  }
  // No newer hello than the clock's: keep the clock while it is young, else ask the server (one hello on
  // the connection there is: no server check, see the constructor).
  const bool nothing_newer = clock && local_time == clock_hello_time;
  if (nothing_newer && !clock_due && selected - clock->anchor() < k_clock_max_age) return;
  clock_due = false;
  auto round_trip = Millis(mongoc_server_description_round_trip_time(server.get()));
  if (round_trip < Millis(0)) round_trip = std::chrono::duration_cast<Millis>(selected - started);
  if (local_time == 0 || nothing_newer) {
    // The handshake reply lacks localTime, or the clock is old: ask the server, timing the round trip ourselves.
    Reply reply;
    Bson command;
    BSON_APPEND_INT32(command.get(), "hello", 1);
    const auto sent = LeaseClock::now();
    if (!mongoc_client_command_simple(client.get(), "admin", command.get(), nullptr, reply.get(), &error)) {
      fail_server("hello", error);
    }
    const auto received = LeaseClock::now();
    if (!bson_iter_init_find(&it, reply.get(), "localTime") || !BSON_ITER_HOLDS_DATE_TIME(&it)) {
      throw unavailable_error("the server's hello reply has no localTime; mongolock needs the server's clock");
    }
    clock.emplace(from_bson_date(bson_iter_date_time(&it)), std::chrono::duration_cast<Millis>(received - sent),
                  received);
    clock_hello_time = local_time; // the driver's hello, now older than the clock
  } else {
    // The hello may be older than this call (a server check made inside an earlier operation): anchor it
    // at the time the driver processed it, on the same monotonic clock (CLOCK_MONOTONIC, microseconds),
    // not at "now", or the server's time would be read as earlier than it is.
    auto received = selected;
    const auto updated = LeaseClock::from_monotonic_us(mongoc_server_description_last_update_time(server.get()));
    if (updated <= selected && updated > selected - std::chrono::hours(1)) received = updated;
    clock.emplace(from_bson_date(local_time), round_trip, received);
    clock_hello_time = local_time;
  }
  log.debugf("server {} selected; server clock {} ({} from this host's clock, round trip {}, hello {} old)",
             mongoc_server_description_host(server.get())->host_and_port, format_time(clock->now()),
             format_duration(clock->offset_from_local_wall_clock()), format_duration(clock->round_trip()),
             format_duration(std::chrono::duration_cast<Millis>(selected - clock->anchor())));
}

const ServerClock& MongoStore::clock() {
  m_impl->refresh_clock(); // no round trip unless the driver's server check is due
  return *m_impl->clock;
}

bool MongoStore::Impl::try_create_index(mongoc_collection_t* target, const char* name,
                                        std::initializer_list<const char*> fields, bool unique,
                                        std::optional<Millis> expire_after, bson_error_t& error) const {
  Bson command;
  BSON_APPEND_UTF8(command.get(), "createIndexes", mongoc_collection_get_name(target));
  bson_t indexes, index, key;
  BSON_APPEND_ARRAY_BEGIN(command.get(), "indexes", &indexes);
  BSON_APPEND_DOCUMENT_BEGIN(&indexes, "0", &index);
  BSON_APPEND_DOCUMENT_BEGIN(&index, "key", &key);
  for (const char* field : fields)
    BSON_APPEND_INT32(&key, field, 1);
  bson_append_document_end(&index, &key);
  BSON_APPEND_UTF8(&index, "name", name);
  if (unique) BSON_APPEND_BOOL(&index, "unique", true);
  if (expire_after) {
    BSON_APPEND_INT64(&index, "expireAfterSeconds",
                      std::chrono::duration_cast<std::chrono::seconds>(*expire_after).count());
  }
  bson_append_document_end(&indexes, &index);
  bson_append_array_end(command.get(), &indexes);
  Reply reply;
  return mongoc_collection_write_command_with_opts(target, command.get(), write_opts.get(), reply.get(), &error);
}

void MongoStore::ensure_indexes() {
  m_impl->connect();
  m_impl->create_index(m_impl->collection.get(), "program_1", {"program"}, true, std::nullopt);
}

std::string MongoStore::create_ttl_index(Millis expire_after) {
  m_impl->connect();
  bson_error_t error;
  if (m_impl->try_create_index(m_impl->collection.get(), "expires_at_ttl", {"expires_at"}, false, expire_after,
                               error)) {
    return {};
  }
  return scrub_secrets(fmt::format("{} (error {})", error.message, error.code), m_impl->config.uri);
}

bool MongoStore::has_unique_index() {
  auto& impl = *m_impl;
  impl.connect();
  CursorPtr cursor(mongoc_collection_find_indexes_with_opts(impl.collection.get(), nullptr));
  const bson_t* doc = nullptr;
  bool found = false;
  while (mongoc_cursor_next(cursor.get(), &doc)) {
    bson_iter_t it;
    const bool named = bson_iter_init_find(&it, doc, "name") && iter_string(it) == "program_1";
    const bool unique = bson_iter_init_find(&it, doc, "unique") && bson_iter_as_bool(&it);
    found = found || (named && unique);
  }
  bson_error_t error;
  if (mongoc_cursor_error(cursor.get(), &error) && error.code != 26) { // 26: NamespaceNotFound, no collection yet
    impl.fail("listIndexes", error);
  }
  return found;
}

namespace {

// The authentication mechanism of `uri` on the server whose hello response is `hello`: the URI's
// authMechanism, else libmongoc's choice (_mongoc_cluster_auth_node): SCRAM-SHA-256 when the handshake's
// saslSupportedMechs lists it, else SCRAM-SHA-1. "" without credentials.
std::string auth_mechanism(const mongoc_uri_t* uri, const bson_t* hello) {
  if (mongoc_uri_get_username(uri) == nullptr) return {};
  if (const char* mechanism = mongoc_uri_get_auth_mechanism(uri); mechanism != nullptr) return mechanism;
  std::string chosen = "SCRAM-SHA-1";
  bson_iter_t it;
  bson_iter_t mechs;
  if (bson_iter_init_find(&it, hello, "saslSupportedMechs") && BSON_ITER_HOLDS_ARRAY(&it) &&
      bson_iter_recurse(&it, &mechs)) {
    while (bson_iter_next(&mechs)) {
      if (BSON_ITER_HOLDS_UTF8(&mechs) && iter_string(mechs) == "SCRAM-SHA-256") chosen = "SCRAM-SHA-256";
    }
  }
  return chosen;
}

// "name@db" of connectionStatus's authInfo.authenticatedUsers[0] in `reply`; "" when there is none.
std::string authenticated_user(const bson_t* reply) {
  bson_iter_t it;
  bson_iter_t users;
  bson_iter_t first;
  bson_iter_t field;
  if (!bson_iter_init_find(&it, reply, "authInfo") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
      !bson_iter_recurse(&it, &users) || !bson_iter_find(&users, "authenticatedUsers") ||
      !BSON_ITER_HOLDS_ARRAY(&users) || !bson_iter_recurse(&users, &first) || !bson_iter_next(&first) ||
      !BSON_ITER_HOLDS_DOCUMENT(&first) || !bson_iter_recurse(&first, &field)) {
    return {};
  }
  std::string name;
  std::string db;
  while (bson_iter_next(&field)) {
    const std::string_view key = bson_iter_key(&field);
    if (key == "user") name = iter_string(field);
    if (key == "db") db = iter_string(field);
  }
  if (name.empty()) return {};
  return db.empty() ? name : name + "@" + db;
}

} // namespace

ServerInfo MongoStore::server_info() {
  auto& impl = *m_impl;
  impl.connect();
  ServerInfo info;
  bson_error_t error;
  ServerDescriptionPtr server(mongoc_client_select_server(impl.client.get(), true, nullptr, &error));
  if (!server) impl.fail("server selection", error);
  info.address = mongoc_server_description_host(server.get())->host_and_port;
  const bson_t* hello = mongoc_server_description_hello_response(server.get());
  bson_iter_t it;
  if (bson_iter_init_find(&it, hello, "maxWireVersion"))
    info.max_wire_version = static_cast<int>(bson_iter_as_int64(&it));
  Bson command;
  BSON_APPEND_INT32(command.get(), "buildInfo", 1);
  Reply reply;
  if (!mongoc_client_command_simple(impl.client.get(), "admin", command.get(), nullptr, reply.get(), &error)) {
    impl.fail_server("buildInfo", error);
  }
  if (bson_iter_init_find(&it, reply.get(), "version")) info.version = iter_string(it);

  const mongoc_uri_t* uri = impl.uri.get();
  info.tls = mongoc_uri_get_tls(uri);
  info.tls_ca_file = mongoc_uri_get_option_as_utf8(uri, MONGOC_URI_TLSCAFILE, "");
  info.tls_certificate = mongoc_uri_get_option_as_utf8(uri, MONGOC_URI_TLSCERTIFICATEKEYFILE, "");
  info.mechanism = auth_mechanism(uri, hello);
  // Who the server says we are.
  Bson status;
  BSON_APPEND_INT32(status.get(), "connectionStatus", 1);
  Reply status_reply;
  if (mongoc_client_command_simple(impl.client.get(), "admin", status.get(), nullptr, status_reply.get(), &error)) {
    info.user = authenticated_user(status_reply.get());
  }
  return info;
}

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
  impl.fail(fmt::format("insert of lock '{}'", lock.program), error);
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
    impl.fail(fmt::format("delete of lock '{}'", which.program), error);
  }
  return reply.integer("deletedCount");
}

std::int64_t MongoStore::Impl::update(const LockSelector& which, const bson_t* set, std::string_view what) {
  Bson selector;
  append_selector(selector.get(), which);
  Bson update;
  BSON_APPEND_DOCUMENT(update.get(), "$set", set);
  Reply reply;
  bson_error_t error;
  if (!mongoc_collection_update_one(collection.get(), selector.get(), update.get(), write_opts.get(), reply.get(),
                                    &error)) {
    fail(fmt::format("{} of lock '{}'", what, which.program), error);
  }
  return reply.integer("matchedCount");
}

std::int64_t MongoStore::renew(const LockSelector& which, ServerTime expires_at, ServerTime renewed_at, Millis ttl,
                               bool mark_waiters) {
  m_impl->connect();
  Bson set;
  BSON_APPEND_DATE_TIME(set.get(), "expires_at", to_bson_date(expires_at));
  BSON_APPEND_DATE_TIME(set.get(), "renewed_at", to_bson_date(renewed_at));
  BSON_APPEND_INT64(set.get(), "ttl_ms", ttl.count());
  if (mark_waiters) BSON_APPEND_BOOL(set.get(), "waiters", true);
  auto& impl = *m_impl;
  // findAndModify rather than update: both MongoDB and FerretDB v1 honour its maxTimeMS (FerretDB ignores it
  // on update), so a renewal the server could not finish in time is aborted rather than written late.
  Bson selector;
  append_selector(selector.get(), which);
  Bson command;
  BSON_APPEND_UTF8(command.get(), "findAndModify", mongoc_collection_get_name(impl.collection.get()));
  BSON_APPEND_DOCUMENT(command.get(), "query", selector.get());
  bson_t update;
  BSON_APPEND_DOCUMENT_BEGIN(command.get(), "update", &update);
  BSON_APPEND_DOCUMENT(&update, "$set", set.get());
  bson_append_document_end(command.get(), &update);
  if (impl.call_deadline.server) {
    BSON_APPEND_INT64(command.get(), "maxTimeMS", std::max<std::int64_t>(impl.call_deadline.server->count(), 1));
  }
  Reply reply;
  bson_error_t error;
  if (!mongoc_collection_write_command_with_opts(impl.collection.get(), command.get(), impl.write_opts.get(),
                                                 reply.get(), &error)) {
    impl.fail(fmt::format("renewal of lock '{}'", which.program), error);
  }
  bson_iter_t it;
  return bson_iter_init_find(&it, reply.get(), "value") && BSON_ITER_HOLDS_DOCUMENT(&it) ? 1 : 0;
}

std::int64_t MongoStore::mark_released(const LockSelector& which, ServerTime released_at, ServerTime expires_at) {
  m_impl->connect();
  Bson set;
  BSON_APPEND_DATE_TIME(set.get(), "released_at", to_bson_date(released_at));
  BSON_APPEND_DATE_TIME(set.get(), "expires_at", to_bson_date(expires_at));
  return m_impl->update(which, set.get(), "release");
}

std::int64_t MongoStore::set_fence(const LockSelector& which, std::int64_t fence) {
  m_impl->connect();
  Bson set;
  BSON_APPEND_INT64(set.get(), "fence", fence);
  return m_impl->update(which, set.get(), "fencing token update");
}

std::int64_t MongoStore::next_fence(std::string_view name) {
  auto& impl = *m_impl;
  impl.connect();
  if (!impl.fences) {
    const auto fences_name = impl.config.collection + "_fences";
    impl.fences.reset(
        mongoc_client_get_collection(impl.client.get(), impl.config.database.c_str(), fences_name.c_str()));
    impl.create_index(impl.fences.get(), "name_1_fence_1", {"name", "fence"}, true, std::nullopt);
  }
  // Highest token so far, plus one; a concurrent allocation of the same value loses on the unique index
  // and tries the next one.
  for (int attempt = 0; attempt < 100; ++attempt) {
    Bson filter;
    append_string(filter.get(), "name", name);
    Bson opts;
    bson_t sort;
    BSON_APPEND_DOCUMENT_BEGIN(opts.get(), "sort", &sort);
    BSON_APPEND_INT32(&sort, "fence", -1);
    bson_append_document_end(opts.get(), &sort);
    BSON_APPEND_INT64(opts.get(), "limit", 1);
    CursorPtr cursor(mongoc_collection_find_with_opts(impl.fences.get(), filter.get(), opts.get(), nullptr));
    const bson_t* doc = nullptr;
    std::int64_t highest = 0;
    bson_iter_t it;
    if (mongoc_cursor_next(cursor.get(), &doc) && bson_iter_init_find(&it, doc, "fence") &&
        BSON_ITER_HOLDS_NUMBER(&it)) {
      highest = bson_iter_as_int64(&it);
    }
    bson_error_t error;
    if (mongoc_cursor_error(cursor.get(), &error))
      impl.fail(fmt::format("read of fencing tokens of '{}'", name), error);

    Bson entry;
    append_string(entry.get(), "name", name);
    BSON_APPEND_INT64(entry.get(), "fence", highest + 1);
    BSON_APPEND_DATE_TIME(entry.get(), "allocated_at", to_bson_date(clock().now()));
    Reply reply;
    if (mongoc_collection_insert_one(impl.fences.get(), entry.get(), impl.write_opts.get(), reply.get(), &error)) {
      return highest + 1;
    }
    if (error.code != MONGOC_ERROR_DUPLICATE_KEY)
      impl.fail(fmt::format("allocation of a fencing token for '{}'", name), error);
  }
  throw unavailable_error(
      fmt::format("could not allocate a fencing token for '{}': 100 concurrent allocations won", name));
}

std::optional<LockRecord> MongoStore::find(std::string_view program) {
  auto& impl = *m_impl;
  impl.connect();
  Bson filter;
  append_string(filter.get(), "program", program);
  Bson opts;
  BSON_APPEND_INT64(opts.get(), "limit", 1);
  CursorPtr cursor(mongoc_collection_find_with_opts(impl.collection.get(), filter.get(), opts.get(), nullptr));
  const bson_t* doc = nullptr;
  std::optional<LockRecord> found;
  if (mongoc_cursor_next(cursor.get(), &doc)) found = from_bson(doc);
  bson_error_t error;
  if (mongoc_cursor_error(cursor.get(), &error)) impl.fail(fmt::format("find of lock '{}'", program), error);
  return found;
}

std::vector<LockRecord> MongoStore::list(std::optional<std::string_view> name) {
  auto& impl = *m_impl;
  impl.connect();
  Bson filter;
  if (name) append_string(filter.get(), "name", *name);
  Bson opts;
  bson_t sort;
  BSON_APPEND_DOCUMENT_BEGIN(opts.get(), "sort", &sort);
  BSON_APPEND_INT32(&sort, "program", 1);
  bson_append_document_end(opts.get(), &sort);
  // Every lock in the first reply (up to 16 MiB of them): `list` is one find however many are held.
  BSON_APPEND_INT64(opts.get(), "batchSize", k_one_reply);
  CursorPtr cursor(mongoc_collection_find_with_opts(impl.collection.get(), filter.get(), opts.get(), nullptr));
  std::vector<LockRecord> locks;
  const bson_t* doc = nullptr;
  while (mongoc_cursor_next(cursor.get(), &doc))
    locks.push_back(from_bson(doc));
  bson_error_t error;
  if (mongoc_cursor_error(cursor.get(), &error)) impl.fail("listing of locks", error);
  return locks;
}

std::string driver_version() { return mongoc_get_version(); }

// --- the queue of waiters ---------------------------------------------------------------------------

namespace {

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
      ticket.seq = bson_iter_as_int64(&it);
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

std::string new_object_id() {
  bson_oid_t oid;
  bson_oid_init(&oid, nullptr);
  char hex[25];
  bson_oid_to_string(&oid, hex);
  return hex;
}

} // namespace

mongoc_collection_t* MongoStore::Impl::queue_collection(bool ensure_index) {
  if (!queue) {
    const auto queue_name = config.collection + "_queue";
    queue.reset(mongoc_client_get_collection(client.get(), config.database.c_str(), queue_name.c_str()));
  }
  if (ensure_index && !queue_indexed) {
    create_index(queue.get(), "name_1_seq_1", {"name", "seq"}, true, std::nullopt);
    queue_indexed = true;
  }
  return queue.get();
}

std::int64_t MongoStore::highest_ticket() {
  auto& impl = *m_impl;
  impl.connect();
  auto* queue = impl.queue_collection(/*ensure_index=*/true);
  Bson filter;
  Bson opts;
  bson_t sort;
  BSON_APPEND_DOCUMENT_BEGIN(opts.get(), "sort", &sort);
  BSON_APPEND_INT32(&sort, "seq", -1);
  bson_append_document_end(opts.get(), &sort);
  BSON_APPEND_INT64(opts.get(), "limit", 1);
  CursorPtr cursor(mongoc_collection_find_with_opts(queue, filter.get(), opts.get(), nullptr));
  const bson_t* doc = nullptr;
  std::int64_t highest = 0;
  if (mongoc_cursor_next(cursor.get(), &doc)) highest = ticket_from_bson(doc).seq;
  bson_error_t error;
  if (mongoc_cursor_error(cursor.get(), &error)) impl.fail("read of the queue of waiters", error);
  return highest;
}

bool MongoStore::insert_ticket(TicketRecord& ticket) {
  auto& impl = *m_impl;
  impl.connect();
  auto* queue = impl.queue_collection();
  ticket.id = new_object_id();
  Bson doc;
  to_bson(ticket, doc.get());
  Reply reply;
  bson_error_t error;
  if (mongoc_collection_insert_one(queue, doc.get(), impl.write_opts.get(), reply.get(), &error)) return true;
  if (error.code == MONGOC_ERROR_DUPLICATE_KEY) return false;
  impl.fail(fmt::format("insert of a queue ticket for '{}'", ticket.name), error);
}

std::int64_t MongoStore::renew_ticket(std::string_view id, ServerTime now, ServerTime expires_at) {
  auto& impl = *m_impl;
  impl.connect();
  Bson selector;
  append_id(selector.get(), id);
  append_date_condition(selector.get(), "expires_at", "$gt", now);
  Bson update;
  bson_t set;
  BSON_APPEND_DOCUMENT_BEGIN(update.get(), "$set", &set);
  BSON_APPEND_DATE_TIME(&set, "expires_at", to_bson_date(expires_at));
  bson_append_document_end(update.get(), &set);
  Reply reply;
  bson_error_t error;
  if (!mongoc_collection_update_one(impl.queue_collection(), selector.get(), update.get(), impl.write_opts.get(),
                                    reply.get(), &error)) {
    impl.fail("renewal of a queue ticket", error);
  }
  return reply.integer("matchedCount");
}

std::int64_t MongoStore::remove_ticket(std::string_view id, std::optional<ServerTime> expired_at_or_before) {
  auto& impl = *m_impl;
  impl.connect();
  Bson selector;
  append_id(selector.get(), id);
  if (expired_at_or_before) append_date_condition(selector.get(), "expires_at", "$lte", *expired_at_or_before);
  Reply reply;
  bson_error_t error;
  if (!mongoc_collection_delete_one(impl.queue_collection(), selector.get(), impl.write_opts.get(), reply.get(),
                                    &error)) {
    impl.fail("delete of a queue ticket", error);
  }
  return reply.integer("deletedCount");
}

std::vector<TicketRecord> MongoStore::tickets(const std::vector<std::string>& names) {
  auto& impl = *m_impl;
  impl.connect();
  Bson filter;
  if (!names.empty()) {
    bson_t condition, in;
    BSON_APPEND_DOCUMENT_BEGIN(filter.get(), "name", &condition);
    BSON_APPEND_ARRAY_BEGIN(&condition, "$in", &in);
    for (std::size_t i = 0; i < names.size(); ++i) {
      const auto key = std::to_string(i);
      bson_append_utf8(&in, key.c_str(), -1, names[i].data(), static_cast<int>(names[i].size()));
    }
    bson_append_array_end(&condition, &in);
    bson_append_document_end(filter.get(), &condition);
  }
  Bson opts;
  bson_t sort;
  BSON_APPEND_DOCUMENT_BEGIN(opts.get(), "sort", &sort);
  BSON_APPEND_INT32(&sort, "seq", 1);
  BSON_APPEND_INT32(&sort, "name", 1);
  bson_append_document_end(opts.get(), &sort);
  BSON_APPEND_INT64(opts.get(), "batchSize", k_one_reply); // every ticket in the first reply
  CursorPtr cursor(mongoc_collection_find_with_opts(impl.queue_collection(), filter.get(), opts.get(), nullptr));
  std::vector<TicketRecord> out;
  const bson_t* doc = nullptr;
  while (mongoc_cursor_next(cursor.get(), &doc))
    out.push_back(ticket_from_bson(doc));
  bson_error_t error;
  if (mongoc_cursor_error(cursor.get(), &error)) impl.fail("read of the queue of waiters", error);
  return out;
}

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
  if (run.skips > 0) {
    BSON_APPEND_INT64(doc, "skips", run.skips);
    BSON_APPEND_INT64(doc, "skip_hosts", run.skip_hosts);
    append_string_array(doc, "skipped_on", run.skipped_on);
  }
}

// The fields that fold skipped attempts into runs (lock, held_lock, skips, skip_hosts, skipped_on), when
// `key` is one of them.
void read_fold_field(std::string_view key, const bson_iter_t& it, RunRecord& run) {
  if (key == "skipped_on") {
    run.skipped_on = iter_strings(it);
  } else if (key == "lock") {
    run.lock = iter_string(it);
  } else if (key == "held_lock") {
    run.held_lock = iter_string(it);
  } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "skips") {
    run.skips = std::max<std::int64_t>(bson_iter_as_int64(&it), 0);
  } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "skip_hosts") {
    run.skip_hosts = std::max<std::int64_t>(bson_iter_as_int64(&it), 0);
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
    } else if (key == "user") {
      run.user = iter_string(it);
    } else if (key == "command") {
      run.command = iter_strings(it);
    } else if (BSON_ITER_HOLDS_DATE_TIME(&it) && key == "started_at") {
      run.started_at = from_bson_date(bson_iter_date_time(&it));
    } else if (BSON_ITER_HOLDS_DATE_TIME(&it) && key == "ended_at") {
      run.ended_at = from_bson_date(bson_iter_date_time(&it));
    } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "duration_ms") {
      run.duration = Millis(bson_iter_as_int64(&it));
    } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "waited_ms") {
      run.waited = Millis(bson_iter_as_int64(&it));
    } else if (key == "outcome") {
      run.outcome = iter_string(it);
    } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "exit_code") {
      run.exit_code = static_cast<int>(std::clamp<std::int64_t>(bson_iter_as_int64(&it), -1, 255));
    } else if (key == "signal") {
      run.signal = iter_string(it);
    } else if (key == "held_by") {
      run.held_by = iter_string(it);
    } else if (BSON_ITER_HOLDS_NUMBER(&it) && key == "fence") {
      run.fence = bson_iter_as_int64(&it);
    } else {
      read_fold_field(key, it, run);
    }
  }
  return run;
}

// {sort: {ended_at: -1, _id: -1}}: newest first, ties in a fixed order.
void append_newest_first(bson_t* opts) {
  bson_t sort;
  BSON_APPEND_DOCUMENT_BEGIN(opts, "sort", &sort);
  BSON_APPEND_INT32(&sort, "ended_at", -1);
  BSON_APPEND_INT32(&sort, "_id", -1);
  bson_append_document_end(opts, &sort);
}

} // namespace

mongoc_collection_t* MongoStore::Impl::runs_collection(bool ensure_index) {
  if (!runs) {
    const auto runs_name = config.collection + "_runs";
    runs.reset(mongoc_client_get_collection(client.get(), config.database.c_str(), runs_name.c_str()));
  }
  if (ensure_index && !runs_indexed) {
    create_index(runs.get(), "name_1_ended_at_1", {"name", "ended_at"}, false, std::nullopt);
    runs_indexed = true;
  }
  return runs.get();
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
  Reply reply;
  bson_error_t error;
  if (!mongoc_collection_write_command_with_opts(runs, command.get(), impl.write_opts.get(), reply.get(), &error)) {
    impl.fail(fmt::format("insert of the run history of '{}'", records.front().name), error);
  }
  // A write error (e.g. a document the server refuses) is in the reply, not in `error`.
  bson_iter_t it;
  if (bson_iter_init_find(&it, reply.get(), "writeErrors") && BSON_ITER_HOLDS_ARRAY(&it)) {
    bson_iter_t message;
    std::string text = "the server refused the document";
    if (bson_iter_init(&it, reply.get()) && bson_iter_find_descendant(&it, "writeErrors.0.errmsg", &message)) {
      text = iter_string(message);
    }
    bson_set_error(&error, MONGOC_ERROR_SERVER, MONGOC_ERROR_COLLECTION_INSERT_FAILED, "%s", text.c_str());
    impl.fail(fmt::format("insert of the run history of '{}'", records.front().name), error);
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
  CursorPtr cursor(mongoc_collection_find_with_opts(from, filter, opts, nullptr));
  std::vector<RunRecord> out;
  const bson_t* doc = nullptr;
  while (mongoc_cursor_next(cursor.get(), &doc))
    out.push_back(run_from_bson(doc));
  bson_error_t error;
  if (mongoc_cursor_error(cursor.get(), &error)) fail(what, error);
  return out;
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

std::vector<RunRecord> MongoStore::skips_of(const std::vector<std::string>& locks, std::int64_t limit) {
  if (locks.empty()) return {};
  auto& impl = *m_impl;
  impl.connect();
  Bson filter;
  append_in(filter.get(), "held_lock", locks);
  Bson opts;
  bson_t projection;
  BSON_APPEND_DOCUMENT_BEGIN(opts.get(), "projection", &projection);
  for (const char* field : {"name", "host", "held_lock", "ended_at", "outcome"})
    BSON_APPEND_INT32(&projection, field, 1);
  bson_append_document_end(opts.get(), &projection);
  return impl.read_runs(impl.runs_collection(), filter.get(), opts.get(), limit, "read of the skipped attempts");
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

void MongoStore::update_skips(const std::vector<RunRecord>& runs, const std::vector<std::int64_t>& was) {
  auto& impl = *m_impl;
  impl.connect();
  if (runs.empty()) return;
  auto* collection = impl.runs_collection();
  // {update: "<collection>_runs", updates: [{q: {_id, skips: WAS} (or {$exists: false} for 0), u: {$set:
  // {skips, skip_hosts, skipped_on}}}, ...]}
  Bson command;
  BSON_APPEND_UTF8(command.get(), "update", mongoc_collection_get_name(collection));
  bson_t updates;
  BSON_APPEND_ARRAY_BEGIN(command.get(), "updates", &updates);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    bson_t update, query, change, fields, absent;
    bson_append_document_begin(&updates, std::to_string(i).c_str(), -1, &update);
    BSON_APPEND_DOCUMENT_BEGIN(&update, "q", &query);
    append_id(&query, runs[i].id);
    const auto old = i < was.size() ? was[i] : 0;
    if (old > 0) {
      BSON_APPEND_INT64(&query, "skips", old);
    } else {
      BSON_APPEND_DOCUMENT_BEGIN(&query, "skips", &absent);
      BSON_APPEND_BOOL(&absent, "$exists", false);
      bson_append_document_end(&query, &absent);
    }
    bson_append_document_end(&update, &query);
    BSON_APPEND_DOCUMENT_BEGIN(&update, "u", &change);
    BSON_APPEND_DOCUMENT_BEGIN(&change, "$set", &fields);
    BSON_APPEND_INT64(&fields, "skips", runs[i].skips);
    BSON_APPEND_INT64(&fields, "skip_hosts", runs[i].skip_hosts);
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
    impl.fail("update of the skip counts", error);
  }
}

mongoc_collection_t* MongoStore::Impl::last_runs_collection() {
  if (!last_runs) {
    const auto last_name = config.collection + "_lastrun";
    last_runs.reset(mongoc_client_get_collection(client.get(), config.database.c_str(), last_name.c_str()));
  }
  return last_runs.get();
}

void MongoStore::record_last_runs(const std::vector<RunRecord>& runs) {
  auto& impl = *m_impl;
  impl.connect();
  if (runs.empty()) return;
  auto* last = impl.last_runs_collection();
  // {update: "<collection>_lastrun", updates: [{q: {_id: NAME, ended_at: {$lt: T}}, u: {run as stored, _id
  // NAME, run_id}, upsert: true}, ...]}: a newer run's document does not match, so the upsert tries an insert
  // and fails on the duplicate _id: the newer one stays.
  Bson command;
  BSON_APPEND_UTF8(command.get(), "update", mongoc_collection_get_name(last));
  bson_t updates;
  BSON_APPEND_ARRAY_BEGIN(command.get(), "updates", &updates);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    bson_t update, query, replacement;
    bson_append_document_begin(&updates, std::to_string(i).c_str(), -1, &update);
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
    impl.fail("update of the last run", error);
  }
}

std::vector<RunRecord> MongoStore::last_runs(const std::vector<std::string>& names) {
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

std::int64_t MongoStore::purge_runs(std::string_view name, std::int64_t keep, ServerTime ended_before) {
  auto& impl = *m_impl;
  impl.connect();
  auto* runs = impl.runs_collection(/*ensure_index=*/true);
  std::int64_t deleted = 0;
  bson_error_t error;
  {
    Bson selector;
    append_date_condition(selector.get(), "ended_at", "$lt", ended_before);
    Reply reply;
    if (!mongoc_collection_delete_many(runs, selector.get(), impl.write_opts.get(), reply.get(), &error)) {
      impl.fail("purge of old runs", error);
    }
    deleted += reply.integer("deletedCount");
    // A last run that old goes too (list shows "-" for the name, as for one never run).
    Reply last_reply;
    if (!mongoc_collection_delete_many(impl.last_runs_collection(), selector.get(), impl.write_opts.get(),
                                       last_reply.get(), &error)) {
      impl.fail("purge of old last runs", error);
    }
  }
  // Executed runs and attempts are bounded apart: a fleet's skips never push an executed run out.
  for (const auto kind : {RunKind::executed, RunKind::attempts})
    deleted += impl.purge_beyond(runs, name, keep, kind);
  return deleted;
}

std::int64_t MongoStore::Impl::purge_beyond(mongoc_collection_t* from, std::string_view name, std::int64_t keep,
                                            RunKind kind) {
  // The newest run of `kind` beyond the `keep` newest of `name`: it and everything older of that kind goes.
  bson_error_t error;
  Bson filter;
  append_string(filter.get(), "name", name);
  append_kind(filter.get(), kind);
  Bson opts;
  append_newest_first(opts.get());
  BSON_APPEND_INT64(opts.get(), "skip", std::max<std::int64_t>(keep, 1));
  BSON_APPEND_INT64(opts.get(), "limit", 1);
  CursorPtr cursor(mongoc_collection_find_with_opts(from, filter.get(), opts.get(), nullptr));
  const bson_t* doc = nullptr;
  std::optional<RunRecord> first_out;
  if (mongoc_cursor_next(cursor.get(), &doc)) first_out = run_from_bson(doc);
  if (mongoc_cursor_error(cursor.get(), &error)) fail(fmt::format("read of the runs of '{}'", name), error);
  if (!first_out) return 0;
  // {name, outcome of kind, $or: [{ended_at: {$lt: T}}, {ended_at: T, _id: {$lte: ID}}]}: the sort's order.
  Bson selector;
  append_string(selector.get(), "name", name);
  append_kind(selector.get(), kind);
  bson_t any, older, tie;
  BSON_APPEND_ARRAY_BEGIN(selector.get(), "$or", &any);
  BSON_APPEND_DOCUMENT_BEGIN(&any, "0", &older);
  append_date_condition(&older, "ended_at", "$lt", first_out->ended_at);
  bson_append_document_end(&any, &older);
  BSON_APPEND_DOCUMENT_BEGIN(&any, "1", &tie);
  BSON_APPEND_DATE_TIME(&tie, "ended_at", to_bson_date(first_out->ended_at));
  bson_t id_range;
  BSON_APPEND_DOCUMENT_BEGIN(&tie, "_id", &id_range);
  bson_oid_t oid;
  if (parse_oid(first_out->id, oid)) {
    BSON_APPEND_OID(&id_range, "$lte", &oid);
  } else {
    append_string(&id_range, "$lte", first_out->id);
  }
  bson_append_document_end(&tie, &id_range);
  bson_append_document_end(&any, &tie);
  bson_append_array_end(selector.get(), &any);
  Reply reply;
  if (!mongoc_collection_delete_many(from, selector.get(), write_opts.get(), reply.get(), &error)) {
    fail(fmt::format("purge of the runs of '{}'", name), error);
  }
  return reply.integer("deletedCount");
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

// --- push wake-ups ----------------------------------------------------------------------------------

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
    impl.fail(fmt::format("delete of lock '{}'", which.program), error);
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

namespace {

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
  MongoEventFeed(mongoc_cursor_t* cursor, std::function<void(const char*)> fail)
      : m_cursor(cursor), m_fail(std::move(fail)) {}

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
    if (mongoc_cursor_error(m_cursor.get(), &error)) m_fail(error.message);
    if (!mongoc_cursor_more(m_cursor.get())) m_fail("the server closed the tailable cursor");
    return std::nullopt;
  }

private:
  CursorPtr m_cursor;
  std::function<void(const char*)> m_fail;
};

} // namespace

void MongoStore::append_event(std::string_view name, std::string_view ticket) {
  auto& impl = *m_impl;
  impl.connect();
  auto* events = open_events(impl.client.get(), impl.config, impl.events);
  bson_error_t error;
  if (!insert_events(events, {name}, ticket, to_bson_date(clock().now()), impl.write_opts.get(), error)) {
    impl.fail(fmt::format("append of a wake-up event for '{}'", name), error);
  }
}

std::unique_ptr<EventFeed> MongoStore::follow_events(Millis await) {
  auto& impl = *m_impl;
  impl.connect();
  auto* events = open_events(impl.client.get(), impl.config, impl.events);
  bson_error_t error;
  {
    Bson opts;
    BSON_APPEND_BOOL(opts.get(), "capped", true);
    BSON_APPEND_INT64(opts.get(), "size", 1 << 20);
    // Few events: FerretDB v1 reads the whole collection for every check of every waiting cursor (every
    // 10 ms; measured: an event reaches a waiter in 21 ms with 2 events stored, 31 ms with 100, 150 ms
    // with 1000). It trims capped collections to `max` once a minute; MongoDB on every insert.
    BSON_APPEND_INT64(opts.get(), "max", 100);
    const auto database_name = impl.config.database + "_events";
    std::unique_ptr<mongoc_database_t, Deleter<mongoc_database_destroy>> database(
        mongoc_client_get_database(impl.client.get(), database_name.c_str()));
    mongoc_collection_t* created =
        mongoc_database_create_collection(database.get(), mongoc_collection_get_name(events), opts.get(), &error);
    if (created != nullptr) {
      mongoc_collection_destroy(created);
    } else if (error.code != 48) { // 48: NamespaceExists
      impl.fail("creation of the capped collection of wake-up events", error);
    }
  }
  // Tail from the two newest events when there are two (no insert: every stored event makes FerretDB's
  // waiting cursors slower); else from two marker events inserted now. The older of the two is the
  // cursor's first batch; the newer one, or a marker, is the first event read (a spurious wake-up).
  std::optional<std::int64_t> newest;
  {
    Bson all;
    Bson newest_opts;
    bson_t sort;
    BSON_APPEND_DOCUMENT_BEGIN(newest_opts.get(), "sort", &sort);
    BSON_APPEND_INT32(&sort, "$natural", -1);
    bson_append_document_end(newest_opts.get(), &sort);
    BSON_APPEND_INT64(newest_opts.get(), "limit", 2);
    CursorPtr cursor(mongoc_collection_find_with_opts(events, all.get(), newest_opts.get(), nullptr));
    const bson_t* doc = nullptr;
    int count = 0;
    std::int64_t oldest = INT64_MAX;
    while (mongoc_cursor_next(cursor.get(), &doc)) {
      bson_iter_t it;
      if (!bson_iter_init_find(&it, doc, "t") || !BSON_ITER_HOLDS_NUMBER(&it)) continue;
      oldest = std::min(oldest, bson_iter_as_int64(&it));
      ++count;
    }
    if (mongoc_cursor_error(cursor.get(), &error)) impl.fail("read of the newest wake-up events", error);
    if (count == 2) newest = oldest;
  }
  const auto from = newest ? *newest : to_bson_date(clock().now());
  if (!newest && !insert_events(events, {"", ""}, {}, from, impl.write_opts.get(), error)) {
    impl.fail("insert of wake-up event markers", error);
  }
  Bson filter;
  bson_t range;
  BSON_APPEND_DOCUMENT_BEGIN(filter.get(), "t", &range);
  BSON_APPEND_INT64(&range, "$gte", from);
  bson_append_document_end(filter.get(), &range);
  Bson opts;
  BSON_APPEND_BOOL(opts.get(), "tailable", true);
  BSON_APPEND_BOOL(opts.get(), "awaitData", true);
  BSON_APPEND_INT64(opts.get(), "batchSize", 1);
  BSON_APPEND_INT64(opts.get(), "maxAwaitTimeMS", std::clamp<Millis::rep>(await.count(), 1, 60'000));
  auto fail = [&impl](const char* message) {
    throw unavailable_error(fmt::format("following the wake-up events of {} failed: {}", impl.namespace_name,
                                        scrub_secrets(message, impl.config.uri)));
  };
  mongoc_cursor_t* cursor = mongoc_collection_find_with_opts(events, filter.get(), opts.get(), nullptr);
  auto feed = std::make_unique<MongoEventFeed>(cursor, fail);
  // The first batch (a marker; no getMore, no waiting): checks that the cursor stays open.
  const bson_t* first = nullptr;
  if (!mongoc_cursor_next(cursor, &first)) {
    if (mongoc_cursor_error(cursor, &error)) fail(error.message);
    fail("the tailable cursor returned no marker");
  }
  if (!mongoc_cursor_more(cursor)) fail("the server closed the tailable cursor");
  // Later getMores take whatever has come (FerretDB needs the small batch only for the first one).
  mongoc_cursor_set_batch_size(cursor, 100);
  return feed;
}

} // namespace mongolock
