// The lock protocol (Locker) on the in-memory store, under MongoDB's and FerretDB v1's write semantics:
// what each flow writes, and which writes a second client can undo.
#include <doctest/doctest.h>

#include <mongolock/error.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/memory_store.hpp>

#include <algorithm>
#include <string>

using namespace mongolock;
using namespace std::chrono_literals;

namespace {

AcquireRequest request(const std::string& name, const std::string& process, Millis ttl = 30s) {
  AcquireRequest r;
  r.name = name;
  r.process = process;
  r.ttl = ttl;
  r.takeover_grace = 2s;
  return r;
}

std::size_t updates_of(const MemoryStore& store, const std::string& program, const std::string& fields) {
  const auto& w = store.lock_writes();
  return static_cast<std::size_t>(std::count_if(w.begin(), w.end(), [&](const MemoryStore::Write& x) {
    return x.op == "update" && x.program == program && x.fields == fields;
  }));
}

const Log quiet(Verbosity::quiet);

} // namespace

TEST_SUITE_BEGIN("Locker");

TEST_CASE("A free lock is one insert; a held one is reported with its holder and costs no write") {
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    MemoryStore store(semantics);
    Locker locker(store, quiet);
    REQUIRE(locker.try_acquire(request("job", "a:1")));
    CHECK(store.lock_writes().size() == 1);
    std::vector<LockRecord> seen;
    CHECK_FALSE(locker.try_acquire(request("job", "b:2"), true, &seen));
    REQUIRE(seen.size() == 1);
    CHECK(seen.front().process == "a:1");
    CHECK(store.lock_writes().size() == 1); // the refused insert wrote nothing; no purge of a live lock
  }
}

TEST_CASE("An expired lock is taken over only after the takeover grace, and only that acquisition is purged") {
  MemoryStore store;
  Locker locker(store, quiet);
  auto held = locker.try_acquire(request("job", "a:1"));
  REQUIRE(held);
  // Expired 1 s ago: within the 2 s grace, still held.
  auto doc = store.documents().at("job");
  REQUIRE(store.renew(LockSelector{.program = "job", .id = doc.id}, store.clock().now() - 1s, doc.renewed_at, 30s) ==
          1);
  CHECK_FALSE(locker.try_acquire(request("job", "b:2")));
  // Expired 3 s ago: taken over. (Set directly: a renewal no longer extends a lock that has expired on the
  // server's clock, its server-time condition.)
  REQUIRE(store.update_where([&](const LockRecord& lock) { return lock.id == doc.id; }, "expires_at",
                             [&](LockRecord& lock) { lock.expires_at = store.clock().now() - 3s; }) == 1);
  const auto taken = locker.try_acquire(request("job", "b:2"));
  REQUIRE(taken);
  CHECK(taken->process == "b:2");
  CHECK(taken->id != held->id);
  // The old holder's release names its own acquisition: it removes nothing now.
  CHECK(locker.release(LockSelector{.program = "job", .id = held->id, .token = held->token}).kind ==
        ReleaseOutcome::not_holder);
  CHECK(store.documents().at("job").process == "b:2");
}

TEST_CASE("A renewal never extends a lock that expired on the server's clock (MongoDB); FerretDB v1 lacks that") {
  // Red team 4, F4: a late copy of an abandoned renewal, whose own filter names an expiry after its send time.
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    MemoryStore store(semantics);
    Locker locker(store, quiet);
    const auto held = locker.try_acquire(request("job", "a:1"));
    REQUIRE(held);
    const auto sent = store.clock().now() - 2s; // the copy's send stamp, when the lock was live
    REQUIRE(store.update_where([&](const LockRecord& lock) { return lock.id == held->id; }, "expires_at",
                               [&](LockRecord& lock) { lock.expires_at = store.clock().now() - 1s; }) == 1);
    const LockSelector copy{.program = "job",
                            .id = held->id,
                            .token = held->token,
                            .expires_after = sent,
                            .renewed_before = store.clock().now() + 1s,
                            .not_released = true};
    CHECK(store.renew(copy, sent + 30s, sent, 30s) == (semantics == WriteSemantics::mongodb ? 0 : 1));
  }
}

