// An in-memory LockStore for tests of the protocol without a server: the same documents, selectors and
// unique keys as MongoStore, with the write semantics of either server family:
// - MongoDB: every single-document write is atomic (filter checked and document changed in one step);
// - FerretDB v1: an update or delete reads the matching documents, then writes each one back whole (or
//   deletes it) by _id without checking the filter again, so another client's write that lands between
//   the two steps can be undone by the write-back (issue #19).
// The window between the read and the write of every update and delete is a hook (`between`) where a
// test runs another client's operation. Every write is logged with the operation, the collection and
// the document's program/_id, so a test can assert who wrote what.
#pragma once

#include <mongolock/lock_store.hpp>
#include <mongolock/run_store.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mongolock {

enum class WriteSemantics { mongodb, ferretdb_v1 };

class MemoryStore final : public LockStore, public RunStore {
public:
  // A store whose clock is this host's (server time = local wall clock at construction, advanced by
  // LeaseClock) shifted by `skew` (a client whose estimate of the server's clock is off).
  explicit MemoryStore(WriteSemantics semantics = WriteSemantics::mongodb, Millis skew = Millis(0));
  // A store whose clock is `clock` (the simulator: a fixed epoch on virtual time, LeaseClock's TimeSource).
  MemoryStore(WriteSemantics semantics, const ServerClock& clock);
  // The server's clock is stepped (the simulator: an NTP step on the server); later operations read `clock`.
  void set_clock(const ServerClock& clock) { m_clock = clock; }

  // One write to a lock document, as logged: "update", "delete", "insert"; the lock's program; which
  // fields an update set ("expires_at,renewed_at,ttl_ms", "waiters", ...).
  struct Write {
    std::string op;
    std::string program;
    std::string fields;
  };
  [[nodiscard]] const std::vector<Write>& lock_writes() const { return m_writes; }

  // Fault injection: every feed made so far throws Error (69) at its next wait, as a server that closes
  // its tailable cursors does (FerretDB v1 when it trims a capped collection); feeds made later work.
  void break_feeds() { ++m_feed_generation; }
  // Fault injection: the next `n` follow_events() calls throw Error (69), as a server that cannot create
  // the events collection just then (FerretDB v1 with SQLite: "database is locked").
  void fail_follows(int n) { m_failing_follows = n; }

  // Runs between the read and the write of the next update or delete of a lock document or a queue ticket
  // (once; FerretDB semantics only: with MongoDB's the write is atomic and this runs after it). Set it again
  // for more.
  std::function<void()> between;
  // Runs at the start of the next renew(), before its filter is matched (once): what happens while a renewal
  // is on its way to the server (another client's write, the server's clock moving on). Set it again for more.
  std::function<void()> before_renew;
  // Runs at the start of the next remove() or remove_returning(), before its filter is matched (once): what
  // happens while a delete is on its way (the holder releases and acquires again). Set it again for more.
  std::function<void()> before_remove;

  // Another client's update of `waiters` on the one document `which` selects (what waiters of mongolock
  // 0.2.0 did; mongolock itself no longer sends it): for tests of what such a write does. Returns the
  // number matched.
  std::int64_t mark_waiters(const LockSelector& which);

  // Writes whose condition and change the caller decides, with the store's write semantics (those of
  // update() and remove_returning() below): the simulator evaluates MongoStore's own BSON filter and update
  // on each document (tests/sim/sim_store.cpp). A match is tried on the documents in order of program
  // (lock documents) or of insertion (tickets); the first that matches is written.
  using LockMatch = std::function<bool(const LockRecord&)>;
  using LockChange = std::function<void(LockRecord&)>;
  using TicketMatch = std::function<bool(const TicketRecord&)>;
  using TicketChange = std::function<void(TicketRecord&)>;
  // Updates the first lock document `match` selects with `change`; `fields` as in lock_writes(). Returns
  // the number matched (0 or 1).
  std::int64_t update_where(const LockMatch& match, const std::string& fields, const LockChange& change);
  // Deletes the first lock document `match` selects and returns it (nullopt: none matched).
  std::optional<LockRecord> remove_where(const LockMatch& match);
  // The same for queue tickets. Return the number matched (0 or 1).
  std::int64_t update_ticket_where(const TicketMatch& match, const TicketChange& change);
  std::int64_t remove_ticket_where(const TicketMatch& match);

  // The store's lock documents, as stored (for assertions).
  [[nodiscard]] const std::map<std::string, LockRecord>& documents() const { return m_locks; }

  const ServerClock& clock() override { return m_clock; }
  // Only remembers the limits (no time passes here): tickets_limits() says which a queue read ran under.
  void reconnect(std::optional<CallLimits> limits) override { m_limits = limits; }
  // The limits of the last reconnect() before the last tickets() call (for assertions; nullopt: none).
  [[nodiscard]] const std::optional<CallLimits>& tickets_limits() const { return m_tickets_limits; }
  void ensure_indexes() override {}
  [[nodiscard]] bool insert(LockRecord& lock) override;
  [[nodiscard]] std::int64_t remove(const LockSelector& which) override;
  [[nodiscard]] std::int64_t renew(const LockSelector& which, ServerTime expires_at, ServerTime renewed_at, Millis ttl,
                                   bool mark_waiters = false) override;
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
  // Events are read at once; a wait without one returns nullopt at once (no real waiting).
  [[nodiscard]] std::unique_ptr<EventFeed> follow_events(Millis await) override;
  void insert_runs(std::vector<RunRecord>& records) override;
  [[nodiscard]] std::vector<RunRecord> runs(std::optional<std::string_view> name, std::optional<ServerTime> since,
                                            std::int64_t limit) override;
  [[nodiscard]] std::int64_t purge_runs(std::string_view name, std::int64_t keep, ServerTime ended_before,
                                        ServerTime now) override;

private:
  std::optional<CallLimits> m_limits;         // the last reconnect()'s
  std::optional<CallLimits> m_tickets_limits; // m_limits at the last tickets()
  // Updates the one lock document `which` selects with `change`, with the store's semantics; returns the
  // number matched.
  std::int64_t update(const LockSelector& which, const std::string& fields,
                      const std::function<void(LockRecord&)>& change);
  [[nodiscard]] std::string new_id();
  // A renewal's server-time condition (store::renew_filter): with MongoDB's semantics, `lock` has not expired
  // at the server's `now`; always true with FerretDB v1's (it lacks the condition).
  [[nodiscard]] bool unexpired_on_server(const LockRecord& lock, ServerTime now) const;
  void run_between();

  WriteSemantics m_semantics;
  ServerClock m_clock;
  std::map<std::string, LockRecord> m_locks; // by program (the unique key)
  std::map<std::string, std::vector<std::int64_t>> m_fences;
  std::vector<TicketRecord> m_tickets;
  std::vector<WakeEvent> m_events;
  int m_failing_follows = 0;
  std::vector<RunRecord> m_runs;
  std::vector<Write> m_writes;
  std::int64_t m_next_id = 1;
  int m_feed_generation = 0;
};

// True when `lock` matches every condition `which` sets (MongoDB's filter semantics for LockSelector).
[[nodiscard]] bool selects(const LockSelector& which, const LockRecord& lock);

} // namespace mongolock
