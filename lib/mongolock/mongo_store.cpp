// The only files that speak libmongoc are this one and lib/mongolock/store/ (the lock documents, the queue
// and its events, the run history). Driver calls return bool + bson_error_t; they turn failures into Error
// (exit 69) with the operation named and the URI's password redacted. This file: the driver, the client,
// the per-call deadline of the kept connection, the server's clock, indexes and server information.
#include <mongolock/store/impl.hpp>
#include <mongolock/text.hpp>
#include <mongolock/token.hpp>

#if defined(MONGOC_ENABLE_SASL_CYRUS) && defined(MONGOLOCK_SASL_PLUGIN_DIR)
#define MONGOLOCK_DEFER_SASL_PLUGINS 1
#include <sasl/sasl.h>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <new>
#include <thread>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <mutex>
#include <random>
#include <signal.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mongolock {

using namespace store;

namespace {

// --- driver set-up ----------------------------------------------------------------------------------

const Log* g_driver_log = nullptr; // the log driver messages go to (debug level only)
std::mutex g_driver_log_mutex;

void driver_log_handler(mongoc_log_level_t level, const char* domain, const char* message, void*) {
  std::lock_guard lock(g_driver_log_mutex);
  if (g_driver_log != nullptr && level <= MONGOC_LOG_LEVEL_INFO) {
    g_driver_log->debug(fmt::format("driver {}: {}", domain, g_driver_log->scrub(message)));
  }
}

} // namespace

void route_driver_log_early() noexcept { mongoc_log_set_handler(driver_log_handler, nullptr); }

namespace {
int g_counters_placeholder = -1;        // keep_driver_counters_in_memory()'s file, open
char g_counters_placeholder_path[48]{}; // "/dev/shm/mongoc-<pid>" (libmongoc 1.x: shm_open("/mongoc-%u"))
} // namespace

void keep_driver_counters_in_memory() noexcept {
  // No snprintf: libc has not run its own initializer yet.
  const char prefix[] = "/dev/shm/mongoc-";
  std::memcpy(g_counters_placeholder_path, prefix, sizeof prefix - 1);
  *write_decimal(g_counters_placeholder_path + sizeof prefix - 1, static_cast<unsigned>(getpid())) = '\0';
  g_counters_placeholder =
      open(g_counters_placeholder_path, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, S_IRUSR | S_IWUSR);
}

namespace {
bool g_sasl_plugins_deferred = false; // defer_sasl_plugins() set the empty path before libmongoc's sasl_client_init()
} // namespace

void defer_sasl_plugins() noexcept {
#ifdef MONGOLOCK_DEFER_SASL_PLUGINS
  static char no_directory[] = ""; // sasl_set_path() copies it; opendir("") fails, which Cyrus skips
  g_sasl_plugins_deferred = sasl_set_path(SASL_PATH_TYPE_PLUGIN, no_directory) == SASL_OK;
#endif
}

void drop_driver_counters_placeholder() noexcept {
  if (g_counters_placeholder < 0) return;
  struct stat held {};
  struct stat named {};
  if (fstat(g_counters_placeholder, &held) == 0 && lstat(g_counters_placeholder_path, &named) == 0 &&
      held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
    unlink(g_counters_placeholder_path);
  }
  close(g_counters_placeholder);
  g_counters_placeholder = -1;
}

