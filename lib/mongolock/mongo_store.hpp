// The MongoDB lock store. mongoc_* and bson_t stay inside mongo_store.cpp, behind RAII wrappers.
#pragma once

#include <mongolock/lock_store.hpp>
#include <mongolock/log.hpp>
#include <mongolock/run_store.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace mongolock {

// Sends libmongoc's log messages to mongolock's handler (shown with -v once a MongoStore exists, dropped
// before) instead of the driver's default one, which prints them on stderr. Meant for the executable's
// .preinit_array (cli/main.cpp), which runs before the initializers of the shared libraries: Debian's
// libmongoc initializes itself when it is loaded, before main, and warns there on stderr ("Falling back to
// malloc for counters" when a /dev/shm/mongoc-<pid> that another program killed outright left behind has this
// process's pid). Only sets the driver's handler (static data, no initialization needed); never throws.
void route_driver_log_early() noexcept;

// Also for the executable's .preinit_array, after route_driver_log_early(): makes an empty
// /dev/shm/mongoc-<pid> (O_EXCL, 0600) so that the driver's initializer, which Debian's libmongoc runs when
// it is loaded and which maps its counters into that file unless MONGOC_DISABLE_SHM is set (the environment
// cannot be changed in time: libc sets it up after the .preinit_array), finds the name taken and keeps them
// in memory. On a full /dev/shm the driver's first store into that mapping killed every mongolock command
// with SIGBUS before main: exit 135, nothing on stderr (red team 8, F4). System calls only; never throws.
void keep_driver_counters_in_memory() noexcept;

// Also for the executable's .preinit_array: sets Cyrus SASL's plugin path to "" (no directory) before
// libmongoc's initializer calls sasl_client_init(), which otherwise dlopens every plugin of the system's
// plugin directory (8 and libdb on Debian: ~1 ms of a one-shot run, issue 30). In libmongoc only the GSSAPI
// (Kerberos) mechanism goes through Cyrus SASL; SCRAM, PLAIN, MONGODB-X509 and MONGODB-AWS are its own. A
// MongoStore whose URI names GSSAPI loads the plugins before its first connection (mongo_store.cpp,
// load_deferred_sasl_plugins). A no-op where libmongoc was built without Cyrus SASL or mongolock without its
// headers (MONGOLOCK_SASL_PLUGIN_DIR unset). Never throws.
void defer_sasl_plugins() noexcept;

// Removes the file keep_driver_counters_in_memory() made, once the driver's initializer has run (at the start
// of main): only that file (the same inode it still holds open), never one it found there.
void drop_driver_counters_placeholder() noexcept;

struct StoreConfig {
  std::string uri = "mongodb://127.0.0.1:27017";
  std::string database = "mongolock";
  std::string collection = "locks";
  Millis connect_timeout{5000};                // bounds TCP connect and server selection (connectTimeoutMS,
                                               // serverSelectionTimeoutMS)
  Millis operation_timeout{10'000};            // bounds each command: socketTimeoutMS and the write concern's wtimeout
  std::optional<Millis> server_check_interval; // heartbeatFrequencyMS (>= 500ms): how often the driver re-checks
                                               // the server, and so how often the server's time is re-read
  bool count_commands = false; // count commands by name (command monitoring); when the store closes, print
                               // "mongolock: debug: server commands: N (name n, ...)" to stderr
};

// The version of libmongoc this program runs with (mongoc_get_version()), e.g. "1.23.1"; for --version.
[[nodiscard]] std::string driver_version();

// What the server says about itself, for `mongolock doctor`.
struct ServerInfo {
  std::string version;         // buildInfo.version
  int max_wire_version = 0;    // hello.maxWireVersion
  std::string address;         // host:port of the selected server
  bool tls = false;            // the connection uses TLS (the URI's tls/ssl option, implied by mongodb+srv)
  std::string tls_ca_file;     // the URI's tlsCAFile ("" : the system's CAs)
  std::string tls_certificate; // the URI's tlsCertificateKeyFile, the client certificate ("" : none)
  std::string user;            // the authenticated user as "name@database" (connectionStatus), "" when none
  std::string mechanism;       // the authentication mechanism: the URI's authMechanism, else the one libmongoc
                               // negotiates from the handshake's saslSupportedMechs (SCRAM-SHA-256, else
                               // SCRAM-SHA-1); "" without credentials
};

// A LockStore and RunStore on one MongoDB deployment. Every write uses write concern {w: "majority", j: true}: a w:1
// write can be rolled back on failover and hand the lock to two holders. Not thread-safe: use it from one
// thread at a time (run hands it to its heartbeat thread and takes it back afterwards).
class MongoStore final : public LockStore, public RunStore {
public:
  // Parses and checks the URI and options; connects lazily, on first use. Throws Error (exit 64) for an
  // invalid URI, naming it with the password redacted.
  MongoStore(const StoreConfig& config, const Log& log);
  ~MongoStore() override;
  MongoStore(const MongoStore&) = delete;
  MongoStore& operator=(const MongoStore&) = delete;

