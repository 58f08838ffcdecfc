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

TEST_CASE("After give_up() a step sends no renewal and ends the heartbeat (Supervisor's lease lost, job ended)") {
  MemoryStore store;
  const Log quiet(Verbosity::quiet);
  Locker locker(store, quiet);
  AcquireRequest request;
  request.name = "job";
  request.process = "a:1";
  request.ttl = 30s;
  request.takeover_grace = 2s;
  auto lock = locker.try_acquire(request);
  REQUIRE(lock);
  std::vector<LockRecord> locks{*lock};
  const auto timing = make_lease_timing(30s, std::nullopt, std::nullopt, std::nullopt);
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
  const Log quiet(Verbosity::quiet);
  Locker locker(store, quiet);
  AcquireRequest request;
  request.name = "job";
  request.process = "a:1";
  request.ttl = 30s;
  request.takeover_grace = 2s;
  auto lock = locker.try_acquire(request);
  REQUIRE(lock);
  std::vector<LockRecord> locks{*lock};
  const auto timing = make_lease_timing(30s, std::nullopt, std::nullopt, std::nullopt);
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
  const Log quiet(Verbosity::quiet);
  Locker locker(store, quiet);
  AcquireRequest request;
  request.name = "job";
  request.process = "a:1";
  request.ttl = 1500ms;
  request.takeover_grace = 2s;
  auto lock = locker.try_acquire(request);
  REQUIRE(lock);
  std::vector<LockRecord> locks{*lock};
  const auto timing = make_lease_timing(1500ms, std::nullopt, std::nullopt, std::nullopt);
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