namespace {

// libmongoc (Debian's build initializes itself when loaded, before main) keeps counters in
// /dev/shm/mongoc-<pid> unless MONGOC_DISABLE_SHM is set in the environment, and removes the file in
// mongoc_cleanup(). A process killed outright (a holder's SIGKILL) leaves it behind, and a later process
// that gets the same pid cannot create its own and warns "Falling back to malloc for counters" (mongolock's
// executable routes that to its own handler first: route_driver_log_early(), and takes the name first so that
// the driver keeps its counters in memory: keep_driver_counters_in_memory()). Where that did not happen (a
// libmongoc that initializes itself in mongoc_init(), the unit tests' binaries), each
// mongolock removes its own file at once (the mapping stays valid; nothing else reads the counters), and
// nothing is left behind whatever ends it. Only the file this very process has mapped and owns: never
// another user's, and never one of a process with the same pid number in another pid namespace that
// shares /dev/shm (a container), which a "pid not alive" test would take for stale.

// The slots of libmongoc's first counter: its exported __mongoc_counter_dns_failure is a mongoc_counter_t,
// {mongoc_counter_slots_t* cpus} (libmongoc 1.x, mongoc-counters-private.h), pointing into the /dev/shm
// segment or, where the driver could not create that, into malloc'ed memory. nullptr without the symbol,
// and for any other major version than 1 (whose private layout this relies on): the maps check then.
volatile std::int64_t* driver_counter_slot() {
  if (mongoc_get_major_version() != 1) return nullptr;
  void* symbol = dlsym(RTLD_DEFAULT, "__mongoc_counter_dns_failure");
  return symbol == nullptr ? nullptr : *static_cast<std::int64_t* volatile*>(symbol);
}

// True when the counters file `fd` (`size` bytes) is this process's counters segment: a random value
// written into our counter slot shows in the file (through a mapping of our own), at the same place for a
// second value; the slot gets its value back (nothing reads the counters; this runs once, at start-up,
// before any client exists). One open and mmap instead of reading /proc/self/maps (~0.3 ms of CPU).
bool file_holds_own_counters(int fd, std::size_t size, volatile std::int64_t* slot) {
  void* view = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (view == MAP_FAILED) return false;
  const auto* words = static_cast<const volatile std::int64_t*>(view);
  const std::size_t count = size / sizeof(std::int64_t);
  std::random_device random;
  const auto value = [&random] {
    return static_cast<std::int64_t>((std::uint64_t{random()} << 32U) | random()) | 1; // never 0
  };
  const std::int64_t saved = *slot;
  const std::int64_t first = value();
  *slot = first;
  std::size_t at = 0;
  while (at < count && words[at] != first)
    ++at;
  bool same = false;
  if (at < count) {
    std::int64_t second = value();
    if (second == first) second = first ^ 2;
    *slot = second;
    same = words[at] == second;
  }
  *slot = saved;
  munmap(view, size);
  return same;
}

// The same question answered by /proc/self/maps (same device and inode), for a driver without the
// counter symbol.
bool maps_list_file(const std::string& path, const struct stat& st) {
  FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return false;
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
  return mapped;
}

void remove_own_driver_counters() {
  const auto path = fmt::format("/dev/shm/mongoc-{}", getpid());
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) return;
  auto* slot = driver_counter_slot();
  bool own = false;
  if (slot == nullptr) {
    own = maps_list_file(path, st);
  } else if (const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC); fd >= 0) {
    struct stat opened {};
    own = fstat(fd, &opened) == 0 && opened.st_ino == st.st_ino && opened.st_dev == st.st_dev && opened.st_size > 0 &&
          opened.st_size <= (1 << 24) && file_holds_own_counters(fd, static_cast<std::size_t>(opened.st_size), slot);
    close(fd);
  }
  if (own) unlink(path.c_str());
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

// For a URI whose authMechanism is GSSAPI, the only one libmongoc authenticates with through Cyrus SASL: loads
// the plugins that defer_sasl_plugins() kept from libmongoc's initialization, once per process, before the
// first connection: sasl_client_done() ends the client side libmongoc's sasl_client_init() began (one init, one
// done, as before: mongoc_cleanup() ends this one), and sasl_client_init() starts it again from the directories
// Cyrus itself would have read: $SASL_PATH, which it honours only when the process is not setuid or setgid, else
// the plugin directory of the libsasl2 mongolock was built against (pkg-config: libdir/sasl2).
void load_deferred_sasl_plugins([[maybe_unused]] const mongoc_uri_t* uri, [[maybe_unused]] const Log& log) {
#ifdef MONGOLOCK_DEFER_SASL_PLUGINS
  const char* mechanism = mongoc_uri_get_auth_mechanism(uri);
  if (mechanism == nullptr || strcasecmp(mechanism, "GSSAPI") != 0) return;
  static std::mutex mutex;
  static std::optional<Error> failed; // Cyrus is left without its client side: every later store refuses too
  std::lock_guard lock(mutex);
  if (failed) throw *failed;
  if (!g_sasl_plugins_deferred) return;
  g_sasl_plugins_deferred = false;
  const char* from_environment = getuid() == geteuid() && getgid() == getegid() ? std::getenv("SASL_PATH") : nullptr;
  std::string path = from_environment != nullptr ? from_environment : MONGOLOCK_SASL_PLUGIN_DIR;
  const auto shown = path.size() <= 200 ? path : path.substr(0, 200) + "...";
  sasl_client_done();
  const int set = sasl_set_path(SASL_PATH_TYPE_PLUGIN, path.data());
  const int started = set == SASL_OK ? sasl_client_init(nullptr) : set;
  log.debugf("GSSAPI: Cyrus SASL's plugins: {}, from {}",
             started == SASL_OK ? "loaded" : sasl_errstring(started, nullptr, nullptr), shown);
  if (started == SASL_OK) return;
  // libmongoc's GSSAPI authentication would go on without Cyrus's client side and crash (red team 12, F3).
  const auto message =
      fmt::format("cannot load Cyrus SASL's plugins for authMechanism=GSSAPI from {} ({}): {}; {}",
                  from_environment != nullptr ? "SASL_PATH" : "its plugin directory", shown,
                  sasl_errstring(started, nullptr, nullptr),
                  from_environment != nullptr ? "set SASL_PATH to the plugins' directories, or unset it"
                                              : "check the SASL installation (libsasl2-modules-gssapi-mit)");
  failed = from_environment != nullptr ? usage_error(message) : unavailable_error(message);
  throw *failed;
#endif
}