TEST_CASE("FerretDB v1: a second client's update between a renewal's read and write undoes the renewal") {
  // Why no waiter may update the holder's document (issue #19): this is what 0.2.0's mark did.
  MemoryStore store(WriteSemantics::ferretdb_v1);
  Locker holder(store, quiet);
  auto lock = holder.try_acquire(request("job", "a:1"));
  REQUIRE(lock);
  const auto before = store.documents().at("job").expires_at;
  // The mark reads the document, the holder's renewal lands, then the mark writes its copy back.
  bool renewed = false;
  store.between = [&] { renewed = holder.renew(*lock, 30s, LeaseClock::now() + 5s); };
  CHECK(store.mark_waiters(LockSelector{.program = "job", .id = lock->id}) == 1);
  CHECK(renewed); // the holder is told it renewed...
  CHECK(lock->expires_at > before);
  // ...but the mark's write-back restored the old expiry: the renewal is lost.
  CHECK(store.documents().at("job").expires_at == before);
  CHECK(store.documents().at("job").waiters);
}

TEST_CASE("MongoDB semantics: the same interleaving keeps both writes") {
  MemoryStore store(WriteSemantics::mongodb);
  Locker holder(store, quiet);
  auto lock = holder.try_acquire(request("job", "a:1"));
  REQUIRE(lock);
  bool renewed = false;
  store.between = [&] { renewed = holder.renew(*lock, 30s, LeaseClock::now() + 5s); };
  CHECK(store.mark_waiters(LockSelector{.program = "job", .id = lock->id}) == 1);
  REQUIRE(renewed);
  CHECK(store.documents().at("job").expires_at == lock->expires_at);
  CHECK(store.documents().at("job").waiters);
}

TEST_CASE("A waiter never updates a lock document; the holder marks its own lock when someone waits") {
  MemoryStore store(WriteSemantics::ferretdb_v1);
  Locker holder(store, quiet);
  std::vector<LockRecord> locks;
  auto lock = holder.try_acquire(request("job", "a:1"));
  REQUIRE(lock);
  locks.push_back(*lock);
  CHECK(holder.mark_if_waited(locks) == 0); // nobody waits: one read, no write
  // A waiter (--wait 0: one attempt, then it joins the queue and gives up at once).
  Locker waiter(store, quiet);
  WaitPolicy policy{.wait = Millis(0)};
  auto waited = waiter.acquire_all({request("job", "b:2")}, policy, [](Millis) { return true; });
  CHECK(waited.locks.empty());
  CHECK(waited.held == "job");
  CHECK(updates_of(store, "job", "waiters") == 0);
  CHECK(std::none_of(store.lock_writes().begin(), store.lock_writes().end(),
                     [](const MemoryStore::Write& w) { return w.op == "update"; }));
  // While a ticket waits, the holder marks its own lock; its release then wakes the queue.
  TicketRecord ticket;
  ticket.name = "job";
  ticket.seq = 1;
  ticket.process = "b:2";
  ticket.since = store.clock().now();
  ticket.expires_at = store.clock().now() + 4s;
  REQUIRE(store.insert_ticket(ticket));
  const auto writes = store.lock_writes().size();
  CHECK(holder.mark_if_waited(locks) == 1); // a read only: the next renewal carries the mark
  CHECK(store.lock_writes().size() == writes);
  CHECK_FALSE(store.documents().at("job").waiters);
  REQUIRE(holder.renew(locks.front(), 30s, LeaseClock::now()));
  CHECK(locks.front().waiters);
  CHECK(store.documents().at("job").waiters);
  CHECK(updates_of(store, "job", "expires_at,renewed_at,ttl_ms,waiters") == 1);
  CHECK(store.lock_writes().size() == writes + 1); // the renewal, one update
  auto feed = store.follow_events(1500ms);
  while (feed->wait({"job"})) {} // past the existing events
  CHECK(holder.release(LockSelector{.program = "job", .id = lock->id, .token = lock->token}).kind ==
        ReleaseOutcome::released);
  const auto event = feed->wait({"job"});
  REQUIRE(event);
  CHECK(event->name == "job");
}

