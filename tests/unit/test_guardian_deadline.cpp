// The guardian's lease watchdog (GuardianDeadline): when it stops the job, when it kills everything,
// and what a late wake-up, an extension and a stop message do. Times are CLOCK_BOOTTIME nanoseconds.
#include <doctest/doctest.h>

#include <mongolock/guardian_deadline.hpp>

using namespace mongolock;

namespace {
constexpr std::int64_t s = 1'000'000'000;
using State = GuardianDeadline::State;
} // namespace

TEST_SUITE_BEGIN("GuardianDeadline");

TEST_CASE("At the deadline: SIGTERM and the report; SIGKILL of everything at deadline + grace") {
  GuardianDeadline w(100 * s, 5 * s);
  auto a = w.check(99 * s);
  CHECK_FALSE((a.term || a.fired || a.kill));
  CHECK(w.next_wakeup() == 100 * s);
  a = w.check(100 * s);
  CHECK(a.term);
  CHECK(a.fired);
  CHECK_FALSE(a.kill);
  CHECK(w.state() == State::stopping);
  CHECK(w.next_wakeup() == 105 * s);
  a = w.check(104 * s);
  CHECK_FALSE((a.term || a.fired || a.kill)); // the report and the SIGTERM are sent once
  CHECK(w.check(105 * s).kill);
}

TEST_CASE("Woken late (stopped, starved): the SIGKILL stays due at deadline + grace") {
  GuardianDeadline w(100 * s, 5 * s);
  auto a = w.check(103 * s); // 2 s of the grace left: SIGTERM first
  CHECK(a.term);
  CHECK(a.fired);
  CHECK_FALSE(a.kill);
  CHECK(w.next_wakeup() == 105 * s);
  GuardianDeadline late(100 * s, 5 * s);
  a = late.check(107 * s); // past deadline + grace: the lease may have ended: kill at once, no SIGTERM
  CHECK_FALSE(a.term);
  CHECK(a.fired);
  CHECK(a.kill);
}

TEST_CASE("An extension moves the deadline while armed, never once stopping") {
  GuardianDeadline w(100 * s, 5 * s);
  w.extend(130 * s, 90 * s);
  CHECK(w.next_wakeup() == 130 * s);
  CHECK_FALSE(w.check(120 * s).fired);
  CHECK(w.check(130 * s).fired);
  w.extend(200 * s, 129 * s); // a renewal that arrives after the watchdog fired does not take the stop back
  CHECK(w.state() == State::stopping);
  CHECK(w.next_wakeup() == 135 * s);
  CHECK(w.check(135 * s).kill);
}

TEST_CASE("An extension sent before the deadline counts when read late; one sent at or after it never") {
  // Issue 26: the guardian stopped with the job's group (kill -STOP -PGID) reads the extensions queued
  // meanwhile only when continued, after the old deadline: the lease was renewed in time, the job is healthy.
  GuardianDeadline w(100 * s, 5 * s);
  w.extend(110 * s, 95 * s);  // sent in time,
  w.extend(120 * s, 105 * s); // and so was this one (before the deadline the first moved)
  const auto a = w.check(112 * s);
  CHECK_FALSE((a.term || a.fired || a.kill));
  CHECK(w.next_wakeup() == 120 * s);
  GuardianDeadline late(100 * s, 5 * s);
  late.extend(130 * s, 100 * s); // sent at the deadline: the lease may have ended; no extension
  CHECK(late.next_wakeup() == 100 * s);
  CHECK(late.check(101 * s).fired);
}

TEST_CASE("A stop message: SIGTERM now, SIGKILL at its time; a second stop only brings it forward") {
  GuardianDeadline w(100 * s, 5 * s);
  auto a = w.stop(50 * s, 53 * s);
  CHECK(a.term);
  CHECK_FALSE(a.fired); // mongolock asked: nothing to report
  CHECK(w.next_wakeup() == 53 * s);
  a = w.stop(51 * s, 60 * s); // later: ignored
  CHECK_FALSE(a.term);
  CHECK(w.next_wakeup() == 53 * s);
  a = w.stop(51 * s, 52 * s); // sooner: taken
  CHECK_FALSE(a.term);
  CHECK(w.next_wakeup() == 52 * s);
  CHECK_FALSE(w.check(51 * s).kill);
  CHECK(w.check(52 * s).kill);
  CHECK_FALSE(w.check(52 * s).fired); // the deadline no longer matters once stopping
}

TEST_CASE("A stop whose time has passed kills without a SIGTERM; a watchdog never armed never fires") {
  GuardianDeadline w(GuardianDeadline::k_never, 5 * s);
  CHECK(w.next_wakeup() == GuardianDeadline::k_never);
  CHECK_FALSE(w.check(1'000'000 * s).fired);
  auto a = w.stop(10 * s, 9 * s);
  CHECK_FALSE(a.term);
  CHECK(w.check(10 * s).kill);
}

TEST_SUITE_END();