  const ServerClock& clock() override;
  // Counted by command monitoring (APM "command started", which libmongoc fires once the command has a
  // connection, before it writes it).
  [[nodiscard]] std::optional<std::uint64_t> writes_sent() const override;
  void reconnect(std::optional<CallLimits> limits) override;
  void ensure_indexes() override;
  [[nodiscard]] bool insert(LockRecord& lock) override;
  [[nodiscard]] std::int64_t remove(const LockSelector& which) override;
  [[nodiscard]] std::int64_t renew(const LockSelector& which, ServerTime expires_at, ServerTime renewed_at, Millis ttl,
                                   bool mark_waiters = false) override;
  void probe_server_time(const LockSelector& which) override;
  [[nodiscard]] bool server_time_undecided() const override;
  [[nodiscard]] std::int64_t mark_released(const LockSelector& which, ServerTime released_at,
                                           ServerTime expires_at) override;
  [[nodiscard]] std::int64_t set_fence(const LockSelector& which, std::int64_t fence) override;
  [[nodiscard]] std::int64_t next_fence(std::string_view name) override;
  [[nodiscard]] std::optional<LockRecord> find(std::string_view program) override;
  [[nodiscard]] std::vector<LockRecord> list(std::optional<std::string_view> name = std::nullopt) override;
  [[nodiscard]] std::int64_t highest_ticket() override;
  [[nodiscard]] bool insert_ticket(TicketRecord& ticket) override;
  [[nodiscard]] std::int64_t renew_ticket(std::string_view id, ServerTime now, ServerTime expires_at) override;
  [[nodiscard]] std::int64_t remove_ticket(std::string_view id,
                                           std::optional<ServerTime> expired_at_or_before = std::nullopt) override;
  [[nodiscard]] std::vector<TicketRecord> tickets(const std::vector<std::string>& names) override;
  [[nodiscard]] std::optional<LockRecord> remove_returning(const LockSelector& which) override;
  void append_event(std::string_view name, std::string_view ticket) override;
  [[nodiscard]] std::unique_ptr<EventFeed> follow_events(Millis await) override;
  void insert_runs(std::vector<RunRecord>& records) override;
  [[nodiscard]] std::vector<RunRecord> runs(std::optional<std::string_view> name, std::optional<ServerTime> since,
                                            std::int64_t limit) override;
  [[nodiscard]] std::vector<RunRecord> runs_of_kind(std::optional<std::string_view> name,
                                                    std::optional<ServerTime> since, std::int64_t limit,
                                                    RunKind kind) override;
  [[nodiscard]] std::vector<RunRecord> runs_holding(std::string_view name,
                                                    const std::vector<std::string>& locks) override;
  void update_skips(const std::vector<RunRecord>& runs) override;
  void record_last_runs(const std::vector<RunRecord>& runs) override;
  [[nodiscard]] std::vector<RunRecord> last_runs(const std::vector<std::string>& names) override;
  [[nodiscard]] std::vector<RunRecord>
  executed_since(const std::vector<std::pair<std::string, std::optional<ServerTime>>>& since) override;
  [[nodiscard]] std::int64_t purge_runs(std::string_view name, std::int64_t keep, ServerTime ended_before,
                                        ServerTime now) override;

  // --- administration (doctor, init): not part of the protocol's LockStore or the history's RunStore ---

  // Server version and wire version (buildInfo), for diagnostics.
  [[nodiscard]] ServerInfo server_info();

  // mongolock's unique indexes as its commands find them (one listIndexes each): the lock documents' program_1,
  // the queue's name_1_seq_1 and the fencing tokens' name_1_fence_1, each `present` (an index on exactly its
  // fields, unique, with no other option, whatever its name), `missing` (the next command that needs it creates
  // it), `refused` (an index on its fields that is not that: the commands that need it fail with Error 69,
  // `refusal` their message), or `unknown` (listIndexes not authorized; for program_1 the server's behaviour
  // answers instead: unique_in_force()). `name`: "program_1". Throws Error (69) when the
  // server cannot be reached.
  struct IndexState {
    std::string name;
    enum State { present, missing, refused, unknown } state;
    std::string refusal;
    std::string of; // "the lock documents", "the queue", "the fencing tokens"
  };
  [[nodiscard]] std::vector<IndexState> index_states();
  // Whether a unique index on {program: 1} is in force, from the server's behaviour: two lock documents of one
  // reserved program ("#index-probe-<token>", expired at once) inserted, the second refused (MongoDB error
  // 11000: duplicate key); both removed by _id. For where listIndexes is not authorized (red team 12b, G1).
  [[nodiscard]] bool unique_in_force();
  // ensure_indexes() where listIndexes was refused and createIndexes made nothing: unique_in_force(), else
  // Error (69) saying so.
  void prove_unique_index();

  // Creates a TTL index on expires_at that deletes documents `expire_after` past their expiry: garbage
  // collection only, the protocol never relies on it. Returns "" when created (or present), else the
  // server's reason (FerretDB v1: not implemented).
  [[nodiscard]] std::string create_ttl_index(Millis expire_after);

  // Creates the run history's index name_1_ended_at_1 (createIndexes; present: nothing changes), which serves
  // every read of the history by name (history, status, check, list's last runs, the purge). Throws Error
  // (69) when the server refuses it. `init` calls it; the first purge creates it too.
  void ensure_runs_index();

  // Creates a TTL index on the runs' ended_at that deletes them `expire_after` after they ended. Returns ""
  // when created (or present with these options), else the server's reason (FerretDB v1: not implemented;
  // MongoDB: an index with another expiry exists).
  [[nodiscard]] std::string create_runs_ttl_index(Millis expire_after);

private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;

  // follow_events() without the repair of an events collection that is not capped.
  [[nodiscard]] std::unique_ptr<EventFeed> follow_events_once(Millis await);
};

} // namespace mongolock
