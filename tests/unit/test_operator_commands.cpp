// `renew` and `release` from outside a run (an operator's or a script's: by holder, token or _id) never change an
// acquisition other than the one they name; the simulator's operator (tests/sim, Client::operate) runs them with
// late and duplicated copies, these are the cases it found or that its plants stand for.
#include <doctest/doctest.h>

#include <mongolock/locker.hpp>
#include <mongolock/memory_store.hpp>

#include <optional>
#include <string>

using namespace mongolock;
using namespace std::chrono_literals;

namespace {

AcquireRequest request(const std::string& name, const std::string& process, Millis min_hold = 0ms) {
  AcquireRequest r;
  r.name = name;
  r.process = process;
  r.ttl = 30s;
  r.takeover_grace = 2s;
  r.min_hold = min_hold;
  return r;
}

const Log quiet(Verbosity::quiet);

} // namespace

TEST_SUITE_BEGIN("Operator commands");

TEST_CASE("A release by _id of an earlier acquisition leaves the next holder's lock within its minimum hold alone") {
  // Found by mongolock-sim --operator (seed 128): Locker::release, finding no document to delete, read the
  // current one and marked it released by *its* _id: an operator's release of acquisition 1 (gone) marked the next
  // holder's lock released, cutting its lease to its hold_until.
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    CAPTURE(semantics == WriteSemantics::mongodb);
    MemoryStore store(semantics);
    Locker holder(store, quiet);
    const auto first = holder.try_acquire(request("job", "a:1"));
    REQUIRE(first);
    REQUIRE(store.remove(LockSelector{.program = "job", .id = first->id}) == 1);
    Locker next(store, quiet);
    const auto second = next.try_acquire(request("job", "b:1", 60s));
    REQUIRE(second);
    const auto expiry = store.documents().at("job").expires_at;
    Locker op(store, quiet);
    CHECK(op.release(LockSelector{.program = "job", .id = first->id}).kind == ReleaseOutcome::not_holder);
    const auto& now = store.documents().at("job");
    CHECK(now.id == second->id);
    CHECK_FALSE(now.released_at);
    CHECK(now.expires_at == expiry);
    // By its own _id, the release keeps it for its minimum hold, as by token.
    CHECK(op.release(LockSelector{.program = "job", .id = second->id}).kind == ReleaseOutcome::min_hold);
    CHECK(store.documents().at("job").released_at);
  }
}

TEST_CASE("A release by holder that lands after the holder took the name again deletes nothing") {
  // Found by mongolock-sim --operator (16 in 10,000 schedules, exempted there until session 7): `release --process
  // H`, delayed on its way while H released and acquired again, deleted H's next acquisition (its filter named
  // the holder alone), and another host then ran beside H. It finds the lock first and deletes it by that _id.
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    CAPTURE(semantics == WriteSemantics::mongodb);
    MemoryStore store(semantics);
    Locker holder(store, quiet);
    const auto first = holder.try_acquire(request("job", "a:1"));
    REQUIRE(first);
    std::optional<LockRecord> second;
    store.before_remove = [&] {
      REQUIRE(store.remove(LockSelector{.program = "job", .token = first->token}) == 1);
      second = holder.try_acquire(request("job", "a:1"));
    };
    Locker op(store, quiet);
    const auto outcome = op.release(LockSelector{.program = "job", .process = "a:1"});
    REQUIRE(second);
    CHECK(outcome.kind == ReleaseOutcome::not_holder);
    CHECK(outcome.found == first->id);
    REQUIRE(store.documents().count("job") == 1);
    CHECK(store.documents().at("job").id == second->id);
  }
}

TEST_CASE("A release by holder finds the lock, then deletes it by _id; by _id and token it is one command") {
  MemoryStore store;
  Locker holder(store, quiet);
  const auto lock = holder.try_acquire(request("job", "a:1"));
  REQUIRE(lock);
  Locker op(store, quiet);
  CHECK(op.release(LockSelector{.program = "job", .process = "b:1"}).kind == ReleaseOutcome::not_holder);
  CHECK(store.lock_writes().size() == 1); // another holder's: no write sent at all
  CHECK(op.release(LockSelector{.program = "job", .process = "a:1"}).kind == ReleaseOutcome::released);
  CHECK(store.documents().count("job") == 0);
  REQUIRE(store.lock_writes().size() == 2);
  CHECK(store.lock_writes().back().op == "delete");
}

TEST_CASE("A run's renewal outstamped by a `renew --token` renews above it also when its lock records a place") {
  // Red team 4, F3's rule on a lock of `run`, which records the host's boot and PID namespace: outstamped() asks
  // the place only of a selector that names one (by holder); the heartbeat's names _id and token (mutation test:
  // the place asked of every selector dropped the renewal of such a lock as not this holder's).
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    MemoryStore store(semantics);
    Locker holder(store, quiet);
    auto r = request("job", "a:1");
    r.boot_id = "boot-1";
    r.pid_ns = "pid:[4026531836]";
    r.pid_start = 777;
    auto lock = holder.try_acquire(r);
    REQUIRE(lock);
    const auto ahead = store.clock().now() + 4s;
    Locker op(store, quiet);
    REQUIRE(store.renew(LockSelector{.program = "job", .token = lock->token}, ahead + 30s, ahead, 30s) == 1);
    REQUIRE(holder.renew(*lock, 30s, LeaseClock::now()));
    CHECK(lock->renewed_at > ahead);
    CHECK(store.documents().at("job").renewed_at == lock->renewed_at);
  }
}

TEST_CASE("A release into the minimum hold of a lock waiters wait for wakes them at once") {
  // The head learns the earlier expiry (hold_until) now rather than at its next look (mutation test: the event
  // after mark_released deleted; only latency, which no simulator invariant bounds that tightly).
  MemoryStore store;
  Locker holder(store, quiet);
  auto r = request("job", "a:1", 60s);
  r.waiters = true; // taken from the queue: its release wakes it
  const auto lock = holder.try_acquire(r);
  REQUIRE(lock);
  const auto feed = store.follow_events(0ms);
  CHECK(holder.release(LockSelector{.program = "job", .id = lock->id, .token = lock->token}).kind ==
        ReleaseOutcome::min_hold);
  const auto event = feed->wait({"job"});
  REQUIRE(event);
  CHECK(event->name == "job");
}

TEST_SUITE_END();
