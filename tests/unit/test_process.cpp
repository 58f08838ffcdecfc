#include <doctest/doctest.h>

#include <mongolock/clock.hpp>
#include <mongolock/error.hpp>
#include <mongolock/exit_codes.hpp>
#include <mongolock/process.hpp>

#include <chrono>
#include <cstdlib>
#include <signal.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace mongolock;
using namespace std::chrono_literals;

namespace {

// Starts `argv` under a guardian whose watchdog deadline is `deadline` from now (none when nullopt).
Child start(std::vector<std::string> argv, std::optional<std::chrono::milliseconds> deadline,
            std::chrono::milliseconds kill_grace) {
  ChildSpec spec;
  spec.argv = std::move(argv);
  sigemptyset(&spec.signal_mask);
  if (deadline) spec.deadline = LeaseClock::now() + *deadline;
  spec.kill_grace = kill_grace;
  return Child::spawn(spec);
}

// Waits (at most 20s: these are not timing tests) for the job to end; returns its exit code, -1 if it did not.
int wait_exit(Child& child) {
  const auto give_up = LeaseClock::now() + 20s;
  while (LeaseClock::now() < give_up) {
    const auto result = child.try_wait();
    if (result.state == Child::WaitResult::exited) return result.exit_code;
    std::this_thread::sleep_for(10ms);
  }
  return -1;
}

} // namespace

TEST_SUITE_BEGIN("Child watchdog");

TEST_CASE("The guardian stops the job with SIGTERM when its deadline passes, and says so") {
  auto child = start({"sleep", "30"}, 100ms, 5s);
  CHECK(wait_exit(child) == 128 + SIGTERM);
  CHECK(child.watchdog_fired().has_value());
}

TEST_CASE("A job that ignores SIGTERM is killed after the kill grace") {
  auto child = start({"sh", "-c", "trap '' TERM; exec sleep 30"}, 100ms, 200ms);
  CHECK(wait_exit(child) == 128 + SIGKILL);
  CHECK(child.watchdog_fired().has_value());
}

TEST_CASE("With no kill grace the job is killed at the deadline at once") {
  auto child = start({"sleep", "30"}, 100ms, 0ms);
  CHECK(wait_exit(child) == 128 + SIGKILL);
}

TEST_CASE("An extended deadline keeps the job running; stop_job() stops it") {
  auto child = start({"sleep", "30"}, 300ms, 5s);
  REQUIRE(child.extend_deadline(LeaseClock::now() + 60s));
  std::this_thread::sleep_for(600ms);
  CHECK(child.try_wait().state == Child::WaitResult::running);
  child.stop_job(5s);
  CHECK(wait_exit(child) == 128 + SIGTERM);
  CHECK_FALSE(child.watchdog_fired().has_value()); // stopped on request, not by the watchdog
}

TEST_CASE("Without a deadline (--on-lost ignore) the guardian never stops the job") {
  auto child = start({"sh", "-c", "sleep 0.3; exit 7"}, std::nullopt, 0ms);
  CHECK(wait_exit(child) == 7);
  CHECK_FALSE(child.watchdog_fired().has_value());
}

TEST_CASE("A deadline already past when the job starts stops it at once") {
  auto child = start({"sleep", "30"}, -1s, 5s);
  CHECK(wait_exit(child) == 128 + SIGTERM);
}

TEST_CASE("A deadline passed by more than the kill grace kills the job at once, without SIGTERM") {
  // sleep dies of SIGTERM (143) if it gets one; the lease may be over, so only SIGKILL is right.
  auto child = start({"sleep", "30"}, -2s, 1s);
  CHECK(wait_exit(child) == 128 + SIGKILL);
  CHECK(child.watchdog_fired().has_value());
}

TEST_CASE("A guardian stopped past deadline + kill grace kills the job at once when continued") {
  // The whole job, guardian included, frozen (a stopped cgroup or VM) across the deadline and the kill
  // grace: on SIGCONT the SIGKILL is already due, so the job gets no SIGTERM and no time to run on.
  auto child = start({"sleep", "30"}, 200ms, 300ms);
  REQUIRE(kill(-child.pid(), SIGSTOP) == 0);
  std::this_thread::sleep_for(1s);
  REQUIRE(kill(-child.pid(), SIGCONT) == 0);
  CHECK(wait_exit(child) == 128 + SIGKILL);
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("Child start");

TEST_CASE("A command whose start_by has passed is never started: spawn throws 76") {
  char dir[] = "/tmp/mongolock-unit-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  const std::string marker = std::string(dir) + "/started";
  ChildSpec spec;
  spec.argv = {"touch", marker};
  sigemptyset(&spec.signal_mask);
  spec.start_by = LeaseClock::now() - 1ms;
  int code = 0;
  try {
    (void)Child::spawn(spec);
  } catch (const Error& e) {
    code = e.exit_code();
    CHECK(std::string(e.what()).find("was not started") != std::string::npos);
  }
  CHECK(code == k_exit_lease_lost);
  CHECK(access(marker.c_str(), F_OK) != 0);
  rmdir(dir);
}

TEST_CASE("A command started before its start_by runs as usual") {
  ChildSpec spec;
  spec.argv = {"sh", "-c", "exit 7"};
  sigemptyset(&spec.signal_mask);
  spec.start_by = LeaseClock::now() + 10s;
  auto child = Child::spawn(spec);
  CHECK(wait_exit(child) == 7);
}

TEST_SUITE_END();