// True for the commands that write (insert, update, delete, findAndModify): what LockStore::writes_sent() counts.
bool is_write_command(std::string_view name) {
  return name == "insert" || name == "update" || name == "delete" || name == "findAndModify";
}

// libmongoc calls this once it has a connection for the command and before it writes the command to it (a
// server selection or connect that failed calls nothing): the only callback when neither -v nor
// MONGOLOCK_DEBUG_COMMANDS is set.
void on_write_started(const mongoc_apm_command_started_t* event) {
  auto* monitor = static_cast<CommandMonitor*>(mongoc_apm_command_started_get_context(event));
  if (is_write_command(mongoc_apm_command_started_get_command_name(event))) ++monitor->writes_started;
}

void on_command_started(const mongoc_apm_command_started_t* event) {
  auto* monitor = static_cast<CommandMonitor*>(mongoc_apm_command_started_get_context(event));
  const std::string name = mongoc_apm_command_started_get_command_name(event);
  ++monitor->counts[name];
  if (is_write_command(name)) ++monitor->writes_started;
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

// How long a server clock read from a hello is used before it is read again (refresh_clock).
constexpr Millis k_clock_max_age{60'000};

// --- per-call time limits on a kept connection ----------------------------------------------------
//
// libmongoc 1.23 fixes socketTimeoutMS when a client is made (no setter), and a new client means a new
// TCP connection, TLS handshake and authentication. To bound one call (a lease renewal) on the client
// that is kept, every connection of the client is wrapped in a DeadlineStream, which caps the timeout of
// each read and write at what is left of the call's deadline and fails them once it has passed.

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
  if (!factory->deadline->connect_fits(LeaseClock::now())) {
    // Less of the call is left than the connect limit (or none: a retried read or write after a call
    // was cut at its deadline; CallDeadline::connect_fits says why that would outlast the call). The call
    // fails instead; the next reconnect() makes a client whose connect limit fits.
    bson_set_error(error, MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_CONNECT,
                   "connection to %s not made: less is left of this call's time limit than a connect may take",
                   host->host_and_port);
    return nullptr;
  }
  mongoc_stream_t* inner = mongoc_client_default_stream_initiator(uri, host, factory->client, error);
  if (inner == nullptr) return nullptr;
  factory->connected = true;
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

namespace store {

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

} // namespace store

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
  load_deferred_sasl_plugins(impl.uri.get(), log);
  if (config.server_check_interval) {
    mongoc_uri_set_option_as_int32(impl.uri.get(), MONGOC_URI_HEARTBEATFREQUENCYMS,
                                   to_int32_ms(std::max(*config.server_check_interval, Millis(500))));
  } else if (mongoc_uri_get_option_as_int32(impl.uri.get(), MONGOC_URI_HEARTBEATFREQUENCYMS, 0) == 0) {
    // No periodic server checks: on a kept connection a check would be bounded by the client's connect
    // timeout, not by the call's deadline (its reads are polled on the socket, beneath DeadlineStream).
    // The clock is re-read with an explicit hello instead (refresh_clock).
    mongoc_uri_set_option_as_int32(impl.uri.get(), MONGOC_URI_HEARTBEATFREQUENCYMS, INT32_MAX);
  }
  if (mongoc_uri_get_option_as_int32(impl.uri.get(), MONGOC_URI_SOCKETCHECKINTERVALMS, 0) == 0) {
    // No idle-socket check: on a connection idle for longer (5 s by default) libmongoc sends a hello
    // first, one more round trip inside a renewal's call bound that the verbose log does not show (on a
    // 3 s round trip: check, clock hello, update = 9 s, past the default TTL's 8.75 s bound; red team 5,
    // F1). A dead connection is found by the call itself, which the bound and the retry on a new
    // connection cover.
    mongoc_uri_set_option_as_int32(impl.uri.get(), MONGOC_URI_SOCKETCHECKINTERVALMS, INT32_MAX);
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
  call_deadline.connect = connect_limit;
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
    if (feeds_open > 0) {
      retired.push_back(std::move(client)); // an event cursor still refers to it (Impl::retired)
    } else {
      client.reset();
    }
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
  streams.connected = false;
  mongoc_client_set_stream_initiator(client.get(), deadline_initiator, &streams);
  ++clients_made;
  ApmCallbacksPtr callbacks(mongoc_apm_callbacks_new());
  if (config.count_commands || log.verbosity() == Verbosity::verbose) {
    mongoc_apm_set_command_started_cb(callbacks.get(), on_command_started);
    mongoc_apm_set_command_succeeded_cb(callbacks.get(), on_command_succeeded);
    mongoc_apm_set_command_failed_cb(callbacks.get(), on_command_failed);
  } else {
    mongoc_apm_set_command_started_cb(callbacks.get(), on_write_started);
  }
  mongoc_client_set_apm_callbacks(client.get(), callbacks.get(), &monitor);
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
  // The connect fits in the call (issue 27: a renewal call bound shorter than the time to the deadline).
  const auto connect = std::min({impl.config.connect_timeout, limits->connect, std::max(limits->total, Millis(1))});
  const auto total = std::min(limits->total, connect + impl.config.operation_timeout);
  // A new client after a failed call; its connect and handshake get 7/8 of the connect limit, so that the
  // next calls, whose limits differ by the few ms their timers wake late, let it connect again if needed.
  // A kept client whose connect limit is longer (the acquire's) may not connect within the call: a
  // connection lost in the call (a retried write) fails the call instead, and the next one makes a client.
  // A client that has not connected yet (made by an unbounded reconnect after a failed call) is replaced
  // too when its connect limit does not fit: nothing is lost, and kept it would refuse its first connection
  // (red team 6: after one cut queue read, a --once-per run's success record failed at once, "not
  // reconnecting within this call's time limit", and another host ran the job again in the period).
  if (impl.failed || (!impl.streams.connected && impl.connect_limit > connect)) {
    impl.open_client(std::max(connect - connect / 8, Millis(1)), impl.config.operation_timeout);
    impl.log.debugf("new connection (client {}): connect and handshake within {}, the call within {}",
                    impl.clients_made, format_duration(impl.connect_limit), format_duration(total));
  }
  impl.call_deadline.may_connect = impl.connect_limit <= connect;
  impl.call_deadline.until = now + total;
  impl.call_deadline.server = limits->server;
  // Every renewal re-reads the server's time (one hello on the connection, as the handshake of a new
  // connection did before issue 15): a clock estimate made stale by a paused VM is corrected at once.
  if (limits->reread_clock) impl.clock_due = true;
}

namespace {

// The replica-set members the client knows that answered but are not a primary ("RSSecondary", ...), as
// "host (type)" joined by ", "; "" when there is none (no member answered, or not a replica set).
std::string members_without_primary(mongoc_client_t* client) {
  std::size_t n = 0;
  mongoc_server_description_t** all = mongoc_client_get_server_descriptions(client, &n);
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string_view type = mongoc_server_description_type(all[i]);
    if (type == "RSSecondary" || type == "RSArbiter" || type == "RSOther" || type == "RSGhost") {
      out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", mongoc_server_description_host(all[i])->host_and_port,
                         type);
    }
  }
  mongoc_server_descriptions_destroy_all(all, n);
  return out;
}

} // namespace

