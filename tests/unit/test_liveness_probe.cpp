// holder_verdict() on evidence from a LivenessProbe (liveness.hpp; issue 28): the same-host instant takeover
// acts on proof only, whatever part of the evidence is hidden. The simulator (tests/sim/host.cpp) feeds the
// same seam from a simulated host.
#include <mongolock/liveness.hpp>

#include <doctest/doctest.h>

#include <cerrno>

using namespace mongolock;

namespace {

// A dead holder on this host: its mongolock gone, its holder file unlocked, its job's cgroup empty and its
// process group without members. Each test hides or changes one piece.
struct FakeProbe final : LivenessProbe {
  bool own_proc = true;
  std::optional<std::int64_t> start; // the pid's process start as /proc shows it (nullopt: none shown)
  bool exists = false;               // kill(pid, 0) finds a process
  HolderFileView file{HolderFileView::State::unlocked, "",
                      HolderEvidence{.pgid = 4243, .cgroup = "/x/mongolock-job-1"}};
  CgroupState cgroup = CgroupState::empty;
  int group_errno = ESRCH;
  std::string group_why;
  int removed = 0;
  bool proc_is_own() override { return own_proc; }
  std::optional<std::int64_t> process_start(pid_t) override { return start; }
  bool pid_exists(pid_t) override { return exists; }
  HolderFileView holder_file(const std::string&) override { return file; }
  CgroupState cgroup_state(const std::string&) override { return cgroup; }
  int signal_group(pid_t) override { return group_errno; }
  std::string group_still_runs(pid_t) override { return group_why; }
  void remove_leftovers(const std::string&, const std::string&) override { ++removed; }
};

const ProcessIdentity k_here{.boot_id = "b", .pid_ns = "pid:[1]", .pid_start = 7};

LockRecord dead_holder_lock() {
  LockRecord lock;
  lock.program = "x";
  lock.host = "h";
  lock.process = "h:4242";
  lock.boot_id = "b";
  lock.pid_ns = "pid:[1]";
  lock.pid_start = 100;
  lock.command = "job"; // a run's lock: holder_verdict() judges only those
  return lock;
}

} // namespace

TEST_CASE("holder_verdict: proof from the probe, and removal only when taking over") {
  FakeProbe probe;
  CHECK(holder_verdict(dead_holder_lock(), k_here, "h", probe, false).dead);
  CHECK(probe.removed == 0);
  CHECK(holder_verdict(dead_holder_lock(), k_here, "h", probe, true).dead);
  CHECK(probe.removed == 1);
  probe.start = 101; // the pid was reused by a later process: still gone
  probe.exists = true;
  CHECK(holder_verdict(dead_holder_lock(), k_here, "h", probe, false).dead);
  probe.group_errno = 0; // only zombies with no live thread left
  CHECK(holder_verdict(dead_holder_lock(), k_here, "h", probe, false).dead);
}

TEST_CASE("holder_verdict: hidden or incomplete evidence is no proof") {
  const auto refused = [](FakeProbe& probe, const char* why) {
    const auto verdict = holder_verdict(dead_holder_lock(), k_here, "h", probe, true);
    CHECK_FALSE(verdict.dead);
    CHECK(probe.removed == 0);
    CHECK_MESSAGE(verdict.why_not.find(why) != std::string::npos, verdict.why_not);
  };
  {
    FakeProbe probe;
    probe.exists = true; // hidepid: the pid exists but /proc does not show it
    refused(probe, "hidepid");
  }
  {
    FakeProbe probe;
    probe.own_proc = false;
    refused(probe, "/proc is not this PID namespace's");
  }
  {
    FakeProbe probe;
    probe.file = {LivenessProbe::HolderFileView::State::locked, "", std::nullopt};
    refused(probe, "its holder file is locked");
  }
  {
    FakeProbe probe;
    probe.file = {LivenessProbe::HolderFileView::State::unusable, "its holder file /dev/shm/f is missing",
                  std::nullopt};
    refused(probe, "is missing");
  }
  {
    FakeProbe probe;
    probe.file.evidence = HolderEvidence{.pgid = 4243, .cgroup = ""};
    refused(probe, "without a cgroup of its own");
  }
  for (const auto state : {CgroupState::populated, CgroupState::gone, CgroupState::unknown}) {
    FakeProbe probe;
    probe.cgroup = state;
    refused(probe, "its job's cgroup");
  }
  {
    FakeProbe probe;
    probe.group_errno = EPERM;
    refused(probe, "may not signal");
  }
  {
    FakeProbe probe;
    probe.group_errno = 0;
    probe.group_why = "/proc is mounted with hidepid: members of other users are not listed";
    refused(probe, "hidepid");
  }
  {
    FakeProbe probe;
    probe.start = 100; // the holder's mongolock still runs: no question, no message
    const auto verdict = holder_verdict(dead_holder_lock(), k_here, "h", probe, true);
    CHECK_FALSE(verdict.dead);
    CHECK(verdict.why_not.empty());
  }
}
