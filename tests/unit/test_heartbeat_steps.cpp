// HeartbeatSteps (heartbeat.hpp) on the in-memory store: what a step sends once the heartbeat was given up,
// a reply at the very instant of the renew deadline, the bound of the queue read after a renewal, and what a
// renewal that fails while the run is ending says.
#include <doctest/doctest.h>

#include <mongolock/error.hpp>
#include <mongolock/heartbeat.hpp>
#include <mongolock/lease.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/memory_store.hpp>

#include <cstdio>
#include <string>
#include <thread>

#include <unistd.h>

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

// Everything written to stderr (fd 2) while it lives: text().
class StderrCapture {
public:
  StderrCapture() : m_file(std::tmpfile()) {
    REQUIRE(m_file != nullptr);
    std::fflush(stderr);
    m_saved = dup(2);
    REQUIRE(dup2(fileno(m_file), 2) == 2);
  }
  ~StderrCapture() {
    restore();
    std::fclose(m_file);
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;
  std::string text() {
    restore();
    std::string out;
    std::rewind(m_file);
    for (int c = std::fgetc(m_file); c != EOF; c = std::fgetc(m_file))
      out.push_back(static_cast<char>(c));
    return out;
  }

private:
  void restore() {
    if (m_saved < 0) return;
    std::fflush(stderr);
    dup2(m_saved, 2);
    close(m_saved);
    m_saved = -1;
  }
  std::FILE* m_file;
  int m_saved = -1;
};

} // namespace

// Red team 5, F3: a renewal that failed after the run began to end (the job ended: give_up()) well before the
// renew deadline was logged as "failed past the renew deadline".
TEST_CASE("A renewal that fails while the run is ending says so, not 'past the renew deadline'") {
  MemoryStore store(WriteSemantics::ferretdb_v1); // its `between` hook runs inside the renewal
  Held held(store, 30s);
  auto& [quiet, locker, locks, timing] = held;
  const Log verbose{Verbosity::verbose};
  HeartbeatSteps steps(locker, locks, timing, verbose, {});
  std::string log;
  {
    StderrCapture capture;
    // The job ends while the renewal is on its way, and the renewal then fails (abandoned at its bound).
    store.between = [&] {
      steps.give_up();
      throw Error(k_exit_unavailable, "renewal of lock 'job' timed out");
    };
    // At the first renewal's wake-up (a clock held there), long before the renew deadline.
    struct Later final : TimeSource {
      LocalTime t;
      LocalTime now() noexcept override { return t; }
    } later;
    later.t = steps.next_wakeup();
    struct Restore {
      TimeSource* previous;
      ~Restore() { set_time_source(previous); }
    } restore{set_time_source(&later)};
    REQUIRE(later.t < steps.deadline());
    CHECK_FALSE(steps.step());
    log = capture.text();
  }
  CAPTURE(log);
  CHECK(log.find("lease renewal of 'job' failed while the run was ending: renewal of lock 'job' timed out") !=
        std::string::npos);
  CHECK(log.find("past the renew deadline") == std::string::npos);
  CHECK(log.find("retrying") == std::string::npos);
}

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

// Red team 7, F6: a renewal the server refused (refused for its server-time condition, and its resend refused
// too: both error answers, nothing applied) was booked as a renewal of unknown outcome and pinned the lease to
// its send time; at a short TTL the pin costs the lease. A refusal pins nothing; any other failure still does.
TEST_CASE("A renewal the server refused pins nothing: the next confirmed renewal counts from its own send") {
  for (const bool refused : {true, false}) {
    struct Fixed final : TimeSource {
      LocalTime t{std::chrono::seconds(1000)};
      LocalTime now() noexcept override { return t; }
    } fixed;
    struct Restore {
      TimeSource* previous;
      ~Restore() { set_time_source(previous); }
    } restore{set_time_source(&fixed)};
    MemoryStore store(WriteSemantics::ferretdb_v1); // its `between` hook runs inside the renewal, before its write
    Held held(store, 30s);
    auto& [quiet, locker, locks, timing] = held;
    HeartbeatSteps steps(locker, locks, timing, quiet, {});
    fixed.t = steps.next_wakeup();
    store.between = [&] {
      const std::string message = "renewal of lock 'job' on db.locks failed: unknown top level operator: $expr";
      throw refused ? refused_error(message) : unavailable_error(message);
    };
    const auto failed_at = fixed.t;
    CHECK(steps.step()); // failed, to be retried
    fixed.t = steps.next_wakeup();
    REQUIRE(fixed.t > failed_at);
    const auto renewed_at = fixed.t;
    CHECK(steps.step());
    CAPTURE(refused);
    CHECK(steps.deadline() == (refused ? renewed_at : failed_at) + timing.renew_deadline);
  }
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