TEST_CASE("A replaced run's release wakes the queue with a replace event, marked or not") {
  // run --replace: the release of a run stopped for a replacing run tells every waiter to read the queue
  // first (the replacing run joined at its front), even when the lock was never marked `waiters` and was held
  // only briefly (no event otherwise); an ordinary release names its ticket, or sends nothing.
  MemoryStore store;
  Locker holder(store, quiet);
  auto feed = store.follow_events(1500ms);
  auto plain = holder.try_acquire(request("plain", "a:1"));
  REQUIRE(plain);
  CHECK(holder.release(LockSelector{.program = "plain", .id = plain->id, .token = plain->token}).kind ==
        ReleaseOutcome::released);
  CHECK_FALSE(feed->wait({"plain"})); // held briefly, not marked: no event
  auto lock = holder.try_acquire(request("job", "a:1"));
  REQUIRE(lock);
  REQUIRE_FALSE(lock->waiters);
  holder.wake_as_replaced();
  CHECK(holder.release(LockSelector{.program = "job", .id = lock->id, .token = lock->token}).kind ==
        ReleaseOutcome::released);
  const auto event = feed->wait({"job"});
  REQUIRE(event);
  CHECK(event->name == "job");
  CHECK(event->ticket == k_replace_event);
}

TEST_CASE("A late copy of an older renewal matches nothing: the expiry never moves back") {
  // A renewal that timed out on the client may still reach the server after the retry succeeded (a
  // middlebox, a server that read it late). renewed_at only grows, and the filter wants an older one.
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    MemoryStore store(semantics);
    Locker holder(store, quiet);
    auto lock = holder.try_acquire(request("job", "a:1"));
    REQUIRE(lock);
    // The first copy, as the holder sent it (its filter and update; it lands at the server on its own, with
    // nobody to read the document after it: LockStore::renew, not Locker::renew).
    const auto first_stamp = store.clock().latest(LeaseClock::now() + 1s);
    const LockSelector first{.program = "job",
                             .id = lock->id,
                             .token = lock->token,
                             .expires_after = first_stamp,
                             .renewed_before = first_stamp,
                             .not_released = true};
    REQUIRE(holder.renew(*lock, 30s, LeaseClock::now() + 2s)); // the retry, sent later, succeeds
    const auto expiry = store.documents().at("job").expires_at;
    CHECK(store.renew(first, first_stamp + 30s, first_stamp, 30s) == 0); // the first copy arrives now
    CHECK(store.documents().at("job").expires_at == expiry);
  }
}

TEST_CASE("A renewal's stamp follows every earlier one sent, answered or not: a late failed one matches nothing") {
  // Issue 27: a renewal whose outcome is unknown (an error while it was on its way, or abandoned for time)
  // may land after the retry; the retry's clock estimate may be earlier (a new handshake). Its renewed_at
  // must still be later than the first's, or the late first copy matches and writes its expiry.
  MemoryStore store(WriteSemantics::ferretdb_v1);
  Locker holder(store, quiet);
  auto lock = holder.try_acquire(request("job", "a:1"));
  REQUIRE(lock);
  const auto first_sent = LeaseClock::now() + 2s;
  const auto first_stamp = store.clock().latest(first_sent);
  store.between = [] { throw Error(k_exit_unavailable, "connection reset (the request is still on its way)"); };
  CHECK_THROWS_AS((void)holder.renew(*lock, 30s, first_sent), Error);
  REQUIRE(holder.renew(*lock, 30s, first_sent - 1s)); // the retry, on an estimate 1 s earlier
  CHECK(lock->renewed_at > first_stamp);
  const auto expiry = store.documents().at("job").expires_at;
  const LockSelector first{
      .program = "job", .id = lock->id, .token = lock->token, .renewed_before = first_stamp, .not_released = true};
  CHECK(store.renew(first, first_stamp + 30s, first_stamp, 30s) == 0); // the first copy lands now
  CHECK(store.documents().at("job").expires_at == expiry);
}

