// Waiting (--wait) as a state machine on the in-memory store: who follows the events, who polls, and
// that the line is served in order whatever state each waiter is in.
#include <doctest/doctest.h>

#include <mongolock/memory_store.hpp>
#include <mongolock/waiter.hpp>

#include <algorithm>
#include <limits>
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

TEST_CASE("A head whose event cursor failed reads the queue before it takes the lock (run --replace)") {
  // The cursor closed (FerretDB v1 trims capped collections once a minute) and, in the gap, a newer
  // replacing run joined ahead and announced itself; a follow-up event made that announcement the older
  // of the two newest, which a new cursor passes over. The old replacing run must still learn of it.
  MemoryStore store;
  Locker holder(store, quiet);
  auto held = holder.try_acquire(request("job", "h:1"));
  REQUIRE(held);
  WaitPolicy policy{.wait = Millis::max(), .replace = true};
  Locker old_locker(store, quiet);
  Waiter old_run(old_locker, {request("job", "o:1")}, policy);
  CHECK(old_run.step(short_sleep));
  REQUIRE(old_run.state() == State::head);

  store.break_feeds();
  Locker new_locker(store, quiet);
  Waiter new_run(new_locker, {request("job", "n:1")}, policy);
  CHECK(new_run.step(short_sleep));
  CHECK(new_run.state() == State::head);
  store.append_event("other", "");

  for (int i = 0; i < 5 && old_run.step(short_sleep); ++i) {}
  CHECK(old_run.state() == State::superseded);

  // The holder ends: the newer replacing run takes the lock; the superseded one never does.
  REQUIRE(holder.release(LockSelector{.program = "job", .id = held->id, .token = held->token}).kind ==
          ReleaseOutcome::released);
  for (int i = 0; i < 10 && new_run.step(short_sleep); ++i) {}
  CHECK(new_run.state() == State::acquired);
  CHECK(store.find("job")->process == "n:1");
}

TEST_CASE("A waiter whose event cursor could not be opened follows the events once it can, then polls") {
  MemoryStore store;
  Locker holder(store, quiet);
  auto held = holder.try_acquire(request("job", "h:1"));
  REQUIRE(held);
  WaitPolicy policy{.wait = Millis::max()};
  Locker locker(store, quiet);
  store.fail_follows(1); // "database is locked" once, while others create the events collection
  Waiter w(locker, {request("job", "w:1")}, policy);
  CHECK(w.step(short_sleep));
  REQUIRE(w.state() == State::head);
  CHECK_FALSE(w.following());
  CHECK(w.step(short_sleep));
  CHECK(w.following()); // tried again at the next step (it used to poll for the whole wait)
  // One that keeps failing polls after a few tries.
  MemoryStore store2;
  Locker holder2(store2, quiet);
  REQUIRE(holder2.try_acquire(request("job", "h:1")));
  Locker locker2(store2, quiet);
  store2.fail_follows(100);
  Waiter w2(locker2, {request("job", "w:2")}, policy);
  for (int i = 0; i < 8; ++i)
    CHECK(w2.step(short_sleep));
  CHECK_FALSE(w2.following());
  store2.fail_follows(0);
  CHECK(w2.step(short_sleep));
  CHECK_FALSE(w2.following()); // gave up following: polls
}

TEST_CASE("A cursor that fails now and then, working in between, is made anew each time: the waiter never polls "
          "for good") {
  // FerretDB v1 trims capped collections once a minute, closing the cursors: a long wait meets that again and
  // again. Only failures in a row (k_refollow_limit) make a waiter give up following (it used to count them
  // over the whole wait: after the third trim the head polled for the rest of it).
  MemoryStore store;
  Locker holder(store, quiet);
  REQUIRE(holder.try_acquire(request("job", "h:1")));
  WaitPolicy policy{.wait = Millis::max()};
  Locker locker(store, quiet);
  Waiter w(locker, {request("job", "w:1")}, policy);
  CHECK(w.step(short_sleep));
  REQUIRE(w.state() == State::head);
  REQUIRE(w.following());
  for (int trim = 0; trim < 6; ++trim) {
    store.break_feeds();
    CHECK(w.step(short_sleep)); // the failed wait, followed anew at once
    CHECK(w.following());
    CHECK(w.step(short_sleep)); // a wait on the new cursor that works
    CHECK(w.following());
  }
}

