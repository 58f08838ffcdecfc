// The own-lock guard by process tree (red team 6, F2): enclosing_runs() finds a mongolock run among this process's
// ancestors by its holder file, and held_by_enclosing_run() matches a lock to one of them only when every recorded
// field agrees (its command, host, boot, PID namespace, pid and start).
#include <doctest/doctest.h>

#include <mongolock/liveness.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace mongolock;

namespace {

// A run's lock as `run` on this host writes it: pid 4242, started at 777.
LockRecord run_lock() {
  const auto here = own_process_identity();
  LockRecord lock;
  lock.program = "job";
  lock.name = "job";
  lock.host = "box";
  lock.process = "box:4242";
  lock.command = "backup.sh";
  lock.pid_start = 777;
  lock.boot_id = here.boot_id;
  lock.pid_ns = here.pid_ns;
  return lock;
}

const std::vector<RunAncestor> k_runs{{1000, 5}, {4242, 777}};

} // namespace

TEST_SUITE_BEGIN("Own-lock guard");

TEST_CASE("A lock is held by an enclosing run only when its command, host, place, pid and start all match") {
  REQUIRE_FALSE(own_process_identity().boot_id.empty());
  const auto lock = run_lock();
  CHECK(held_by_enclosing_run(lock, k_runs, "box"));
  CHECK(held_by_enclosing_run(lock, {{4242, 777}}, "box"));
  CHECK_FALSE(held_by_enclosing_run(lock, {}, "box"));
  CHECK_FALSE(held_by_enclosing_run(lock, k_runs, "other")); // another host's pid 4242
  auto changed = lock;
  changed.command.clear(); // an acquire's lock, not a run's
  CHECK_FALSE(held_by_enclosing_run(changed, k_runs, "box"));
  changed = lock;
  changed.pid_start.reset();
  CHECK_FALSE(held_by_enclosing_run(changed, k_runs, "box"));
  changed = lock;
  changed.boot_id = "another-boot";
  CHECK_FALSE(held_by_enclosing_run(changed, k_runs, "box"));
  changed = lock;
  changed.pid_ns = "pid:[1]";
  CHECK_FALSE(held_by_enclosing_run(changed, k_runs, "box"));
  changed = lock;
  changed.pid_start = 778; // an earlier process of that pid
  CHECK_FALSE(held_by_enclosing_run(changed, k_runs, "box"));
  changed = lock;
  changed.process = "box:4243";
  CHECK_FALSE(held_by_enclosing_run(changed, k_runs, "box"));
  changed.process = "box:4242x";
  CHECK_FALSE(held_by_enclosing_run(changed, k_runs, "box"));
  changed.process = "box:";
  CHECK_FALSE(held_by_enclosing_run(changed, k_runs, "box"));
  changed.process = "4242";
  CHECK_FALSE(held_by_enclosing_run(changed, k_runs, "box"));
  changed.process = "a:b:4242"; // the pid after the last colon
  CHECK(held_by_enclosing_run(changed, k_runs, "box"));
}

TEST_CASE("enclosing_runs() finds an ancestor by its holder file, and only while the file exists") {
  const pid_t parent = getppid();
  const auto start = process_start(parent);
  REQUIRE(start);
  const auto has_parent = [&] {
    const auto runs = enclosing_runs();
    return std::any_of(runs.begin(), runs.end(),
                       [&](const RunAncestor& r) { return r.pid == parent && r.start == *start; });
  };
  const auto path = holder_file_path(parent, *start);
  REQUIRE(access(path.c_str(), F_OK) != 0); // the test's parent is no run
  CHECK_FALSE(has_parent());
  { std::ofstream(path) << "test\n"; }
  REQUIRE(access(path.c_str(), F_OK) == 0);
  const bool found = has_parent();
  std::remove(path.c_str());
  CHECK(found);
  CHECK_FALSE(has_parent());
}

TEST_SUITE_END();