TEST_CASE("renew's stamp is never in the server's future, whatever its handshake's delay") {
  // Red team 4, F3: a `renew --token` whose handshake hello was held 4 s on its way to the server reads the
  // server's clock 2 s ahead, its upper bound 4 s ahead. Stamped from that bound, renewed_at lay in the
  // future and the holder's next heartbeat renewal (renewed_at older than its stamp) matched nothing.
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    MemoryStore store(semantics);
    Locker holder(store, quiet);
    auto lock = holder.try_acquire(request("job", "a:1", 6s));
    REQUIRE(lock);
    const auto accurate = store.clock();
    const auto now = LeaseClock::now();
    store.set_clock(ServerClock(accurate.at(now), 4000ms, now)); // the hello stamped at its arrival
    Locker other(store, quiet);
    const auto expires = other.renew(LockSelector{.program = "job", .token = lock->token}, 6s);
    REQUIRE(expires);
    // Not after the server's time now (or just above the acquire's stamp of a moment ago: stamped from the
    // latest bound, which the renew then outstamps by 1 ms); before: 4 s ahead.
    CHECK(store.documents().at("job").renewed_at <= std::max(accurate.at(LeaseClock::now()), lock->renewed_at + 1ms));
    CHECK(*expires >= accurate.at(now) + 6s); // the expiry from the latest: never shorter than asked
    store.set_clock(accurate);
    CHECK(holder.renew(*lock, 6s, LeaseClock::now())); // the run's next renewal matches
  }
}

TEST_CASE("A heartbeat renewal outstamped by another renewal of its token renews above it; the lock is not lost") {
  // Red team 4, F3: another process renewed with the token (an older mongolock stamping from its estimate's
  // upper bound) and left renewed_at 4 s in the server's future. The lock is the holder's and live.
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    MemoryStore store(semantics);
    Locker holder(store, quiet);
    auto lock = holder.try_acquire(request("job", "a:1", 6s));
    REQUIRE(lock);
    const auto ahead = store.clock().now() + 4s;
    REQUIRE(store.renew(LockSelector{.program = "job", .token = lock->token}, ahead + 6s, ahead, 6s) == 1);
    REQUIRE(holder.renew(*lock, 6s, LeaseClock::now()));
    CHECK(lock->renewed_at > ahead);
    CHECK(lock->stamp_sent == lock->renewed_at);
    CHECK(store.documents().at("job").renewed_at == lock->renewed_at);
    // A document taken over (another token) or released is not adopted: the lease is gone.
    REQUIRE(store.remove(LockSelector{.program = "job", .token = lock->token}) == 1);
    auto other = holder.try_acquire(request("job", "b:2", 6s));
    REQUIRE(other);
    const auto later = store.clock().now() + 8s;
    REQUIRE(store.renew(LockSelector{.program = "job", .token = other->token}, later + 6s, later, 6s) == 1);
    CHECK_FALSE(holder.renew(*lock, 6s, LeaseClock::now()));
  }
}

