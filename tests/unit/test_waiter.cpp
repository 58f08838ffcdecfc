// Waiting (--wait) as a state machine on the in-memory store: who follows the events, who polls, and
// that the line is served in order whatever state each waiter is in.
#include <doctest/doctest.h>

#include <mongolock/memory_store.hpp>
#include <mongolock/waiter.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <thread>

using namespace mongolock;
using namespace std::chrono_literals;

namespace {

AcquireRequest request(const std::string& name, const std::string& process) {
  AcquireRequest r;
  r.name = name;
  r.process = process;
  r.ttl = 30s;
  r.takeover_grace = 2s;
  return r;
}

const Log quiet(Verbosity::quiet);

// Pauses are cut to at most 2 ms of real time: the test runs the protocol, not its timing.
bool short_sleep(Millis d) {
  std::this_thread::sleep_for(std::min(d, Millis(2)));
  return true;
}

using State = Waiter::State;

} // namespace

TEST_SUITE_BEGIN("Waiter");

TEST_CASE("far_interval: later the farther back, at most far_max, sooner while the line moves") {
  QueueTiming t;
  t.followers = 2;
  t.far_step = 400ms;
  t.far_max = 5000ms;
  CHECK(far_interval(t, 3, 0, 0ms) == 400ms);
  CHECK(far_interval(t, 5, 0, 0ms) == 1200ms);
  CHECK(far_interval(t, 30, 0, 0ms) == 5000ms);
  // Moved from place 10 to place 6 in 800 ms: 200 ms a place, 4 places to go: half of 800 ms.
  CHECK(far_interval(t, 6, 10, 800ms) == 400ms);
  // Not moved (or rejoined farther back): by place only.
  CHECK(far_interval(t, 6, 6, 800ms) == 1600ms);
  CHECK(far_interval(t, 6, 4, 800ms) == 1600ms);
  // Never below 50 ms, however fast the line moves.
  CHECK(far_interval(t, 3, 20, 10ms) == 50ms);
}

TEST_CASE("Only the first in line follow the events; the line is served in order as it moves up") {
  MemoryStore store(WriteSemantics::ferretdb_v1);
  Locker holder(store, quiet);
  auto held = holder.try_acquire(request("job", "h:1"));
  REQUIRE(held);

  WaitPolicy policy{.wait = Millis::max()};
  policy.queue.followers = 2;
  policy.queue.far_step = 1ms; // far waiters look again at once: the order, not the timing, is tested
  policy.queue.far_max = 5ms;
  std::vector<std::unique_ptr<Locker>> lockers;
  std::vector<std::unique_ptr<Waiter>> waiters;
  for (int i = 0; i < 4; ++i) {
    lockers.push_back(std::make_unique<Locker>(store, quiet));
    waiters.push_back(
        std::make_unique<Waiter>(*lockers.back(), std::vector{request("job", "w:" + std::to_string(i))}, policy));
    CHECK(waiters.back()->step(short_sleep)); // joins the queue and finds its place
  }
  CHECK(waiters[0]->state() == State::head);
  CHECK(waiters[1]->state() == State::near);
  CHECK(waiters[2]->state() == State::far);
  CHECK(waiters[3]->state() == State::far);

  // The holder learns that someone waits (its next renewal marks the lock), then releases: its release
  // appends the wake-up event.
  std::vector<LockRecord> locks{*held};
  CHECK(holder.mark_if_waited(locks) == 1);
  REQUIRE(holder.renew(locks.front(), 30s, LeaseClock::now()));
  REQUIRE(holder.release(LockSelector{.program = "job", .id = held->id, .token = held->token}).kind ==
          ReleaseOutcome::released);

  // Every waiter steps in turn; a new holder leaves the queue at once (its job started) and releases
  // three rounds later, so those behind it have time to look at the queue meanwhile.
  std::vector<int> order;
  std::vector<bool> was_near(waiters.size(), false);
  std::optional<std::size_t> holding;
  int held_rounds = 0;
  for (int round = 0; round < 2000 && order.size() < waiters.size(); ++round) {
    if (holding && ++held_rounds > 3) {
      const auto& lock = waiters[*holding]->outcome().locks.front();
      REQUIRE(lockers[*holding]->release(LockSelector{.program = "job", .id = lock.id, .token = lock.token}).kind ==
              ReleaseOutcome::released);
      holding.reset();
    }
    for (std::size_t i = 0; i < waiters.size(); ++i) {
      auto& w = *waiters[i];
      if (w.state() == State::acquired) continue;
      if (w.state() == State::near) was_near[i] = true;
      if (w.step(short_sleep)) continue;
      REQUIRE(w.state() == State::acquired);
      CHECK_FALSE(holding); // never two at once
      holding = i;
      held_rounds = 0;
      order.push_back(static_cast<int>(i));
      auto& outcome = w.outcome();
      REQUIRE(outcome.locks.size() == 1);
      CHECK(outcome.locks.front().waiters); // taken while following the events: its release wakes the next
      outcome.leave_queue();
    }
  }
  CHECK(order == std::vector<int>{0, 1, 2, 3});
  // Those that started far back moved up to follow the events before their turn.
  CHECK(was_near[2]);
  CHECK(was_near[3]);
}

TEST_CASE("A waiter that times out leaves no ticket; without --wait there is one attempt and no queue") {
  MemoryStore store;
  Locker holder(store, quiet);
  REQUIRE(holder.try_acquire(request("job", "h:1")));
  Locker other(store, quiet);
  WaitPolicy policy{.wait = Millis(0)};
  Waiter waiter(other, {request("job", "w:1")}, policy);
  while (waiter.step(short_sleep)) {}
  CHECK(waiter.state() == State::timed_out);
  CHECK(waiter.outcome().held == "job");
  CHECK(waiter.outcome().locks.empty());
  CHECK(store.tickets({"job"}).size() == 1); // still queued while the Waiter lives...
  {
    Waiter gone(other, {request("job", "w:2")}, policy);
    while (gone.step(short_sleep)) {}
  }
  CHECK(store.tickets({"job"}).size() == 1); // ...and its ticket is deleted with it
  auto once = other.acquire_all({request("job", "w:3")}, WaitPolicy{}, short_sleep);
  CHECK(once.locks.empty());
  CHECK(once.held == "job");
  CHECK(store.tickets({"job"}).size() == 1);
}

TEST_SUITE_END();