// Server selection for a write. libmongoc's single-threaded client tries once; during an election the
// members answer as secondaries for seconds, so while one answered and none is primary it is tried again
// every 500 ms (the driver's minHeartbeatFrequencyMS) within the connect limit and the call's deadline.
mongoc_server_description_t* MongoStore::Impl::select_primary(bson_error_t& error) {
  const auto started = LeaseClock::now();
  auto until = started + connect_limit;
  if (call_deadline.until) until = std::min(until, *call_deadline.until);
  for (;;) {
    if (auto* server = mongoc_client_select_server(client.get(), true, nullptr, &error)) return server;
    const auto members = members_without_primary(client.get());
    if (members.empty()) return nullptr;
    const auto now = LeaseClock::now();
    if (now + Millis(500) >= until) {
      failed = true;
      // Transient: a waiter waits on through a longer election (red team 9, F2); any other call exits 69.
      throw unreachable_error(fmt::format("no primary at {} within {} (members: {}): a replica-set election, or the "
                                          "set lost its majority; retry, or give --connect-timeout longer than "
                                          "the election",
                                          redact_uri(config.uri),
                                          format_duration(std::chrono::duration_cast<Millis>(now - started)), members));
    }
    log.debugf("no primary yet (members: {}); server selection again in 500ms", members);
    std::this_thread::sleep_for(Millis(500));
  }
}

