// One client's view of the simulated server: a LockStore that forwards to the world's MemoryStore as
// server operations in flight (applied after a request latency, answered after a reply latency), with
// this client's clock estimate (off by at most half its round trip: ServerClock's stated bounds) and the
// faults of the schedule: a call failing before it applies, a reply lost after the write applied, a
// request delayed past other clients' writes (FerretDB: between its read and its write-back), the server
// unreachable, the client paused (its reply waits) or killed (Killed is thrown out of the call).
#pragma once

#include "world.hpp"

#include <mongolock/error.hpp>
#include <mongolock/run_store.hpp>
#include <mongolock/store/commands.hpp>

namespace sim {

// The words of a failover's error answer (SimStore::election_answer(), World::election()) in its Error's text.
inline constexpr std::string_view k_failover_answer = "not primary (error";

class SimStore final : public mongolock::LockStore, public mongolock::RunStore {
public:
  SimStore(World& world, Client& client);

  // A waiter of mongolock 0.2.0 marking the holder's document (Plant::rollback): an update of `waiters`
  // by another client than the holder, delayed between its read and its write-back.
  void mark_waiters(const mongolock::LockSelector& which);

  const mongolock::ServerClock& clock() override { return m_clock; }
  // The writes that got past the outage and the fault "failed before it reached the server": as MongoStore's
  // command monitoring counts them (a failed renewal that left it unchanged pins nothing). Plant::pin_none:
  // never moves, so that no failed renewal pins.
  [[nodiscard]] std::optional<std::uint64_t> writes_sent() const override { return m_writes_sent; }
  void reconnect(std::optional<mongolock::CallLimits> limits) override;
  void ensure_indexes() override {}
  [[nodiscard]] bool insert(mongolock::LockRecord& lock) override;
  [[nodiscard]] std::int64_t remove(const mongolock::LockSelector& which) override;
  [[nodiscard]] std::int64_t renew(const mongolock::LockSelector& which, ServerTime expires_at, ServerTime renewed_at,
                                   Millis ttl, bool mark_waiters = false) override;
  // As MongoStore's: a find of the lock by the renewal's filter, with the server-time condition (and, refused,
  // once more without it) until the store has decided it; never under Plant::no_server_time (renewals go without
  // the condition there, and so would the probe's read).
  void probe_server_time(const mongolock::LockSelector& which) override;
  [[nodiscard]] bool server_time_undecided() const override {
    return !m_server_time.decided() && m_world.config().plant != Plant::no_server_time;
  }
  [[nodiscard]] std::int64_t mark_released(const mongolock::LockSelector& which, ServerTime released_at,
                                           ServerTime expires_at) override;
  [[nodiscard]] std::int64_t set_fence(const mongolock::LockSelector& which, std::int64_t fence) override;
  [[nodiscard]] std::int64_t next_fence(std::string_view name) override;
  [[nodiscard]] std::optional<mongolock::LockRecord> find(std::string_view program) override;
  [[nodiscard]] std::vector<mongolock::LockRecord> list(std::optional<std::string_view> name = std::nullopt) override;
  [[nodiscard]] std::int64_t highest_ticket() override;
  [[nodiscard]] bool insert_ticket(mongolock::TicketRecord& ticket) override;
  [[nodiscard]] std::int64_t renew_ticket(std::string_view id, ServerTime now, ServerTime expires_at) override;
  [[nodiscard]] std::int64_t remove_ticket(std::string_view id,
                                           std::optional<ServerTime> expired_at_or_before = std::nullopt) override;
  [[nodiscard]] std::vector<mongolock::TicketRecord> tickets(const std::vector<std::string>& names) override;
  [[nodiscard]] std::optional<mongolock::LockRecord> remove_returning(const mongolock::LockSelector& which) override;
  void append_event(std::string_view name, std::string_view ticket) override;
  [[nodiscard]] std::unique_ptr<mongolock::EventFeed> follow_events(Millis await) override;
  // The run history (run --once-per), as server operations in flight like the rest: the insert may be delayed
  // or land after an early error. purge_runs() deletes nothing (a schedule is shorter than any retention).
  void insert_runs(std::vector<mongolock::RunRecord>& records) override;
  [[nodiscard]] std::vector<mongolock::RunRecord> runs(std::optional<std::string_view> name,
                                                       std::optional<ServerTime> since, std::int64_t limit) override;
  [[nodiscard]] std::int64_t purge_runs(std::string_view, std::int64_t, ServerTime, ServerTime) override { return 0; }

private:
  // Sends `op` to the server: applied there after the request latency (unless it fails first), answered
  // after the reply latency. Throws mongolock::Error (69) on a fault or when the call's limit passed,
  // Killed when the client was killed meanwhile.
  // What a call is: a read, an update or delete (may be delayed), or one delayed always (Plant::rollback).
  enum class Write { read, update, forced_delay };
  // How MongoStore reports the call's network errors (a server that cannot be selected, a connection lost or timed
  // out): fail()'s transient error (reads, and the queue's ticket renewals and deletes and events, which may be sent
  // again), or fail_write()'s "outcome unknown" (the writes of locks, tickets and runs), which is not transient
  // (Plant::unknown_transient: it is).
  enum class Fails { transient, unknown };
  template <typename T> T call(const char* what, std::function<T()> op, Write kind, Fails fails = Fails::transient);
  // The fault rates of this client's calls: the schedule's; the operator's requests are delayed, duplicated and
  // lost more often (its late copies are what it is there for).
  struct Rates {
    double fail, lost, delay, early, duplicate;
  };
  [[nodiscard]] Rates rates() const;
  [[nodiscard]] mongolock::Error network_error(const char* what, std::string_view text, Fails fails) const;
  // World::election(): the server answered `what` with a failover's error code; nothing was applied.
  [[nodiscard]] mongolock::Error election_answer(const char* what);
  template <typename T> void duplicate(const char* what, const std::function<T()>& op, LocalTime arrives);
  // The operator's command for World::operator_write(), as its write was sent (nullopt for a run's writes).
  [[nodiscard]] std::optional<OperatorCommand> command() const;
  // The document an update read as `read` overwrites now: the server's (FerretDB v1 writes back a copy read before
  // others' writes; MongoDB changes the document in place), or `read` when it is gone.
  [[nodiscard]] mongolock::LockRecord overwritten(const mongolock::LockRecord& read) const;
  struct Arrival {
    LocalTime arrives;              // the request reaches the server
    std::optional<LocalTime> early; // its error comes back then, while it is still on its way
    bool between = false;           // FerretDB v1: a delay between its read and its write-back...
    Millis delay{0};                // ...this long
  };
  [[nodiscard]] Arrival draw_arrival(Write kind, LocalTime start, LocalTime limit);
  // The selector as sent: without _id and token under Plant::name_selector.
  [[nodiscard]] mongolock::LockSelector sent(const mongolock::LockSelector& which) const;
  // A renewal's arguments (LockStore::renew), the selector as sent.
  struct Renewal {
    mongolock::LockSelector selector;
    ServerTime expires_at;
    ServerTime renewed_at;
    Millis ttl;
    bool mark_waiters;
  };
  // The probe's find (probe_server_time()): whether it read a document; nullopt: the server refused it.
  [[nodiscard]] std::optional<bool> probe_find(const mongolock::LockSelector& selector, bool server_time);
  // One findAndModify of a renewal, with or without the server-time condition; nullopt: the server refused it.
  [[nodiscard]] std::optional<std::int64_t> send_renewal(const Renewal& renewal, bool server_time);
  void wait_until(LocalTime t);
  void redraw_clock();

  World& m_world;
  Client& m_client;
  mongolock::ServerClock m_clock;
  std::optional<LocalTime> m_call_deadline; // CallLimits::total from the last reconnect() (the client's clock)
  std::optional<Millis> m_server_bound;     // CallLimits::server: the server aborts a write past it
  std::uint64_t m_next_id = 0;
  std::uint64_t m_writes_sent = 0;
  mongolock::store::ServerTimeCondition m_server_time; // as MongoStore's: renewals carry $expr until refused
};

} // namespace sim
