// Transient server errors and a queued waiter (red team 6, F5): which errors are transient (Error::transient()),
// when a queued Waiter pauses a poll interval and tries again (Waiter::pause_after), and Locker::acquire_all's loop
// around it. On a fixed clock (LeaseClock's TimeSource), so that pauses and the wait's deadline are exact.
#include <doctest/doctest.h>

#include <mongolock/error.hpp>
#include <mongolock/memory_store.hpp>
#include <mongolock/queue.hpp>
#include <mongolock/waiter.hpp>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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

// A clock that moves only when told (every pause of a sleeper below moves it by the pause).
struct Fixed final : TimeSource {
  LocalTime t{std::chrono::seconds(1000)};
  LocalTime now() noexcept override { return t; }
};

struct Installed {
  explicit Installed(TimeSource& source) : previous(set_time_source(&source)) {}
  ~Installed() { set_time_source(previous); }
  Installed(const Installed&) = delete;
  Installed& operator=(const Installed&) = delete;
  TimeSource* previous;
};

using State = Waiter::State;

// `inner`, except that the next `fail_highest` reads of the queue's highest ticket fail as a server that cannot
// be reached (a transient error: nothing was changed).
class CutReads final : public LockStore {
public:
  explicit CutReads(MemoryStore& inner) : m_inner(inner) {}
  int fail_highest = 0;
  std::vector<std::optional<Millis>> limits; // every reconnect()'s CallLimits::total (nullopt: lifted)
  const ServerClock& clock() override { return m_inner.clock(); }
  void reconnect(std::optional<CallLimits> call) override {
    limits.push_back(call ? std::optional(call->total) : std::nullopt);
    m_inner.reconnect(call);
  }
  void ensure_indexes() override { m_inner.ensure_indexes(); }
  bool insert(LockRecord& lock) override { return m_inner.insert(lock); }
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
  std::int64_t highest_ticket() override {
    if (fail_highest > 0) {
      --fail_highest;
      throw unreachable_error("find (highest ticket): server selection failed");
    }
    return m_inner.highest_ticket();
  }
  bool insert_ticket(TicketRecord& ticket) override { return m_inner.insert_ticket(ticket); }
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
};

// Steps `waiter` (its pauses move `clock`) until it is queued behind the holder (far, near or head).
void queue_up(Waiter& waiter, Fixed& clock) {
  const auto sleep = [&](Millis d) {
    clock.t += d;
    return true;
  };
  for (int i = 0; i < 5 && (waiter.state() == State::start); ++i)
    REQUIRE(waiter.step(sleep));
  REQUIRE((waiter.state() == State::far || waiter.state() == State::near || waiter.state() == State::head));
}

} // namespace

TEST_SUITE_BEGIN("Transient errors");

TEST_CASE("A server that cannot be reached is transient; a write of unknown outcome and other errors are not") {
  CHECK(unreachable_error("cannot reach MongoDB").transient());
  CHECK(unreachable_error("cannot reach MongoDB").exit_code() == k_exit_unavailable);
  CHECK_FALSE(unavailable_error("insert of lock 'job': outcome unknown").transient());
  CHECK_FALSE(Error(k_exit_unavailable, "plain").transient());
  CHECK_FALSE(usage_error("bad").transient());
  CHECK_FALSE(internal_error("bug").transient());
}

