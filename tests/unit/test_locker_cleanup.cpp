// Clean-up after a failed write (Locker's insert, WaitQueue's join), on the in-memory store behind a store that
// applies a write and then reports it failed (a timeout or a lost reply after the server wrote), or fails it.
#include <doctest/doctest.h>

#include <mongolock/error.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/memory_store.hpp>
#include <mongolock/queue.hpp>

using namespace mongolock;
using namespace std::chrono_literals;

namespace {

// A LockStore whose insert of a lock is applied by `inner` and then throws Error (69), as a call whose reply
// was lost; with `failing_ticket` N, the Nth insert of a queue ticket throws Error (69) instead (not applied).
// Every other call goes to `inner` unchanged.
class InsertAppliedThenFails final : public LockStore {
public:
  explicit InsertAppliedThenFails(MemoryStore& inner, int failing_ticket = 0)
      : m_inner(inner), m_failing_ticket(failing_ticket) {}
  const ServerClock& clock() override { return m_inner.clock(); }
  void reconnect(std::optional<CallLimits> limits) override { m_inner.reconnect(limits); }
  void ensure_indexes() override { m_inner.ensure_indexes(); }
  bool insert(LockRecord& lock) override {
    (void)m_inner.insert(lock);
    throw unavailable_error("insert of lock: timed out (the write applied)");
  }
  std::int64_t remove(const LockSelector& which) override { return m_inner.remove(which); }
  std::int64_t renew(const LockSelector& which, ServerTime expires_at, ServerTime renewed_at, Millis ttl,
                     bool mark_waiters) override {
    return m_inner.renew(which, expires_at, renewed_at, ttl, mark_waiters);
  }
  std::int64_t mark_released(const LockSelector& which, ServerTime released_at, ServerTime expires_at) override {
    return m_inner.mark_released(which, released_at, expires_at);
  }
  std::int64_t set_fence(const LockSelector& which, std::int64_t fence) override {
    return m_inner.set_fence(which, fence);
  }
  std::int64_t next_fence(std::string_view name) override { return m_inner.next_fence(name); }
  std::optional<LockRecord> find(std::string_view program) override { return m_inner.find(program); }
  std::vector<LockRecord> list(std::optional<std::string_view> name) override { return m_inner.list(name); }
  std::int64_t highest_ticket() override { return m_inner.highest_ticket(); }
  bool insert_ticket(TicketRecord& ticket) override {
    if (++m_tickets == m_failing_ticket) throw unavailable_error("insert of a queue ticket: server unreachable");
    return m_inner.insert_ticket(ticket);
  }
  std::int64_t renew_ticket(std::string_view id, ServerTime now, ServerTime expires_at) override {
    return m_inner.renew_ticket(id, now, expires_at);
  }
  std::int64_t remove_ticket(std::string_view id, std::optional<ServerTime> expired_at_or_before) override {
    return m_inner.remove_ticket(id, expired_at_or_before);
  }
  std::vector<TicketRecord> tickets(const std::vector<std::string>& names) override { return m_inner.tickets(names); }
  std::optional<LockRecord> remove_returning(const LockSelector& which) override {
    return m_inner.remove_returning(which);
  }
  void append_event(std::string_view name, std::string_view ticket) override { m_inner.append_event(name, ticket); }
  std::unique_ptr<EventFeed> follow_events(Millis await) override { return m_inner.follow_events(await); }

private:
  MemoryStore& m_inner;
  int m_failing_ticket;
  int m_tickets = 0;
};

} // namespace

TEST_CASE("A failed insert that the server applied is deleted at once (by _id and token), not left until its expiry") {
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    MemoryStore store(semantics);
    InsertAppliedThenFails failing(store);
    const Log quiet(Verbosity::quiet);
    Locker locker(failing, quiet);
    AcquireRequest request;
    request.name = "job";
    request.process = "a:1";
    request.ttl = 30s;
    request.takeover_grace = 2s;
    CHECK_THROWS_AS((void)locker.try_acquire(request), Error);
    CHECK(store.documents().empty()); // the name is free for the next run now, not in 30 s + grace
    // A second client's lock of the same name, inserted meanwhile, is never the one deleted.
    MemoryStore other(semantics);
    LockRecord theirs;
    theirs.program = theirs.name = "job";
    theirs.token = "theirs";
    REQUIRE(other.insert(theirs));
    InsertAppliedThenFails failing_other(other);
    Locker second(failing_other, quiet);
    CHECK_THROWS_AS((void)second.try_acquire(request), Error);
    REQUIRE(other.documents().size() == 1);
    CHECK(other.documents().begin()->second.token == "theirs");
  }
}

TEST_CASE("A join of several names that fails on the second leaves no ticket of the first behind") {
  MemoryStore store;
  InsertAppliedThenFails failing(store, 2);
  const Log quiet(Verbosity::quiet);
  WaitQueue queue(failing, quiet);
  CHECK_THROWS_AS(queue.join({"a", "b"}, "h:1"), Error);
  CHECK(store.tickets({}).empty()); // at once: others need not wait out the ticket's lease
}