void MongoStore::Impl::refresh_clock() {
  bson_error_t error;
  const auto started = LeaseClock::now();
  ServerDescriptionPtr server(select_primary(error));
  const auto selected = LeaseClock::now();
  if (!server) {
    failed = true;
    auto hint = connection_hint(error.message);
    if (hint.empty()) hint = "check --uri and that the server is up";
    throw unreachable_error(
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

std::optional<std::uint64_t> MongoStore::writes_sent() const { return m_impl->monitor.writes_started; }

const ServerClock& MongoStore::clock() {
  m_impl->refresh_clock(); // no round trip unless the driver's server check is due
  return *m_impl->clock;
}

bool MongoStore::Impl::try_create_index(mongoc_collection_t* target, const char* name,
                                        std::initializer_list<const char*> fields, bool unique,
                                        std::optional<Millis> expire_after, bson_error_t& error,
                                        bool* created_nothing) const {
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
  if (!mongoc_collection_write_command_with_opts(target, command.get(), write_opts.get(), reply.get(), &error)) {
    return false;
  }
  bson_iter_t before;
  bson_iter_t after;
  if (created_nothing != nullptr) {
    // Made something only where the reply says so: a reply without the counts (a mongos's, or a proxy's) is
    // taken as one that made nothing, and the index is listed again.
    *created_nothing =
        !(bson_iter_init_find(&before, reply.get(), "numIndexesBefore") &&
          bson_iter_init_find(&after, reply.get(), "numIndexesAfter") && BSON_ITER_HOLDS_NUMBER(&before) &&
          BSON_ITER_HOLDS_NUMBER(&after) && bson_iter_as_int64(&after) > bson_iter_as_int64(&before));
  }
  return true;
}

namespace {

// The `name` of an index document ("" without one).
std::string index_name(const bson_t* spec) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, spec, "name") || !BSON_ITER_HOLDS_UTF8(&it)) return "";
  return std::string(iter_string(it));
}

// "program: 1" of an index's fields.
std::string key_text(std::initializer_list<const char*> fields) {
  std::string key;
  for (const char* field : fields)
    key += fmt::format("{}{}: 1", key.empty() ? "" : ", ", field);
  return key;
}

} // namespace

const MongoStore::Impl::Index MongoStore::Impl::k_lock_index{
    "program_1", {"program"}, true, "the exclusion needs a unique one (two holders could take one name)"};
const MongoStore::Impl::Index MongoStore::Impl::k_queue_index{
    "name_1_seq_1",
    {"name", "seq"},
    true,
    "the queue's order needs a unique one (two waiters could take one place in line)"};
const MongoStore::Impl::Index MongoStore::Impl::k_fence_index{
    "name_1_fence_1",
    {"name", "fence"},
    true,
    "the fencing tokens need a unique one (two holders could get one token)"};