TEST_CASE("A queued waiter pauses a poll interval after a transient error, up to its deadline; never otherwise") {
  Fixed clock;
  const Installed installed(clock);
  MemoryStore store;
  Locker holder(store, quiet);
  REQUIRE(holder.try_acquire(request("job", "h:1")));
  Locker other(store, quiet);
  WaitPolicy policy{.wait = Millis(10'000)};
  policy.queue.poll = 750ms;
  Waiter waiter(other, {request("job", "w:1")}, policy);
  std::vector<Millis> pauses;
  bool go_on = true;
  const auto sleep = [&](Millis d) {
    pauses.push_back(d);
    return go_on;
  };
  const auto transient = unreachable_error("server selection failed");
  // Not queued yet (its first attempt): the caller exits 69 as before.
  REQUIRE(waiter.state() == State::start);
  CHECK_FALSE(waiter.pause_after(transient, sleep));
  CHECK(pauses.empty());
  const auto started = clock.t;
  queue_up(waiter, clock);
  const auto deadline = started + 10s;
  // Queued: a transient error pauses a poll interval; the event cursor is dropped (its connection is gone).
  CHECK_FALSE(waiter.pause_after(unavailable_error("insert: outcome unknown"), sleep));
  CHECK(pauses.empty());
  REQUIRE(waiter.following());
  REQUIRE(waiter.pause_after(transient, sleep));
  REQUIRE(pauses.size() == 1);
  CHECK(pauses.back() == 750ms);
  CHECK_FALSE(waiter.following());
  CHECK(waiter.state() != State::interrupted);
  // Near its deadline: the pause ends with the wait.
  clock.t = deadline - 100ms;
  REQUIRE(waiter.pause_after(transient, sleep));
  CHECK(pauses.back() == 100ms);
  // At the deadline (a tie is over): no pause, the caller exits 69.
  clock.t = deadline;
  const auto before = pauses.size();
  CHECK_FALSE(waiter.pause_after(transient, sleep));
  CHECK(pauses.size() == before);
  // A signal during the pause ends the wait (interrupted), as any pause.
  clock.t = deadline - 1s;
  go_on = false;
  CHECK(waiter.pause_after(transient, sleep));
  CHECK(waiter.state() == State::interrupted);
  // Once final, no pause.
  go_on = true;
  CHECK_FALSE(waiter.pause_after(transient, sleep));
}

TEST_CASE("A waiter that waits forever pauses a poll interval after a transient error, however late") {
  Fixed clock;
  const Installed installed(clock);
  MemoryStore store;
  Locker holder(store, quiet);
  REQUIRE(holder.try_acquire(request("job", "h:1")));
  Locker other(store, quiet);
  WaitPolicy policy{.wait = Millis::max()};
  policy.queue.poll = 750ms;
  Waiter waiter(other, {request("job", "w:1")}, policy);
  queue_up(waiter, clock);
  clock.t += std::chrono::hours(24);
  std::optional<Millis> paused;
  REQUIRE(waiter.pause_after(unreachable_error("server selection failed"), [&](Millis d) {
    paused = d;
    return true;
  }));
  CHECK(paused == 750ms);
}

TEST_CASE("acquire_all rides out a transient error while queued and takes the lock; another error ends it") {
  Fixed clock;
  const Installed installed(clock);
  for (const bool transient : {true, false}) {
    CAPTURE(transient);
    MemoryStore store;
    Locker holder(store, quiet);
    auto held = holder.try_acquire(request("job", "h:1"));
    REQUIRE(held);
    Locker other(store, quiet);
    WaitPolicy policy{.wait = Millis(60'000), .push = false};
    bool armed = false;
    bool thrown = false;
    // Between the read and the write of the waiter's next update (its tickets' renewal): the server fails.
    store.between = [&] {
      if (!armed) return;
      armed = false;
      thrown = true;
      if (transient) throw unreachable_error("renewal of a queue ticket: server selection failed");
      throw unavailable_error("renewal of a queue ticket: not primary");
    };
    int pauses = 0;
    bool released = false;
    const auto sleep = [&](Millis d) {
      clock.t += d;
      if (++pauses == 1) armed = true;
      if (thrown && !released) {
        released = true;
        REQUIRE(holder.release(LockSelector{.program = "job", .id = held->id, .token = held->token}).kind ==
                ReleaseOutcome::released);
      }
      return pauses < 1000;
    };
    if (transient) {
      const auto outcome = other.acquire_all({request("job", "w:1")}, policy, sleep);
      CHECK(thrown);
      REQUIRE(outcome.locks.size() == 1);
      CHECK(store.find("job")->id == outcome.locks.front().id);
      CHECK_FALSE(outcome.interrupted);
    } else {
      CHECK_THROWS_AS((void)other.acquire_all({request("job", "w:1")}, policy, sleep), Error);
      CHECK(thrown);
      CHECK(store.find("job")->id == held->id); // the run exits 69 behind the holder, which it never passed
    }
  }
}

TEST_CASE("A rejoin cut by a transient error joins again at the next step (the waiter does not drop out of line)") {
  // Found by mongolock-sim (a default schedule once waiters pause after transient errors): a far waiter whose ticket
  // had lapsed rejoined, the rejoin's first read failed (the server away), Waiter::pause_after paused, and from
  // then on keep_alive() found no ticket to renew and said all was well: out of the line for the rest of its wait,
  // looking again every millisecond (its tickets' renewal long due).
  Fixed clock;
  const Installed installed(clock);
  MemoryStore inner;
  CutReads store(inner);
  const QueueTiming timing;
  WaitQueue queue(store, quiet, timing);
  queue.join({"job"}, "w:1");
  REQUIRE(inner.tickets({"job"}).size() == 1);
  // Its ticket lapsed and was purged as dead while the server was away; its renewal is due.
  REQUIRE(inner.remove_ticket(queue.ticket_of("job"), std::nullopt) == 1);
  clock.t += timing.ticket_lease;
  store.fail_highest = 1;
  CHECK_THROWS_AS((void)queue.keep_alive(timing.ticket_lease), Error); // lost: it rejoins, and that is cut
  CHECK(inner.tickets({"job"}).empty());
  clock.t += timing.poll;                             // Waiter::pause_after's pause
  CHECK_FALSE(queue.keep_alive(timing.ticket_lease)); // joined again
  const auto now = inner.tickets({"job"});
  REQUIRE(now.size() == 1);
  CHECK(now.front().process == "w:1");
  CHECK(queue.ticket_of("job") == now.front().id);
}

TEST_CASE("Waiters whose tickets lapsed while the server could not be reached take their old seq again") {
  // Red team 7, F4: through an outage longer than the ticket lease every waiter's ticket lapsed, and they joined
  // again at the back in the order they came back (b c d queued, served c d b). Each takes its old seq again when
  // it is free, so that they keep their order whatever the order of return.
  Fixed clock;
  const Installed installed(clock);
  MemoryStore inner;
  CutReads store(inner);
  const QueueTiming timing;
  std::vector<std::unique_ptr<WaitQueue>> queues;
  for (const auto* process : {"b:1", "c:1", "d:1"}) {
    queues.push_back(std::make_unique<WaitQueue>(store, quiet, timing));
    queues.back()->join({"job"}, process);
  }
  const auto seqs = [&] {
    std::vector<std::pair<std::int64_t, std::string>> out;
    for (const auto& t : inner.tickets({"job"}))
      out.emplace_back(t.seq, t.process);
    return out;
  };
  const auto before = seqs();
  REQUIRE(before.size() == 3);
  clock.t += timing.ticket_lease + timing.purge_after; // every ticket lapsed (and may be purged as dead)
  // b's was purged by a reader; c's and d's are still there, expired.
  REQUIRE(inner.remove_ticket(queues[0]->ticket_of("job"), std::nullopt) == 1);
  for (auto i : {2, 1, 0}) { // back in the reverse order
    queues[static_cast<std::size_t>(i)]->unreachable();
    CHECK_FALSE(queues[static_cast<std::size_t>(i)]->keep_alive(timing.ticket_lease)); // lost: joined again
    CHECK(queues[static_cast<std::size_t>(i)]->back_in_place());
  }
  CHECK(seqs() == before);
  // The first in line reads itself first again; the others see it ahead.
  CHECK(queues[0]->at_head());
  CHECK_FALSE(queues[2]->at_head());
  CHECK(queues[2]->position() == 3);
}

TEST_CASE("A lapsed ticket rejoins at the back unless the server could not be reached, and when its seq is taken") {
  Fixed clock;
  const Installed installed(clock);
  MemoryStore inner;
  CutReads store(inner);
  const QueueTiming timing;
  WaitQueue first(store, quiet, timing);
  WaitQueue second(store, quiet, timing);
  first.join({"job"}, "a:1");
  second.join({"job"}, "b:1");
  const auto a = *first.seq();
  // Stopped (not an outage): at the back, behind b.
  clock.t += timing.ticket_lease;
  REQUIRE(second.keep_alive(timing.ticket_lease) == false); // b lapsed too: it rejoins at the back
  CHECK_FALSE(first.keep_alive(timing.ticket_lease));
  CHECK_FALSE(first.back_in_place());
  CHECK(*first.seq() > *second.seq());
  // After an outage, with its old seq taken by another waiter's ticket: at the back again.
  const auto old = *first.seq();
  clock.t += timing.ticket_lease;
  REQUIRE(inner.remove_ticket(first.ticket_of("job"), std::nullopt) == 1);
  TicketRecord other{.id = {}, .name = "job", .seq = old, .process = "x:1", .since = {}, .expires_at = {}};
  other.expires_at = inner.clock().now() + 60s;
  REQUIRE(inner.insert_ticket(other));
  first.unreachable();
  CHECK_FALSE(first.keep_alive(timing.ticket_lease));
  CHECK_FALSE(first.back_in_place());
  CHECK(*first.seq() > old);
  CHECK(a < old);
}

TEST_CASE("A ticket renewal is cut when the lease runs out, a queue read before the lease's last answer limit") {
  // Red team 7, F4: on a silent connection a renewal hung for the socket timeout (10 s), past the 4 s lease.
  Fixed clock;
  const Installed installed(clock);
  MemoryStore inner;
  CutReads store(inner);
  const QueueTiming timing;
  WaitQueue queue(store, quiet, timing);
  queue.join({"job"}, "w:1");
  store.limits.clear();
  (void)queue.at_head(); // the first read after the join (the Waiter's start): not cut
  CHECK(store.limits.empty());
  clock.t += timing.ticket_lease * 3 / 8; // due
  REQUIRE(queue.keep_alive(timing.ticket_lease));
  REQUIRE(store.limits.size() == 2);
  CHECK(store.limits[0] == timing.ticket_lease - timing.ticket_lease * 3 / 8); // the lease left
  // A renewal answered later than the answer limit (a slow network, not a silent one) still does not count: the
  // faults_exclusion suite's slow_ticket_renewal_rejoins_at_the_back.
  CHECK_FALSE(store.limits[1]); // lifted again after the call
  store.limits.clear();
  clock.t += 1s; // 3 s of the lease left: the read may take 2 s
  (void)queue.at_head();
  REQUIRE(store.limits.size() == 2);
  CHECK(store.limits[0] == timing.ticket_lease - 1s - queue.answer_limit());
  CHECK_FALSE(store.limits[1]);
  store.limits.clear();
  clock.t += 2s; // 1 s left: at least the answer limit
  (void)queue.at_head();
  CHECK(store.limits[0] == queue.answer_limit());
}

TEST_SUITE_END();
