// HeartbeatSteps (heartbeat.hpp) on the in-memory store: what a step sends once the heartbeat was given up,
// a reply at the very instant of the renew deadline, and the bound of the queue read after a renewal.
#include <doctest/doctest.h>

#include <mongolock/heartbeat.hpp>
#include <mongolock/lease.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/memory_store.hpp>

#include <thread>

using namespace mongolock;
using namespace std::chrono_literals;

namespace {

// The lock "job" held by "a:1" on `store` with `ttl`, and its lease timing: what a run's heartbeat renews.
struct Held {
  Held(MemoryStore& store, Millis ttl)
      : locker(store, quiet), timing(make_lease_timing(ttl, std::nullopt, std::nullopt, std::nullopt)) {
    AcquireRequest request;
    request.name = "job";
    request.process = "a:1";
    request.ttl = ttl;
    request.takeover_grace = 2s;
    auto lock = locker.try_acquire(request);
    REQUIRE(lock);
    locks.push_back(*lock);
  }
  const Log quiet{Verbosity::quiet};
  Locker locker;
  std::vector<LockRecord> locks;
  LeaseTiming timing;
};

} // namespace

TEST_CASE("After give_up() a step sends no renewal and ends the heartbeat (Supervisor's lease lost, job ended)") {
  MemoryStore store;
  Held held(store, 30s);
  auto& [quiet, locker, locks, timing] = held;
  int renewed = 0;
  HeartbeatSteps steps(locker, locks, timing, quiet, [&](LocalTime) { ++renewed; });
  const auto writes = store.lock_writes().size(); // the insert
  steps.give_up();
  CHECK_FALSE(steps.step());
  CHECK(store.lock_writes().size() == writes); // nothing sent after give_up()
  CHECK(renewed == 0);
}

TEST_CASE("A renewal answered at the very instant of the renew deadline does not count (a tie is late)") {
  struct Fixed final : TimeSource {
    LocalTime t{std::chrono::seconds(1000)};
    LocalTime now() noexcept override { return t; }
  } fixed;
  struct Restore {
    TimeSource* previous;
    ~Restore() { set_time_source(previous); }
  } restore{set_time_source(&fixed)};
  // FerretDB v1's semantics: its `between` hook runs inside the renewal, where the reply's time is set.
  MemoryStore store(WriteSemantics::ferretdb_v1);
  Held held(store, 30s);
  auto& [quiet, locker, locks, timing] = held;
  int renewed = 0;
  HeartbeatSteps steps(locker, locks, timing, quiet, [&](LocalTime) { ++renewed; });
  const auto deadline = steps.deadline();
  fixed.t = steps.next_wakeup();
  REQUIRE(fixed.t < deadline);
  store.between = [&] { fixed.t = deadline; }; // the server applies it; the reply is read at the deadline
  CHECK_FALSE(steps.step());
  CHECK(renewed == 0);
  CHECK(steps.deadline() == deadline);
}

// Issue 27: the queue read after a renewal ran on what was left of the renewal's call bound (a few ms
// after a slow renewal), and a reconnect inside it escaped that bound. It gets limits of its own.
TEST_CASE("The queue read after a renewal runs under a bound of its own, not the renewal's") {
  MemoryStore store;
  Held held(store, 1500ms);
  auto& [quiet, locker, locks, timing] = held;
  int renewed = 0;
  HeartbeatSteps steps(locker, locks, timing, quiet, [&](LocalTime) { ++renewed; });
  std::this_thread::sleep_until(steps.next_wakeup());
  REQUIRE(steps.step());
  REQUIRE(renewed == 1);
  const auto& limits = store.tickets_limits();
  REQUIRE(limits.has_value());
  CHECK_FALSE(limits->server.has_value()); // the renewal's limits carry its maxTimeMS
  CHECK(limits->total >= 100ms);
  CHECK(limits->total <= timing.renew_interval / 2);
  CHECK(limits->connect == limits->total);
  CHECK_FALSE(limits->reread_clock); // the renewal just read the server's clock
}