MongoStore::Impl::IndexListing MongoStore::Impl::list_index(mongoc_collection_t* target, const Index& index) const {
  Bson command;
  BSON_APPEND_UTF8(command.get(), "listIndexes", mongoc_collection_get_name(target));
  bson_t cursor_opts;
  BSON_APPEND_DOCUMENT_BEGIN(command.get(), "cursor", &cursor_opts);
  BSON_APPEND_INT32(&cursor_opts, "batchSize", 1000);
  bson_append_document_end(command.get(), &cursor_opts);
  Reply reply;
  bson_error_t error;
  IndexListing listing;
  if (!mongoc_collection_command_with_opts(target, command.get(), nullptr, nullptr, reply.get(), &error)) {
    const bool answered = error.domain == MONGOC_ERROR_SERVER || error.domain == MONGOC_ERROR_QUERY;
    if (answered && error.code == 26) { // NamespaceNotFound: no collection, no index
      listing.complete = true;
      return listing;
    }
    if (answered && error.code == 13) { // Unauthorized
      listing.refused = true;
      return listing;
    }
    fail("listIndexes", error, target);
  }
  bson_iter_t it;
  bson_iter_t batch;
  if (bson_iter_init(&it, reply.get()) && bson_iter_find_descendant(&it, "cursor.firstBatch", &batch) &&
      BSON_ITER_HOLDS_ARRAY(&batch) && bson_iter_recurse(&batch, &it)) {
    while (bson_iter_next(&it)) {
      if (!BSON_ITER_HOLDS_DOCUMENT(&it)) continue;
      std::uint32_t length = 0;
      const std::uint8_t* data = nullptr;
      bson_iter_document(&it, &length, &data);
      bson_t spec;
      if (!bson_init_static(&spec, data, length)) continue;
      const auto difference = store::index_difference(&spec, index.fields, index.unique);
      if (difference.empty()) {
        listing.plain = true;
      } else if (difference != "other fields" && listing.other.empty()) {
        listing.other = index_name(&spec);
        listing.difference = difference;
      }
    }
    bson_iter_t top;
    bson_iter_t id;
    listing.complete = bson_iter_init(&top, reply.get()) && bson_iter_find_descendant(&top, "cursor.id", &id) &&
                       BSON_ITER_HOLDS_NUMBER(&id) && bson_iter_as_int64(&id) == 0;
  }
  return listing;
}