TEST_CASE("A renew by holder that matches nothing never renews a later acquisition of that holder") {
  // Red team 6, F1: `renew --process H` delayed on its way (its stamp 4 s old when it lands) while H released
  // and acquired again with --ttl 1h. Its filter matched nothing (the new document is newer than its stamp);
  // the outstamp retry then read the new acquisition, found it "renewed after this stamp" by the same
  // holder, and renewed it with the old TTL (20 s): a contender took the lock 20 s later while H held it.
  // Without _id or token the selector does not prove that the document is the acquisition it meant.
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    MemoryStore store(semantics);
    Locker holder(store, quiet);
    auto first = holder.try_acquire(request("job", "a:1", 20s));
    REQUIRE(first);
    REQUIRE(store.remove(LockSelector{.program = "job", .token = first->token}) == 1);
    auto second = holder.try_acquire(request("job", "a:1", 1h));
    REQUIRE(second);
    const auto expiry = store.documents().at("job").expires_at;
    const auto accurate = store.clock();
    const auto now = LeaseClock::now();
    store.set_clock(ServerClock(accurate.at(now) - 4s, 0ms, now)); // the renew's view, 4 s old
    Locker late(store, quiet);
    CHECK_FALSE(late.renew(LockSelector{.program = "job", .process = "a:1"}, 20s));
    CHECK(store.documents().at("job").expires_at == expiry);
    CHECK(store.documents().at("job").token == second->token);
    // By token, the same renew of the old acquisition matches nothing either; of the new one it renews.
    CHECK_FALSE(late.renew(LockSelector{.program = "job", .token = first->token}, 20s));
    CHECK(store.documents().at("job").expires_at == expiry);
  }
}

TEST_CASE("A renewal answered after the lease ended is refused, not reported as renewed until a past time") {
  // Red team 7, F2: `renew --token` whose call took longer than the lease (a slow call, a lost reply sent
  // again) wrote an expiry already past on the server's clock and exited 0; another host took the lock at
  // once. The server's clock moves 10 s on while the renewal travels (MongoDB: after it is applied; FerretDB
  // v1: between its read and its write-back).
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    for (const bool by_token : {true, false}) {
      MemoryStore store(semantics);
      Locker holder(store, quiet);
      const auto lock = holder.try_acquire(request("job", "a:1", 3s));
      REQUIRE(lock);
      const auto accurate = store.clock();
      const auto start = LeaseClock::now(); // 0.5 s after the acquisition: its stamp is older than the renewal's
      store.set_clock(ServerClock(accurate.at(start) + 500ms, 0ms, start));
      store.between = [&] {
        const auto now = LeaseClock::now();
        store.set_clock(ServerClock(accurate.at(now) + 10s, 0ms, now));
      };
      Locker other(store, quiet);
      const auto which = by_token ? LockSelector{.program = "job", .token = lock->token}
                                  : LockSelector{.program = "job", .process = "a:1"};
      CAPTURE(semantics == WriteSemantics::mongodb);
      CAPTURE(by_token);
      try {
        const auto expires = other.renew(which, 3s);
        FAIL("renewed until ", format_time(expires.value_or(ServerTime{})), ", before the server's time now");
      } catch (const Error& e) {
        CHECK(e.exit_code() == (by_token ? k_exit_token_gone : k_exit_not_holder));
        CHECK(std::string(e.what()).find("after the lease had ended") != std::string::npos);
      }
    }
  }
}

TEST_CASE("A late renewal outstamped by another renewal of its token never revives the lock that expired meanwhile") {
  // Red team 7, F3: `renew --token T --ttl 1h` delayed 5 s on its way; 0.5 s in, `renew --token T` (3 s)
  // stamped after it. The lock expired on the server at 3.5 s; at 5 s the late renewal matched nothing
  // (renewed_before) and its outstamp retry, checking "unexpired" against the command start's time, renewed
  // the expired lock for an hour (FerretDB refuses the server-time condition; MongoDB's refuses the write).
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    MemoryStore store(semantics);
    Locker holder(store, quiet);
    const auto lock = holder.try_acquire(request("job", "a:1", 3s));
    REQUIRE(lock);
    const auto accurate = store.clock();
    const auto start = store.clock().now();
    store.before_renew = [&] {
      REQUIRE(store.renew(LockSelector{.program = "job", .token = lock->token}, start + 3500ms, start + 500ms, 3s) ==
              1);
      const auto now = LeaseClock::now();
      store.set_clock(ServerClock(accurate.at(now) + 5s, 0ms, now));
    };
    Locker late(store, quiet);
    CHECK_FALSE(late.renew(LockSelector{.program = "job", .token = lock->token}, 1h));
    CHECK(store.documents().at("job").expires_at == start + 3500ms);
    CHECK(store.documents().at("job").renewed_at == start + 500ms);
  }
}