TEST_CASE("An older replacing run that missed being passed is superseded by the lock's newer holder") {
  // Without push (or with every event lost), the old replacing run, first in line, looks only at the
  // lock; a newer replacing run joins ahead, and takes the lock as soon as it is free.
  MemoryStore store;
  Locker holder(store, quiet);
  auto held = holder.try_acquire(request("job", "h:1"));
  REQUIRE(held);
  WaitPolicy policy{.wait = Millis::max(), .push = false, .replace = true};
  Locker old_locker(store, quiet);
  Waiter old_run(old_locker, {request("job", "o:1")}, policy);
  CHECK(old_run.step(short_sleep));
  REQUIRE(old_run.state() == State::head);
  Locker new_locker(store, quiet);
  Waiter new_run(new_locker, {request("job", "n:1")}, policy);
  CHECK(new_run.step(short_sleep));
  REQUIRE(holder.release(LockSelector{.program = "job", .id = held->id, .token = held->token}).kind ==
          ReleaseOutcome::released);
  for (int i = 0; i < 10 && new_run.step(short_sleep); ++i) {}
  REQUIRE(new_run.state() == State::acquired);
  new_run.outcome().leave_queue(); // its ticket is gone: only the lock tells that it passed the old run
  const auto lock = store.find("job");
  REQUIRE(lock);
  CHECK(lock->process == "n:1");
  REQUIRE(lock->replace_seq);
  CHECK(*lock->replace_seq < 0);

  CHECK_FALSE(old_run.step(short_sleep));
  CHECK(old_run.state() == State::superseded);
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("WaitQueue");

TEST_CASE("A ticket that keeps a far waiter's long lease among the first in line is skipped as dead") {
  MemoryStore store;
  QueueTiming t;
  t.followers = 3;
  t.far_max = 10ms; // stale_after() = far_max + push_check + 2 x answer_limit() = 40 ms here
  t.push_check = 10ms;
  t.purge_after = 20ms;
  const auto plant = [&](std::int64_t seq, Millis lease) {
    TicketRecord ticket;
    ticket.name = "job";
    ticket.seq = seq;
    ticket.process = "d:" + std::to_string(seq);
    ticket.since = store.clock().now();
    ticket.expires_at = store.clock().now() + lease;
    REQUIRE(store.insert_ticket(ticket));
    return ticket;
  };
  const auto dead = plant(1, t.far_ticket_lease); // a waiter killed far back, its ticket now first in line
  WaitQueue w(store, quiet, t);
  w.join({"job"}, "w:9");
  CHECK_FALSE(w.at_head()); // seen once: still ahead
  CHECK(w.position() == 2);
  std::this_thread::sleep_for(60ms);
  CHECK(w.at_head());                        // kept its long lease for stale_after(): skipped
  CHECK(store.tickets({"job"}).size() == 2); // skipped, not deleted (it has not expired)
  // Renewed (still far as it sees itself, with a long lease): watched afresh, ahead again.
  const auto now = store.clock().now();
  REQUIRE(store.renew_ticket(dead.id, now, now + t.far_ticket_lease + 1s) == 1);
  CHECK_FALSE(w.at_head());

  // A live waiter renews to the short lease once it moves up: never skipped.
  MemoryStore store2;
  TicketRecord live;
  live.name = "job";
  live.seq = 1;
  live.process = "l:1";
  live.since = store2.clock().now();
  live.expires_at = store2.clock().now() + t.ticket_lease;
  REQUIRE(store2.insert_ticket(live));
  WaitQueue w2(store2, quiet, t);
  w2.join({"job"}, "w:9");
  CHECK_FALSE(w2.at_head());
  std::this_thread::sleep_for(60ms);
  CHECK_FALSE(w2.at_head());
  CHECK(w2.position() == 2);
}

TEST_CASE("Four dead far waiters ahead are skipped together, not one after another (issue 26 item 9)") {
  MemoryStore store;
  QueueTiming t;
  t.followers = 3;
  t.far_max = 10ms; // stale_after() = far_max + push_check + 2 x answer_limit() = 40 ms here
  t.push_check = 10ms;
  t.purge_after = 20ms;
  t.ticket_lease = 100ms;
  t.far_ticket_lease = 400ms;
  const auto overdue = 180ms; // WaitQueue::renewal_overdue(): 3/8 x 400 + push_check 10 + 2 x answer_limit 10
  const auto plant = [&](std::int64_t seq, Millis lease) {
    TicketRecord ticket;
    ticket.name = "job";
    ticket.seq = seq;
    ticket.process = "d:" + std::to_string(seq);
    ticket.since = store.clock().now();
    ticket.expires_at = store.clock().now() + lease;
    REQUIRE(store.insert_ticket(ticket));
    return ticket;
  };
  for (std::int64_t seq = 1; seq <= 4; ++seq)
    (void)plant(seq, t.far_ticket_lease); // killed far back just after a renewal; the line has reached them
  // Live waiters behind them: three that renew to the short lease (the first in line once the dead ones
  // are skipped) and one far back that renews its far lease every 3/8 of it.
  std::vector<TicketRecord> live;
  for (std::int64_t seq = 6; seq <= 8; ++seq)
    live.push_back(plant(seq, t.ticket_lease));
  const auto far = plant(9, t.far_ticket_lease);
  WaitQueue w(store, quiet, t);
  w.join({"job"}, "w:10");
  const auto began = LeaseClock::now();
  CHECK_FALSE(w.at_head());
  CHECK(w.position() == 9);
  // Until the dead ones are renewal_overdue() past their last renewal (the first three may go sooner: among
  // the first in line for stale_after()); the live ones renew on time and never count as dead.
  while (LeaseClock::now() - began < overdue + 40ms) {
    std::this_thread::sleep_for(10ms);
    const auto now = store.clock().now();
    for (const auto& ticket : live)
      REQUIRE(store.renew_ticket(ticket.id, now, now + t.ticket_lease) == 1);
    REQUIRE(store.renew_ticket(far.id, now, now + t.far_ticket_lease) == 1);
    (void)w.at_head();
  }
  // All four dead ones are skipped by now: ahead are the three live ones and the far one. On c0ee138 the
  // skipped tickets still took places 1-3, so the fourth dead one stayed at place 4, never watched, and
  // held up the line until its lease ended.
  CHECK(w.position() == 5);
  CHECK(store.tickets({"job"}).size() == 9);
}

TEST_CASE("A replacing run joins at the front; a newer one passes it (run --replace)") {
  MemoryStore store;
  WaitQueue a(store, quiet);
  a.join({"job"}, "a:1"); // an ordinary waiter, at the back
  WaitQueue r1(store, quiet);
  r1.join({"job"}, "r:1", true);
  CHECK(r1.at_head()); // ahead of the waiter that queued first
  CHECK_FALSE(r1.superseded());
  CHECK_FALSE(a.at_head());
  CHECK_FALSE(a.superseded()); // only a replacing run is ever superseded
  WaitQueue r2(store, quiet);
  r2.join({"job"}, "r:2", true);
  CHECK(r2.at_head());
  CHECK_FALSE(r1.at_head());
  CHECK(r1.superseded()); // the newest replacing run wins
  std::vector<std::int64_t> seqs;
  for (const auto& t : store.tickets({"job"})) {
    seqs.push_back(t.seq);
    CHECK(WaitQueue::is_replace(t) == (t.process != "a:1"));
  }
  CHECK(seqs == std::vector<std::int64_t>{-2, -1, 1});
  // A replacing run that joins while another holds the lock goes below the holder's seq too (its ticket
  // is gone by then), so the holder can tell a newer replacing run from an older one.
  LockRecord holding;
  holding.name = holding.program = "job";
  holding.process = "r:0";
  holding.expires_at = store.clock().now() + 30s;
  holding.replace_seq = -7;
  REQUIRE(store.insert(holding));
  WaitQueue r3(store, quiet);
  r3.join({"job"}, "r:3", true);
  CHECK(r3.seq() == -8);
  CHECK(r3.at_head());
  CHECK_FALSE(r2.at_head());
  CHECK(r2.superseded());
  // A waiter that then joins at the back is behind all of them.
  WaitQueue b(store, quiet);
  b.join({"job"}, "b:1");
  CHECK_FALSE(b.at_head());
  CHECK(b.position() == 5);
}

TEST_CASE("A ticket at an end of the int64 range (another program's) gives a clear error, no overflow") {
  MemoryStore store;
  const auto plant = [&](std::int64_t seq) {
    TicketRecord ticket;
    ticket.name = "job";
    ticket.seq = seq;
    ticket.process = "evil:1";
    ticket.since = store.clock().now();
    ticket.expires_at = store.clock().now() + 30s;
    REQUIRE(store.insert_ticket(ticket));
  };
  plant(std::numeric_limits<std::int64_t>::max());
  WaitQueue back(store, quiet);
  CHECK_THROWS_WITH_AS(back.join({"job"}, "b:1"),
                       "could not join the queue of 'job': the seq of a queue ticket is 9223372036854775807, the "
                       "highest int64 (mongolock never writes it); delete that document and try again",
                       Error);
  WaitQueue front(store, quiet);
  front.join({"job"}, "r:1", true); // the front still has room
  CHECK(front.seq() == -1);
  plant(std::numeric_limits<std::int64_t>::min());
  WaitQueue newer(store, quiet);
  try {
    newer.join({"job"}, "r:2", true);
    FAIL("joined below the lowest int64");
  } catch (const Error& e) {
    CHECK(e.exit_code() == k_exit_unavailable);
    CHECK(std::string(e.what()).find("the seq of a queue ticket is -9223372036854775808, the lowest int64") !=
          std::string::npos);
  }
  CHECK(store.tickets({"job"}).size() == 3); // nothing inserted by the failed joins
}

TEST_CASE("An older replacing run whose ticket was lost rejoins no more once a newer one joined") {
  MemoryStore store;
  WaitQueue r1(store, quiet);
  r1.join({"job"}, "r:1", true);
  REQUIRE(r1.seq() == -1);
  WaitQueue r2(store, quiet);
  r2.join({"job"}, "r:2", true);
  REQUIRE(r2.seq() == -2);
  // r1 stalled past its ticket lease: its ticket is gone, its next renewal finds none and it rejoins.
  for (const auto& t : store.tickets({"job"}))
    if (t.process == "r:1") REQUIRE(store.remove_ticket(t.id) == 1);
  CHECK_FALSE(r1.keep_alive(Millis(1)));
  CHECK(r1.superseded());
  // No ticket below the newer run's: r2 stays first in line, and is not superseded by the older run
  // (before, r1 rejoined at seq -3 for a moment and r2, reading the queue then, gave up too).
  const auto tickets = store.tickets({"job"});
  REQUIRE(tickets.size() == 1);
  CHECK(tickets.front().process == "r:2");
  CHECK(r2.at_head());
  CHECK_FALSE(r2.superseded());
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("Waiter");

// Issue 30: a short job's holder never renews, so it never reads the queue and never marks its lock; its
// release woke nobody and the queue noticed by polling (about 1.35 s a handover).
TEST_CASE("A run's release wakes the queue once it held the lock k_wake_window, marked or not") {
  MemoryStore store(WriteSemantics::ferretdb_v1);
  Locker locker(store, quiet);
  auto feed = store.follow_events(0ms);
  const auto release = [&](const LockRecord& lock) {
    REQUIRE(locker.release(LockSelector{.program = lock.program, .id = lock.id, .token = lock.token}).kind ==
            ReleaseOutcome::released);
  };
  // A one-shot run released within the window: no event (the run's hot path sends no insert for it).
  auto quick = request("quick", "h:1");
  quick.command = "true";
  const auto one_shot = locker.try_acquire(quick);
  REQUIRE(one_shot);
  CHECK_FALSE(one_shot->waiters);
  release(*one_shot);
  CHECK_FALSE(feed->wait({"quick"}));
  // A run that held its lock longer, never renewed, never marked: its release appends the event.
  auto job = request("job", "h:1");
  job.command = "sleep";
  const auto held = locker.try_acquire(job);
  REQUIRE(held);
  CHECK_FALSE(held->waiters);
  std::this_thread::sleep_for(k_wake_window + 20ms); // the rule is about how long the lock was held
  release(*held);
  const auto event = feed->wait({"job"});
  REQUIRE(event);
  CHECK(event->name == "job");
  // A lock taken by `acquire` (no command) keeps the mark's rule: its holder marks it with `renew`.
  const auto plain = locker.try_acquire(request("plain", "h:1"));
  REQUIRE(plain);
  std::this_thread::sleep_for(k_wake_window + 20ms);
  release(*plain);
  CHECK_FALSE(feed->wait({"plain"}));
}

TEST_CASE("The head behind a young unmarked run lock looks again when its quiet window ends, and takes it") {
  MemoryStore store(WriteSemantics::ferretdb_v1);
  Locker holder(store, quiet);
  auto job = request("job", "h:1");
  job.command = "true";
  const auto held = holder.try_acquire(job);
  REQUIRE(held);
  Locker locker(store, quiet);
  Waiter waiter(locker, {request("job", "w:1")}, WaitPolicy{.wait = Millis::max()});
  std::vector<Millis> pauses;
  const auto recording = [&pauses](Millis d) {
    pauses.push_back(d);
    std::this_thread::sleep_for(std::min(d, Millis(2)));
    return true;
  };
  for (int i = 0; i < 5 && (waiter.state() != State::head || pauses.empty()); ++i)
    REQUIRE(waiter.step(recording));
  REQUIRE(waiter.state() == State::head);
  REQUIRE(waiter.following());
  // Its pause ends with the lock's quiet window (not a wait for an event that may never come: following
  // the events, it would wait for one, a sleep of 0).
  REQUIRE_FALSE(pauses.empty());
  CHECK(pauses.back() > k_wake_window / 2);
  CHECK(pauses.back() <= k_wake_window + 10ms); // + the store clock's uncertainty, both ways
  // The holder releases within the window: no event; the head's next look finds the lock free.
  REQUIRE(holder.release(LockSelector{.program = "job", .id = held->id, .token = held->token}).kind ==
          ReleaseOutcome::released);
  for (int i = 0; i < 100 && waiter.state() != State::acquired; ++i) {
    if (!waiter.step(recording)) break;
    std::this_thread::sleep_for(5ms);
  }
  CHECK(waiter.state() == State::acquired);
  waiter.outcome().leave_queue();
}

TEST_CASE("A far waiter looks again no later than its tickets' renewal is due: a long interval never lets them lapse") {
  MemoryStore store;
  Locker holder(store, quiet);
  REQUIRE(holder.try_acquire(request("job", "h:1")));
  WaitPolicy policy{.wait = Millis::max()};
  policy.queue.followers = 1;
  policy.queue.far_step = 5000ms; // the third in line would look again only after far_max
  policy.queue.far_max = 6000ms;
  std::vector<std::unique_ptr<Locker>> lockers;
  std::vector<std::unique_ptr<Waiter>> waiters;
  for (int i = 0; i < 3; ++i) {
    lockers.push_back(std::make_unique<Locker>(store, quiet));
    waiters.push_back(
        std::make_unique<Waiter>(*lockers.back(), std::vector{request("job", "w:" + std::to_string(i))}, policy));
    CHECK(waiters.back()->step(short_sleep));
  }
  REQUIRE(waiters[2]->state() == State::far);
  // Its tickets still have the join's short lease (4 s), due for renewal 1.5 s after it: the pause ends by then
  // (issue 28: the `min` of its interval and the renewal taken as a `max` waited past the lease).
  Millis pause{0};
  CHECK(waiters[2]->step([&](Millis d) {
    pause = d;
    return true;
  }));
  CHECK(pause > 0ms);
  CHECK(pause <= policy.queue.ticket_lease * 3 / 8);
}

TEST_CASE("A head that finds the lock free by reading takes it in that step, not one step later") {
  MemoryStore store;
  Locker holder(store, quiet);
  auto held = holder.try_acquire(request("job", "h:1"));
  REQUIRE(held);
  const WaitPolicy policy{.wait = Millis::max(), .push = false}; // it polls: no event wakes it
  Locker locker(store, quiet);
  Waiter waiter(locker, {request("job", "w:1")}, policy);
  CHECK(waiter.step(short_sleep)); // joins; first in line, the lock is held
  REQUIRE(waiter.state() == State::head);
  REQUIRE(holder.release(LockSelector{.program = held->program, .id = held->id, .token = held->token}).kind ==
          ReleaseOutcome::released);
  CHECK_FALSE(waiter.step(short_sleep)); // reads the lock free and takes it at once
  CHECK(waiter.state() == State::acquired);
}

TEST_SUITE_END();