std::string MongoStore::Impl::index_refusal(mongoc_collection_t* target, const Index& index,
                                            const IndexListing& listing) const {
  const std::string collection_name = mongoc_collection_get_name(target);
  const auto key = key_text(index.fields);
  // By name where it is short plain text, else by key (a name cut short would name no index).
  const bool by_name =
      listing.other.size() <= 100 && std::all_of(listing.other.begin(), listing.other.end(),
                                                 [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  const auto shown = listing.other.size() <= 100 ? listing.other : listing.other.substr(0, 100) + "...";
  return fmt::format("{}.{}: its index {} on {{{}}} is {}, and {}; drop it (db.getSiblingDB(\"{}\").{}.dropIndex({})) "
                     "and mongolock creates its unique index {}",
                     config.database, collection_name, shown, key, listing.difference, index.needs, config.database,
                     collection_name, by_name ? fmt::format("\"{}\"", listing.other) : fmt::format("{{{}}}", key),
                     index.name);
}

bool MongoStore::Impl::ensure_index(mongoc_collection_t* target, const Index& index) {
  const auto listing = list_index(target, index);
  if (listing.plain) return true;
  const std::string where_text = fmt::format("{}.{}", config.database, mongoc_collection_get_name(target));
  if (index.unique && !listing.other.empty()) throw unavailable_error(index_refusal(target, index, listing));
  if (index.unique && !listing.complete && !listing.refused) {
    throw unavailable_error(fmt::format("{}: listIndexes said more indexes follow the first 1000 and none of those "
                                        "was the unique index on {{{}}}; {}: check the collection's indexes",
                                        where_text, key_text(index.fields), index.needs));
  }
  bson_error_t error;
  bool created_nothing = false;
  if (!try_create_index(target, index.name, index.fields, index.unique, std::nullopt, error, &created_nothing)) {
    fail(fmt::format("createIndexes ({})", index.name), error, target);
  }
  if (!index.unique || !created_nothing) return true;
  // The server made nothing: it holds an index it takes for this one (or a concurrent first run made it).
  if (listing.refused) return false;
  const auto again = list_index(target, index);
  if (again.plain) return true;
  if (!again.other.empty()) throw unavailable_error(index_refusal(target, index, again));
  throw unavailable_error(
      fmt::format("{}: createIndexes of {} created nothing, as if it existed, but listIndexes lists "
                  "no unique index on {{{}}}; {}: check the collection's indexes",
                  where_text, index.name, key_text(index.fields), index.needs));
}

std::string MongoStore::Impl::unverified_index(mongoc_collection_t* target, const Index& index) const {
  return fmt::format("{}.{}: listIndexes was refused (not authorized) and FerretDB's createIndexes of {} created "
                     "nothing, which it also answers over an index on {{{}}} that is not unique; {}: grant the user "
                     "listIndexes on it",
                     config.database, mongoc_collection_get_name(target), index.name, key_text(index.fields),
                     index.needs);
}

void MongoStore::ensure_indexes() {
  m_impl->connect();
  if (!m_impl->ensure_index(m_impl->collection.get(), Impl::k_lock_index)) prove_unique_index();
}

bool MongoStore::unique_in_force() {
  LockRecord probe;
  probe.program = fmt::format("#index-probe-{}", make_token()); // '#' is reserved: no lock has it
  probe.name = probe.program;
  probe.process = "index-probe";
  probe.token = make_token();
  probe.acquired_at = probe.renewed_at = probe.expires_at = clock().now(); // expired at once
  probe.ttl = Millis(1);
  if (!insert(probe)) throw unavailable_error("the index probe's first document was refused as a duplicate");
  LockRecord second = probe;
  second.id.clear();
  second.token = make_token();
  const bool stored_twice = insert(second);
  (void)remove(LockSelector{.program = probe.program, .id = probe.id});
  if (stored_twice) (void)remove(LockSelector{.program = second.program, .id = second.id});
  return !stored_twice;
}

void MongoStore::prove_unique_index() {
  auto& impl = *m_impl;
  if (unique_in_force()) {
    impl.log.debugf("listIndexes not authorized: a second document of one program was refused (11000), the unique "
                    "index on {{program: 1}} is in force");
    return;
  }
  throw unavailable_error(fmt::format(
      "{}: listIndexes was refused (not authorized), createIndexes of program_1 created nothing, and two lock "
      "documents of one program were both stored: no unique index on {{program: 1}} is in force, and {}; drop the "
      "index on {{program: 1}} that is not unique, or grant the user listIndexes to be told which it is",
      impl.namespace_name, Impl::k_lock_index.needs));
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

std::vector<MongoStore::IndexState> MongoStore::index_states() {
  auto& impl = *m_impl;
  impl.connect();
  std::vector<IndexState> states;
  const auto state_of = [&](mongoc_collection_t* target, const Impl::Index& index, const char* of) {
    const auto listing = impl.list_index(target, index);
    IndexState state{index.name, IndexState::missing, {}, of};
    if (listing.plain) {
      state.state = IndexState::present;
    } else if (!listing.other.empty()) {
      state.state = IndexState::refused;
      state.refusal = impl.index_refusal(target, index, listing);
    } else if (listing.refused) {
      state.state = IndexState::unknown;
    } else if (!listing.complete) {
      state.state = IndexState::refused;
      state.refusal = fmt::format("{}.{}: listIndexes said more indexes follow the first 1000", impl.config.database,
                                  mongoc_collection_get_name(target));
    }
    states.push_back(std::move(state));
  };
  state_of(impl.collection.get(), Impl::k_lock_index, "the lock documents");
  if (states.front().state == IndexState::unknown) {
    states.front().state = unique_in_force() ? IndexState::present : IndexState::missing; // by the server's behaviour
  }
  state_of(impl.open(impl.queue, "_queue"), Impl::k_queue_index, "the queue");
  state_of(impl.open(impl.fences, "_fences"), Impl::k_fence_index, "the fencing tokens");
  return states;
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

std::string driver_version() { return mongoc_get_version(); }

} // namespace mongolock