TEST_CASE("renew right after the holder's heartbeat stamped ahead of it renews above that stamp") {
  // The heartbeat stamps from its estimate's upper bound, renew from the earliest: a renew just after a
  // heartbeat renewal finds renewed_at at or after its own stamp and renews once more above it.
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    MemoryStore store(semantics);
    Locker holder(store, quiet);
    auto lock = holder.try_acquire(request("job", "a:1", 30s));
    REQUIRE(lock);
    REQUIRE(holder.renew(*lock, 30s, LeaseClock::now() + 2s)); // stamped 2 s ahead of now
    Locker other(store, quiet);
    const auto expires = other.renew(LockSelector{.program = "job", .token = lock->token}, 30s);
    REQUIRE(expires);
    CHECK(store.documents().at("job").renewed_at > lock->renewed_at);
    CHECK(store.documents().at("job").expires_at == *expires);
    CHECK(holder.renew(*lock, 30s, LeaseClock::now() + 3s)); // and the heartbeat's next one still matches
  }
}

TEST_CASE("A heartbeat renewal that lands after a release into the minimum hold does not move its expiry back") {
  // Issue 26 item 10: its error came back early while the request was still on its way; it reaches the
  // server after the run released into --min-hold. It must match nothing (the document is released), or
  // it would move expires_at back from the hold's end to its send time + TTL.
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    MemoryStore store(semantics);
    Locker holder(store, quiet);
    auto r = request("job", "a:1", 30s);
    r.min_hold = 120s;
    auto lock = holder.try_acquire(r);
    REQUIRE(lock);
    const auto in_flight = *lock; // the holder's state when it sent the renewal
    const auto sent = LeaseClock::now();
    const auto released = holder.release(LockSelector{.program = "job", .id = lock->id, .token = lock->token});
    REQUIRE(released.kind == ReleaseOutcome::min_hold);
    const auto hold_end = store.documents().at("job").expires_at;
    CHECK(hold_end == store.documents().at("job").hold_until);
    auto late = in_flight;
    CHECK_FALSE(holder.renew(late, 30s, sent)); // arrives now, after the release
    CHECK(store.documents().at("job").expires_at == hold_end);
    // The store itself refuses it, whoever builds the filter.
    CHECK(store.renew(LockSelector{.program = "job", .id = lock->id, .token = lock->token}, store.clock().now() + 30s,
                      store.clock().now(), 30s) == 0);
    CHECK(store.documents().at("job").expires_at == hold_end);
  }
}

TEST_CASE("A release of a lock nobody waits for is one write") {
  MemoryStore store;
  Locker locker(store, quiet);
  auto lock = locker.try_acquire(request("job", "a:1"));
  REQUIRE(lock);
  const auto writes = store.lock_writes().size();
  CHECK(locker.release(LockSelector{.program = "job", .id = lock->id, .token = lock->token}).kind ==
        ReleaseOutcome::released);
  CHECK(store.lock_writes().size() == writes + 1);
  CHECK(store.documents().empty());
}

TEST_CASE("Slots: N holders share a name, the N+1st is refused; fencing tokens only grow") {
  MemoryStore store;
  Locker locker(store, quiet);
  auto r = request("pool", "a:1");
  r.slots = 2;
  r.fence = true;
  const auto one = locker.try_acquire(r);
  r.process = "b:2";
  const auto two = locker.try_acquire(r);
  r.process = "c:3";
  std::vector<LockRecord> seen;
  const auto three = locker.try_acquire(r, true, &seen);
  REQUIRE(one);
  REQUIRE(two);
  CHECK_FALSE(three);
  CHECK(seen.size() == 2);
  CHECK(one->program == "pool");
  CHECK(two->program == "pool#2");
  CHECK(*two->fence > *one->fence);
}

TEST_SUITE_END();
