#include <doctest/doctest.h>

#include <mongolock/cgroup.hpp>
#include <mongolock/clock.hpp>
#include <mongolock/error.hpp>
#include <mongolock/exit_codes.hpp>
#include <mongolock/identity.hpp>
#include <mongolock/liveness.hpp>
#include <mongolock/process.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <tuple>
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
  CHECK_FALSE(child.watchdog_killed_at_once()); // a SIGTERM went first
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
  CHECK(child.watchdog_killed_at_once()); // mongolock's message must not claim a SIGTERM (issue 26)
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

TEST_CASE("The job's own signal 34 to its process group is not a kill request (issue 26)") {
  // The guardian is a member of the job's group: SIGRTMIN from the job (si_pid not mongolock's) is ignored.
  auto child = start({"sh", "-c", "trap '' 34; kill -34 0; sleep 0.2; exit 3"}, std::nullopt, 0ms);
  CHECK(wait_exit(child) == 3);
}

TEST_CASE("kill_job() (mongolock's own kill request) still kills the job") {
  auto child = start({"sleep", "30"}, std::nullopt, 0ms);
  child.kill_job();
  CHECK(wait_exit(child) == 128 + SIGKILL);
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("Process evidence");

TEST_CASE("proc_is_own(): /proc of this namespace names this process") { CHECK(proc_is_own()); }

TEST_CASE("A job's cgroup: populated while it runs, empty after cgroup.kill, removed on destruction") {
  auto group = JobCgroup::create("unit-test");
  if (!group.valid()) {
    MESSAGE("skipped: no cgroup of its own here: " << group.why_not());
    return;
  }
  const auto path = group.path();
  CHECK(group.state() == CgroupState::empty);
  const pid_t pid = fork();
  if (pid == 0) {
    const auto procs = path + "/cgroup.procs";
    FILE* f = std::fopen(procs.c_str(), "w");
    if (f == nullptr || std::fputs("0", f) < 0 || std::fclose(f) != 0) _exit(2);
    pause();
    _exit(0);
  }
  REQUIRE(pid > 0);
  const auto give_up = LeaseClock::now() + 5s;
  while (group.state() != CgroupState::populated && LeaseClock::now() < give_up)
    std::this_thread::sleep_for(5ms);
  CHECK(cgroup_state(path) == CgroupState::populated);
  CHECK(group.kill_all());
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  CHECK(cgroup_state(path) == CgroupState::empty);
  { const auto gone = std::move(group); }
  CHECK(cgroup_state(path) == CgroupState::gone); // removed, or another view: no proof either way
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

// Issue 30: the run releases on the guardian's "ended" report, not after the guardian's exit. The report is
// queued before the guardian exits, so once the socket is readable try_wait() must give the end and the
// command's status without having reaped the guardian (waitid(WNOWAIT) finds it still to be reaped).
TEST_CASE("try_wait() takes the job's end and status from the guardian's report; the guardian is reaped later") {
  for (const auto& [script, code, signo] : {std::tuple{"exit 7", 7, 0}, std::tuple{"kill -TERM $$", 128 + 15, 15}}) {
    CAPTURE(script);
    auto child = start({"sh", "-c", script}, std::nullopt, 0ms);
    pollfd report{child.report_fd(), POLLIN, 0};
    REQUIRE(poll(&report, 1, 20'000) == 1);
    const auto result = child.try_wait();
    CHECK(result.state == Child::WaitResult::exited);
    CHECK(result.exit_code == code);
    CHECK(result.signal == signo);
    CHECK(child.job_ended().has_value());
    siginfo_t info{};
    CHECK(waitid(P_PID, static_cast<id_t>(child.pid()), &info, WEXITED | WNOWAIT) == 0); // not reaped yet
  }                                                                                      // the destructor reaps it
}

// Issue 30: once the guardian's end of the control socket is closed, report_fd() is not to be polled (it
// would be readable, POLLHUP, on every pass of the supervisor's loop until the guardian is reaped).
TEST_CASE("report_fd() is -1 once the guardian's end of the control socket is read closed") {
  auto child = start({"true"}, std::nullopt, 0ms);
  const int fd = child.report_fd();
  REQUIRE(fd >= 0);
  siginfo_t info{};
  REQUIRE(waitid(P_PID, static_cast<id_t>(child.pid()), &info, WEXITED | WNOWAIT) == 0); // exited: socket closed
  CHECK(child.report_fd() == fd);                                                        // nothing read yet
  CHECK(child.job_ended().has_value());
  CHECK(child.report_fd() == -1);
  CHECK(child.try_wait().state == Child::WaitResult::exited);
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("Signals");

TEST_CASE("A signal pending when SignalBlock ends is discarded, not delivered") {
  {
    const SignalBlock block;
    REQUIRE(raise(SIGUSR1) == 0); // would end the test binary if delivered
  }
  sigset_t pending;
  sigpending(&pending);
  CHECK_FALSE(sigismember(&pending, SIGUSR1));
}

TEST_CASE("reset_inherited_signals(): SIGCHLD default; ignore_sigpipe(); a job still ends and is seen") {
  signal(SIGCHLD, SIG_IGN);
  reset_inherited_signals();
  CHECK(ignored_at_start(SIGCHLD));
  struct sigaction now {};
  sigaction(SIGCHLD, nullptr, &now);
  CHECK((now.sa_handler == SIG_DFL));
  ignore_sigpipe();
  sigaction(SIGPIPE, nullptr, &now);
  CHECK((now.sa_handler == SIG_IGN));
  auto child = start({"sh", "-c", "exit 7"}, std::nullopt, 0ms);
  CHECK(wait_exit(child) == 7);
  reset_inherited_signals(); // as found by the other tests: not ignored
  CHECK_FALSE(ignored_at_start(SIGCHLD));
}

TEST_SUITE_END();

// Holder files live in world-writable /dev/shm: what another user put there proves nothing (red team of
// issue 26: X16, a FIFO named like a dead run's holder file hung every run's sweep in open(2); X2, a
// holder file pre-created by another user carried forged evidence that let a run take over at once).
namespace {
// A pid that runs no process (for a dead run's file name), and a fresh start time for it.
pid_t unused_pid() {
  for (pid_t pid = 4000000; pid > 300; pid -= 7919)
    if (kill(pid, 0) != 0 && errno == ESRCH) return pid;
  return 0;
}
} // namespace

TEST_CASE("The holder-file sweep skips a FIFO named like a holder file instead of blocking on it") {
  const pid_t pid = unused_pid();
  REQUIRE(pid > 0);
  const auto path = holder_file_path(pid, 12345);
  REQUIRE(mkfifo(path.c_str(), 0666) == 0);
  // On a FIFO nobody writes to, a blocking open(2) never returns: run the sweep on a thread and give it
  // 5 s (it takes milliseconds; the check is for a hang, not for speed).
  std::atomic<bool> done = false;
  std::thread sweeper([&] {
    (void)sweep_holder_files();
    done = true;
  });
  const auto give_up = LeaseClock::now() + std::chrono::seconds(5);
  while (!done && LeaseClock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const bool finished = done; // before a writer end unblocks a hung open(2)
  if (!finished) {
    const int w = open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) close(w);
  }
  sweeper.join();
  unlink(path.c_str());
  CHECK(finished);
}

TEST_CASE("own_process_identity() is a forked child's own, not its parent's remembered one") {
  const auto parent = own_process_identity();
  REQUIRE(parent.complete());
  REQUIRE(own_process_identity().pid_start == parent.pid_start); // remembered: the same
  usleep(20'000); // the child's start (in 10 ms clock ticks) then differs from this process's
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const auto self = own_process_identity();
    const auto start = process_start(getpid()).value_or(-1);
    const bool own = self.complete() && self.pid_start == start && start != parent.pid_start;
    const char ok = own && self.boot_id == parent.boot_id ? 'y' : 'n';
    (void)!write(fds[1], &ok, 1);
    _exit(0);
  }
  close(fds[1]);
  char ok = 0;
  CHECK(read(fds[0], &ok, 1) == 1);
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(ok == 'y');
}

TEST_CASE("A holder file owned by another user, or writable by others, proves nothing") {
  if (geteuid() != 0) return; // chown needs root; the suites run as root (scripts/test)
  const auto self = own_process_identity();
  REQUIRE(self.complete());
  const pid_t pid = unused_pid();
  REQUIRE(pid > 0);
  const std::int64_t start = 12345;
  const auto path = holder_file_path(pid, start);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "", 0) == 0); // no job was started: the evidence of a run killed while it waited
  close(fd);
  LockRecord lock;
  lock.program = "x";
  lock.host = "h";
  lock.process = "h:" + std::to_string(pid);
  lock.command = "job"; // a run's lock (acquire's records its caller's place too, but has no holder file)
  lock.boot_id = self.boot_id;
  lock.pid_ns = self.pid_ns;
  lock.pid_start = start;
  // Root's own file: the holder is provably dead (its file is kept for the check: remove_file false).
  CHECK(holder_verdict(lock, self, "h", false).dead);
  REQUIRE(chown(path.c_str(), 65534, 65534) == 0); // nobody's
  const auto foreign = holder_verdict(lock, self, "h", false);
  CHECK_FALSE(foreign.dead);
  CHECK(foreign.why_not.find("not a regular file of root or this user") != std::string::npos);
  REQUIRE(chown(path.c_str(), 0, 0) == 0);
  REQUIRE(chmod(path.c_str(), 0666) == 0); // anyone may write it
  CHECK_FALSE(holder_verdict(lock, self, "h", false).dead);
  unlink(path.c_str());
}

// What the sweep removes and keeps (issue 30 made it skip a young job's evidence from one lstat, without
// /proc or the file's contents): a dead run's file that never recorded a job goes; one that recorded a job
// stays a day (an instant takeover reads it), then goes when its job had no cgroup; a live run's stays.
TEST_CASE("The holder-file sweep removes a waiting run's file, keeps a job's evidence for a day") {
  const pid_t pid = unused_pid();
  REQUIRE(pid > 0);
  const auto make = [](const std::string& path, const char* text) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0644);
    REQUIRE(fd >= 0);
    const auto n = static_cast<ssize_t>(std::char_traits<char>::length(text));
    REQUIRE(write(fd, text, static_cast<std::size_t>(n)) == n);
    close(fd);
  };
  const auto exists = [](const std::string& path) { return access(path.c_str(), F_OK) == 0; };
  const auto waited = holder_file_path(pid, 11111); // killed while it waited: no job recorded
  const auto young = holder_file_path(pid, 22222);  // killed while its job ran, just now
  const auto old = holder_file_path(pid, 33333);    // ... two days ago, its job without a cgroup
  const auto live = holder_file_path(getppid(), process_start(getppid()).value_or(1));
  make(waited, "");
  make(young, "4242\n");
  make(old, "4243\n");
  const bool own_live = !exists(live);
  if (own_live) make(live, "");
  const timespec two_days_ago[2] = {{time(nullptr) - 2 * 86400, 0}, {time(nullptr) - 2 * 86400, 0}};
  REQUIRE(utimensat(AT_FDCWD, old.c_str(), two_days_ago, 0) == 0);
  (void)sweep_holder_files();
  CHECK_FALSE(exists(waited));
  CHECK(exists(young));
  CHECK_FALSE(exists(old));
  if (own_live) CHECK(exists(live)); // its process runs: kept even with no job recorded
  for (const auto& path : {waited, young, old})
    unlink(path.c_str());
  if (own_live) unlink(live.c_str());
}

namespace {

bool file_exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

void make_note(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  close(fd);
}

} // namespace

TEST_CASE("own-orphan notes: only this PID namespace's stale notes are swept (red team X3s)") {
  const auto self = own_process_identity();
  REQUIRE(self.pid_ns.starts_with("pid:["));
  const auto inode = self.pid_ns.substr(5, self.pid_ns.size() - 6);
  const auto prefix = "/dev/shm/mongolock-orphan-" + std::to_string(geteuid()) + "-";
  // A container's note of its PID 1 (a start this namespace's pid 1 does not have), in the form without the
  // namespace and with another namespace's inode: neither is this namespace's to sweep.
  const auto container_note = prefix + "1-123456789123-0000000000000000";
  const auto other_ns_note = prefix + "4026599999-1-123456789123-0000000000000000";
  // This namespace's note of a caller that no longer runs (pid 1 never started then): swept.
  const auto own_stale_note = prefix + inode + "-1-123456789123-0000000000000000";
  for (const auto* path : {&container_note, &other_ns_note, &own_stale_note})
    make_note(*path);
  LockRecord lock;
  lock.program = "x3s-unit-" + std::to_string(getpid());
  lock.id = "id";
  lock.token = "token";
  const auto start = process_start(getpid());
  REQUIRE(start);
  note_own_orphan(getpid(), *start, lock);
  CHECK(file_exists(container_note));
  CHECK(file_exists(other_ns_note));
  CHECK_FALSE(file_exists(own_stale_note));
  CHECK(noted_own_orphan(getpid(), *start, lock));
  CHECK_FALSE(noted_own_orphan(0, *start, lock)); // no caller: never a note
  CHECK_FALSE(noted_own_orphan(getpid(), 0, lock));
  for (const auto* path : {&container_note, &other_ns_note, &own_stale_note})
    unlink(path->c_str());
  // This caller's own note: its name carries the namespace.
  DIR* shm = opendir("/dev/shm");
  REQUIRE(shm != nullptr);
  bool found = false;
  const auto own_prefix = "mongolock-orphan-" + std::to_string(geteuid()) + "-" + inode + "-" +
                          std::to_string(getpid()) + "-" + std::to_string(*start) + "-";
  while (const dirent* entry = readdir(shm)) {
    if (std::string_view(entry->d_name).starts_with(own_prefix)) {
      found = true;
      unlink(("/dev/shm/" + std::string(entry->d_name)).c_str());
    }
  }
  closedir(shm);
  CHECK(found);
}

TEST_CASE("A holder file that cannot be written becomes no evidence (group-writable), one that can stays the owner's") {
  char dir_template[] = "/tmp/mongolock-unit-holder-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::string path = std::string(dir_template) + "/holder";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  mongolock::record_job_group(fd, 4242, "/sys/fs/cgroup/x");
  struct stat st {};
  REQUIRE(fstat(fd, &st) == 0);
  CHECK((st.st_mode & 0777) == 0644);
  CHECK(st.st_size == static_cast<off_t>(std::string("4242\n/sys/fs/cgroup/x\n").size()));
  close(fd);
  // Read-only: the pwrite fails (EBADF) as on a full /dev/shm (ENOSPC), and the truncation too.
  const int ro = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(ro >= 0);
  mongolock::record_job_group(ro, 4243, nullptr);
  REQUIRE(fstat(ro, &st) == 0);
  CHECK((st.st_mode & S_IWGRP) != 0);
  close(ro);
  unlink(path.c_str());
  rmdir(dir_template);
}
