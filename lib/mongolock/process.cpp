#include <mongolock/cgroup.hpp>
#include <mongolock/error.hpp>
#include <mongolock/guardian_deadline.hpp>
#include <mongolock/liveness.hpp>
#include <mongolock/process.hpp>
#include <mongolock/text.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <limits>
#include <linux/sched.h>
#include <memory>
#include <poll.h>
#include <string>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace mongolock {

const std::vector<int>& forwarded_signals() {
  static const std::vector<int> signals{SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  return signals;
}

std::optional<int> take_forwarded_signal(std::chrono::milliseconds timeout) {
  sigset_t forwarded;
  sigemptyset(&forwarded);
  for (const int s : forwarded_signals())
    sigaddset(&forwarded, s);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
  const timespec limit{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  siginfo_t info;
  int signo;
  do {
    signo = sigtimedwait(&forwarded, &info, &limit);
  } while (signo < 0 && errno == EINTR);
  return signo > 0 ? std::optional(signo) : std::nullopt;
}

SignalBlock::SignalBlock() {
  sigemptyset(&m_blocked);
  for (const int s : forwarded_signals())
    sigaddset(&m_blocked, s);
  sigaddset(&m_blocked, SIGCHLD);
  sigaddset(&m_blocked, SIGTTOU); // so tcsetpgrp() from the background works
  sigaddset(&m_blocked, SIGTTIN);
  pthread_sigmask(SIG_BLOCK, &m_blocked, &m_previous);
}

SignalBlock::~SignalBlock() {
  if (!m_restore) return; // blocked until exit: a pending signal is never delivered
  // A signal that came after the last read (e.g. during the release) is dropped, not delivered by the
  // restored mask: the command's work is done and its outcome recorded; it must not turn into 128+N.
  const timespec zero{0, 0};
  while (sigtimedwait(&m_blocked, nullptr, &zero) > 0) {}
  pthread_sigmask(SIG_SETMASK, &m_previous, nullptr);
}

namespace {
bool g_chld_ignored = false; // SIGCHLD was ignored when mongolock started
bool g_pipe_ignored = false; // SIGPIPE was ignored when mongolock started
sigset_t g_unblocked;        // what reset_inherited_signals() unblocked (given back to the command)
} // namespace

void reset_inherited_signals() {
  struct sigaction old {};
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  if (sigaction(SIGCHLD, &dfl, &old) == 0) g_chld_ignored = old.sa_handler == SIG_IGN;
  if (sigaction(SIGPIPE, nullptr, &old) == 0) g_pipe_ignored = old.sa_handler == SIG_IGN;
  // A mongolock started with these blocked would not stop with its job (Ctrl-Z) or be told of its end.
  sigset_t current;
  pthread_sigmask(SIG_SETMASK, nullptr, &current);
  sigemptyset(&g_unblocked);
  for (const int s : {SIGTSTP, SIGCONT, SIGCHLD}) {
    if (sigismember(&current, s) == 1) sigaddset(&g_unblocked, s);
  }
  pthread_sigmask(SIG_UNBLOCK, &g_unblocked, nullptr);
}

void ignore_sigpipe() {
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGPIPE, &ign, nullptr);
}

bool ignored_at_start(int signo) {
  if (signo == SIGCHLD) return g_chld_ignored;
  if (signo == SIGPIPE) return g_pipe_ignored;
  return false;
}

namespace {

// An fd of this process's controlling terminal (stdin, stdout or stderr), or -1.
int controlling_terminal() {
  for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    if (isatty(fd) && tcgetpgrp(fd) >= 0) return fd;
  }
  return -1;
}

// "NAME=VALUE" strings for the command: this environment with spec.env set, replaced or removed.
std::vector<std::string> child_environment(const ChildSpec& spec) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [key, value] : spec.env)
      replaced = replaced || key == name;
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [key, value] : spec.env) {
    if (!value.empty()) env.push_back(key + "=" + value);
  }
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings)
    out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// True while process `pid` is stopped (state T in /proc/PID/stat).
bool is_stopped(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const auto n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')'); // the name may contain spaces and parentheses
  return paren != nullptr && paren[1] == ' ' && (paren[2] == 'T' || paren[2] == 't');
}

} // namespace

bool proc_is_own() {
  char link[32];
  const auto n = readlink("/proc/self", link, sizeof link - 1);
  if (n <= 0) return false;
  link[n] = '\0';
  char* end = nullptr;
  const long pid = std::strtol(link, &end, 10);
  return end != link && *end == '\0' && pid == getpid();
}

namespace {

// The children of `parent`, from /proc/*/stat, zombies included: a thread-group leader whose main thread
// called pthread_exit() shows as a zombie while its other threads run, and only a signal to it ends them.
// A real zombie is the caller's own unreaped child, so its pid cannot have been reused: signalling it is
// harmless.
// Nothing when /proc is not this PID namespace's (proc_is_own()): its pids would be other processes.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  if (!proc_is_own()) return children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return children;
  while (const dirent* entry = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[512];
    const auto n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    const char* paren = std::strrchr(buf, ')');
    char state = 0;
    long ppid = 0;
    if (paren != nullptr && std::sscanf(paren + 1, " %c %ld", &state, &ppid) == 2 && ppid == parent) {
      children.push_back(static_cast<pid_t>(pid));
    }
  }
  closedir(proc);
  return children;
}

// A message on the control socket between mongolock and the guardian (SOCK_SEQPACKET: one message per
// send, never split). Times are CLOCK_BOOTTIME nanoseconds (LeaseClock).
struct ControlMessage {
  enum Kind : std::int64_t { deadline = 1, stop = 2, fired = 3, ended = 4, unkillable = 5, fired_killed = 6 };
  std::int64_t kind = 0;
  std::int64_t at = 0;     // deadline: the new deadline; stop: when to SIGKILL; fired: when the guardian acted
                           // (fired_killed: and sent SIGKILL at once, no SIGTERM: the kill grace had passed);
                           // ended: when the whole job had ended (the guardian is about to exit);
                           // unkillable: the pid that SIGKILL could not reach (EPERM)
  std::int64_t sent = 0;   // deadline: when mongolock sent it (an extension sent before the deadline counts
                           // whenever the guardian reads it: the renewal was confirmed in time)
  std::int64_t status = 0; // ended: the command's wait status (waitpid), which the guardian's exit repeats, so
                           // that mongolock may release on the report without waiting for that exit (issue 30)
};

// Moves the guardian (`self`, leader of the job's process group) out of that group, into the new group of a
// short-lived child of its own, so that kill(-self, SIGKILL) reaches every member of the job's group but the
// guardian, without /proc. The child exits when `gate` closes (reaped by the caller's waitpid(-1) loop).
// Returns false when it could not (then the group is not signalled as a whole). Async-signal-safe.
bool leave_job_group(pid_t self) {
  if (getpgid(0) != self) return true; // left already
  int gate[2];
  if (pipe2(gate, O_CLOEXEC) != 0) return false;
  const pid_t helper = fork();
  if (helper == 0) {
    close(gate[1]);
    setpgid(0, 0);
    char c;
    while (read(gate[0], &c, 1) < 0 && errno == EINTR) {}
    _exit(0);
  }
  close(gate[0]);
  bool moved = false;
  if (helper > 0) {
    setpgid(helper, helper); // also here, so that the group exists before we join it
    moved = setpgid(0, helper) == 0;
  }
  close(gate[1]);
  return moved;
}

// The guardian's final kill: round after round until `self` (a subreaper) has no child left, it kills the
// job's cgroup (when there is one), the job's process group (`self` left it first: leave_job_group()), and
// every child of `self` that /proc lists (when it is this namespace's): the orphans of a killed child come
// back to `self` and go in the next round. Not /proc alone: without it (none, or another namespace's), the
// cgroup and the group are still killed. A child that cannot be signalled (EPERM: it runs as another user,
// e.g. a setuid program) is reported once on `control` (when >= 0) and waited for. Between rounds it
// sleeps 2ms, doubling up to 100ms while nothing ends, so it never spins. Returns the number of SIGKILLs
// sent (0: there was nothing to kill). System calls only, but children_of()'s vector (runs after fork()).
int kill_children(pid_t self, int control, const JobCgroup* cgroup) {
  pid_t reported[32];
  std::size_t n_reported = 0;
  int killed = 0;
  useconds_t pause = 2000;
  const bool group_left = leave_job_group(self);
  for (;;) {
    if (cgroup != nullptr && cgroup->valid() && cgroup->state() != CgroupState::empty && cgroup->kill_all()) ++killed;
    if (group_left && kill(-self, SIGKILL) == 0) ++killed;
    for (const pid_t child : children_of(self)) {
      if (kill(child, SIGKILL) == 0) {
        ++killed;
        continue;
      }
      if (errno != EPERM || control < 0) continue;
      bool known = false;
      for (std::size_t i = 0; i < n_reported; ++i)
        known = known || reported[i] == child;
      if (known || n_reported == std::size(reported)) continue;
      reported[n_reported++] = child;
      const ControlMessage message{ControlMessage::unkillable, child};
      [[maybe_unused]] const auto n = send(control, &message, sizeof message, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    int status = 0;
    bool reaped = false;
    pid_t done;
    while ((done = waitpid(-1, &status, WNOHANG)) > 0)
      reaped = true;
    if (done < 0 && errno == ECHILD) return killed;
    pause = reaped ? 2000 : std::min<useconds_t>(pause * 2, 100'000);
    usleep(pause);
  }
}

// What the guardian executes when mongolock died (ChildSpec::orphan_request): prepared before fork.
struct OrphanExec {
  int fd = -1;                      // the memfd holding the request (close-on-exec until used)
  std::vector<char*> argv;          // "/proc/self/exe", k_release_orphaned_command, the fd's number
  std::vector<std::string> strings; // what argv points into
};

// Kills every descendant of the guardian, wherever it went (own session, own group: kill_children()), and exits; when
// mongolock has died (the guardian's parent is no longer `mongolock`) and `orphan` is prepared, first
// executes mongolock again to release the locks (the fd stays open across that exec only).
[[noreturn]] void kill_descendants_and_exit(pid_t guardian, int control, const JobCgroup* cgroup, pid_t mongolock = 0,
                                            const OrphanExec* orphan = nullptr) {
  kill_children(guardian, control, cgroup);
  if (orphan != nullptr && orphan->fd >= 0 && getppid() != mongolock && fcntl(orphan->fd, F_SETFD, 0) == 0) {
    execv("/proc/self/exe", orphan->argv.data());
  }
  // Dies of the signal that killed the job, so that mongolock reports the run as killed by SIGKILL
  // (history `signal`, the NOTE column), not as a job that exited with 137.
  kill(getpid(), SIGKILL);
  _exit(128 + SIGKILL);
}

// Exits the way the command ended: its exit status, or the same signal (without a second core dump).
[[noreturn]] void exit_like(pid_t guardian, int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  const int sig = WTERMSIG(status);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(sig, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  sigprocmask(SIG_UNBLOCK, &only, nullptr);
  kill(guardian, sig);
  _exit(128 + sig);
}

std::int64_t boottime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

constexpr std::int64_t k_never = GuardianDeadline::k_never;

// The guardian: the first process of the command's process group, between mongolock and the command.
// - It is a child subreaper: processes the command leaves behind become its children, and it exits only
//   when the command and all of them have ended, with the command's status (or dying of the same signal).
//   So the lock is held until nothing of the job runs.
// - On `kill_signal` (mongolock's PR_SET_PDEATHSIG, or mongolock asking: Child::kill_job()), or when
//   mongolock's end of the control socket closes, it kills every descendant, including those that left
//   the process group, and exits.
// - It is the lease's watchdog: at `deadline` (CLOCK_BOOTTIME ns; k_never: not armed), moved by
//   deadline messages on `control`, it SIGTERMs the group and kills every descendant `grace_ns` later,
//   and reports that it did; a stop message does the same at once. The deadline is checked first on
//   every wake-up, before any message is read, so a resumed guardian never acts on a late extension.
// - When the command stops (Ctrl-Z, SIGTTIN), it stops too, so that mongolock sees the job stop.
// Runs in the forked child only (system calls only); never returns.
// Sent on the exec pipe instead of an errno when ChildSpec::start_by had passed: nothing was started.
constexpr int k_start_by_passed = -1;
// ... or that the command's process could not move itself into the job's cgroup (command_entry()).
constexpr int k_cgroup_join_failed = -2;
// Not sent: Child::spawn()'s own verdict when start_by passed with neither the exec nor a report (wait_for_exec()).
constexpr int k_start_stalled = -3;

// In a forked process: when `start_by` (CLOCK_BOOTTIME ns) has passed, reports it on `exec_pipe` and exits.
void exit_if_too_late(std::int64_t start_by, int exec_pipe) {
  if (boottime_ns() < start_by) return;
  const int late = k_start_by_passed;
  [[maybe_unused]] const auto n = write(exec_pipe, &late, sizeof late);
  _exit(128 + SIGKILL);
}

// What the guardian needs besides its deadline, prepared before fork (read only after it).
struct GuardianSetup {
  pid_t mongolock = 0;
  int kill_signal = 0;
  int control = -1;
  bool job_control = false;           // mongolock has a terminal: a stop of the command is job control
  const JobCgroup* cgroup = nullptr;  // the job's cgroup (valid() or not)
  const OrphanExec* orphan = nullptr; // what to execute when mongolock died
  int holder_fd = -1;                 // ChildSpec::holder_fd
};

// The guardian once the command runs: its loop over the signals (SIGCHLD, the kill signal), the
// watchdog's timer and mongolock's control messages. Runs in the forked guardian only (system calls only).
class GuardianLoop {
public:
  GuardianLoop(const GuardianSetup& setup, pid_t command, GuardianDeadline watchdog, int signals, int timer)
      : m_setup(setup), m_control(setup.control), m_command(command), m_guardian(getpid()), m_watchdog(watchdog),
        m_signals(signals), m_timer(timer) {}

  [[noreturn]] void run() {
    for (;;) {
      // Mongolock's messages first: an extension it sent before the deadline counts however late it is
      // read (the guardian was stopped or starved); one sent after it does not (GuardianDeadline::extend).
      if (m_control >= 0) read_control();
      check_deadline();
      pollfd fds[3] = {{m_signals, POLLIN, 0}, {m_timer, POLLIN, 0}, {m_control, POLLIN, 0}};
      if (poll(fds, m_control >= 0 ? 3 : 2, -1) < 0 && errno != EINTR) kill_all();
      if (m_control >= 0) read_control();
      check_deadline();
      std::uint64_t expirations = 0;
      [[maybe_unused]] const auto t = read(m_timer, &expirations, sizeof expirations);
      if (read_signals()) reap();
    }
  }

private:
  [[noreturn]] void kill_all(bool mongolock_may_be_gone = false) {
    kill_descendants_and_exit(m_guardian, m_control, m_setup.cgroup, m_setup.mongolock,
                              mongolock_may_be_gone ? m_setup.orphan : nullptr);
  }

  // Carries out what the watchdog decided: SIGTERM (blocked in the guardian itself) and SIGCONT (a
  // stopped job must run to act on it) to the group, the "fired" report (saying whether a SIGTERM went
  // first), the SIGKILL of everything.
  void act(GuardianDeadline::Action action, std::int64_t now) {
    if (action.term) {
      kill(-m_guardian, SIGTERM);
      kill(-m_guardian, SIGCONT);
    }
    if (action.fired) send_message(action.term ? ControlMessage::fired : ControlMessage::fired_killed, now);
    if (action.kill) kill_all();
  }

  void send_message(ControlMessage::Kind kind, std::int64_t at, int status = 0) const {
    const ControlMessage message{kind, at, boottime_ns(), status};
    [[maybe_unused]] const auto n = send(m_control, &message, sizeof message, MSG_DONTWAIT | MSG_NOSIGNAL);
  }

  // The deadline first: whatever woke us, a passed deadline is acted on before any signal is read.
  void check_deadline() {
    const auto now = boottime_ns();
    act(m_watchdog.check(now), now);
    const auto next = m_watchdog.next_wakeup();
    itimerspec spec{};
    if (next != k_never) {
      spec.it_value.tv_sec = static_cast<time_t>(next / 1'000'000'000);
      spec.it_value.tv_nsec = static_cast<long>(next % 1'000'000'000);
    }
    timerfd_settime(m_timer, TFD_TIMER_ABSTIME, &spec, nullptr); // zero disarms
  }

  // True when a child reported (SIGCHLD). The kill request comes first, even when a report came too; it
  // counts only when mongolock sent it (its PR_SET_PDEATHSIG or Child::kill_job(): si_pid is mongolock's):
  // the job's own `kill -RTMIN 0` reaches the guardian too, as a member of the job's group (issue 26).
  bool read_signals() {
    bool child_event = false;
    signalfd_siginfo info{};
    while (read(m_signals, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      if (static_cast<int>(info.ssi_signo) != m_setup.kill_signal) {
        child_event = true;
      } else if (static_cast<pid_t>(info.ssi_pid) == m_setup.mongolock) {
        kill_all(true);
      }
    }
    return child_event;
  }

  void read_control() {
    ControlMessage message;
    ssize_t n;
    while ((n = recv(m_control, &message, sizeof message, MSG_DONTWAIT)) == static_cast<ssize_t>(sizeof message)) {
      if (message.kind == ControlMessage::deadline) m_watchdog.extend(message.at, message.sent);
      if (message.kind == ControlMessage::stop) {
        const auto now = boottime_ns();
        act(m_watchdog.stop(now, message.at), now);
      }
    }
    if (n == 0) kill_all(true); // mongolock is gone
  }

  void reap() {
    for (;;) {
      int status = 0;
      const pid_t done = waitpid(-1, &status, WNOHANG | WUNTRACED);
      if (done > 0) {
        // The command stopped and still is (not a stale report from before a SIGCONT): with a terminal, stop
        // too, so that mongolock sees the job stop (job control). Without one nobody would continue the
        // guardian: it runs on, keeping the deadline and reading mongolock's messages (issue 26).
        if (WIFSTOPPED(status) && done == m_command && m_setup.job_control && is_stopped(m_command)) raise(SIGSTOP);
        if (done == m_command && !WIFSTOPPED(status)) {
          m_command_done = true;
          m_command_status = status;
        }
        continue;
      }
      if (done < 0 && errno == ECHILD && m_command_done) {
        // When the job ended, for a mongolock that was not running then (its deadline may pass before it
        // reaps us), and how: mongolock releases on this report, reaping us afterwards (Child::try_wait()).
        // Sent only now that nothing of the job is left (ECHILD: we are the subreaper of all of it).
        send_message(ControlMessage::ended, boottime_ns(), m_command_status);
        // The job's cgroup is empty now: removed here, beside mongolock's release, rather than by mongolock
        // after it (its destructor then finds it gone; one with groups below it is left to that destructor).
        if (m_setup.cgroup != nullptr && m_setup.cgroup->valid()) rmdir(m_setup.cgroup->path().c_str());
        exit_like(m_guardian, m_command_status);
      }
      return;
    }
  }

  const GuardianSetup& m_setup;
  int m_control;
  pid_t m_command;
  pid_t m_guardian;
  GuardianDeadline m_watchdog;
  int m_signals;
  int m_timer;
  bool m_command_done = false;
  int m_command_status = 0;
};

// Blocks SIGCHLD and `kill_signal` (read from a signalfd) and the signals sent to the job's group (they
// are for the command, which starts with its own mask, never for the guardian, whatever mask it
// inherited); returns the set the signalfd reads.
sigset_t block_guardian_signals(int kill_signal) {
  sigset_t waited;
  sigemptyset(&waited);
  sigaddset(&waited, SIGCHLD);
  sigaddset(&waited, kill_signal);
  sigprocmask(SIG_BLOCK, &waited, nullptr);
  sigset_t for_the_command;
  sigemptyset(&for_the_command);
  for (const int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2})
    sigaddset(&for_the_command, s);
  sigprocmask(SIG_BLOCK, &for_the_command, nullptr);
  return waited;
}

} // namespace

void record_job_group(int fd, pid_t pgid, const char* cgroup) {
  if (fd < 0) return;
  char text[4200];
  auto n = static_cast<std::size_t>(write_decimal(text, static_cast<unsigned long>(pgid)) - text);
  text[n++] = '\n';
  const std::size_t path_length = cgroup == nullptr ? 0 : std::strlen(cgroup);
  if (path_length > 0 && path_length < sizeof text - n - 1) {
    std::memcpy(text + n, cgroup, path_length);
    n += path_length;
    text[n++] = '\n';
  }
  const auto w = pwrite(fd, text, n, 0);
  const auto t = ftruncate(fd, static_cast<off_t>(n));
  // A file left empty or partly written would read as other evidence ("no job was ever started": an instant
  // takeover beside the job). Writable by its group, it is no evidence at all (liveness.cpp open_evidence()):
  // a same-host run waits for the lease (red team 8: a full /dev/shm).
  if (w != static_cast<ssize_t>(n) || t != 0) static_cast<void>(fchmod(fd, S_IRUSR | S_IWUSR | S_IWGRP));
}

namespace {

// Forks the command's process: into the job's cgroup `cgroup_dir` (a directory fd; -1: none) with clone3
// CLONE_INTO_CGROUP (Linux 5.7+: the process never runs outside it), else (or when that fails: ENOSYS before
// Linux 5.3 or under a seccomp filter, EINVAL before 5.7) a plain fork(), after which the process moves itself
// into the group before its exec: `join_fd` is set to what command_entry() joins (-1: nothing, it started
// there) before the process exists (red team 10, F1: it ran outside the group mongolock counted on).
// The child of clone3 runs system calls only (as after fork(); glibc's fork handlers do not run).
pid_t fork_command(int cgroup_dir, int& join_fd) {
  if (cgroup_dir >= 0) {
    join_fd = -1;
    clone_args args{};
    args.flags = CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<std::uint64_t>(cgroup_dir);
    const long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid >= 0) return static_cast<pid_t>(pid);
  }
  join_fd = cgroup_dir;
  return fork();
}

// The command's process moves itself into the job's cgroup (its directory fd), as the kernel's cgroup2
// interface allows: "0" written to the group's cgroup.procs. False (errno set) when it could not.
bool join_cgroup(int cgroup_dir) {
  const int fd = openat(cgroup_dir, "cgroup.procs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool joined = write(fd, "0", 1) == 1;
  const int err = errno;
  close(fd);
  errno = err;
  return joined;
}

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) // ASan does not follow a stack switch it did not make
// clone3 for a child that runs `entry(arg)` on the stack that `args` gives it and never returns to the
// caller's code: the child leaves by exec or _exit, or by the exit system call with entry's value. Needed
// because a child on a new stack cannot return from syscall() (its caller's frames are not there). The
// system call keeps every register but rax, rcx and r11, so entry and arg reach the child in r8 and r9.
// Returns the child's pid, or -1 with errno set.
long clone3_on_own_stack(clone_args* args, int (*entry)(void*), void* arg) {
  long ret = SYS_clone3;
  register long r8 __asm__("r8") = reinterpret_cast<long>(entry);
  register long r9 __asm__("r9") = reinterpret_cast<long>(arg);
  __asm__ volatile("syscall\n\t"
                   "test %%rax, %%rax\n\t"
                   "jnz 1f\n\t"
                   "xor %%ebp, %%ebp\n\t"
                   "mov %%r9, %%rdi\n\t"
                   "call *%%r8\n\t"
                   "mov %%eax, %%edi\n\t"
                   "mov %[sys_exit], %%eax\n\t"
                   "syscall\n\t"
                   "hlt\n"
                   "1:"
                   : "+a"(ret)
                   : "D"(args), "S"(sizeof *args), "r"(r8), "r"(r9), [sys_exit] "i"(SYS_exit)
                   : "rcx", "r11", "memory", "cc");
  if (ret < 0) {
    errno = static_cast<int>(-ret);
    return -1;
  }
  return ret;
}
#endif

// The command's process's stack while it shares the guardian's memory (start_command()): execvpe's
// buffers (a path of at most PATH_MAX, a script's argv of `argc` + 2 pointers) and our calls before it,
// with a guard page below. Unmapped by the destructor, once the process has exec'd or ended.
class CommandStack {
public:
  explicit CommandStack(std::size_t argc) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    m_size = ((std::size_t{256} << 10) + (argc + 3) * sizeof(char*) + page - 1) / page * page + page;
    void* base = mmap(nullptr, m_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (base == MAP_FAILED) return;
    m_base = static_cast<char*>(base);
    mprotect(m_base, page, PROT_NONE);
  }
  ~CommandStack() {
    if (m_base != nullptr) munmap(m_base, m_size);
  }
  CommandStack(const CommandStack&) = delete;
  CommandStack& operator=(const CommandStack&) = delete;
  [[nodiscard]] char* base() const { return m_base; }
  [[nodiscard]] std::size_t size() const { return m_size; }

private:
  char* m_base = nullptr;
  std::size_t m_size = 0;
};

// Starts the command's process running `entry(arg)`, which execs or _exits. Where it can (x86-64 without ASan, Linux
// 5.3+), the process shares the guardian's memory until its exec, on a stack of its own, and the guardian
// waits meanwhile (CLONE_VM | CLONE_VFORK, as glibc's posix_spawn does): no copy of the address space to
// make and, at the exec, to tear down (issue 30). In the job's cgroup where there is one (CLONE_INTO_CGROUP,
// Linux 5.7+: the process never runs outside it). Else fork_command(). Where it starts outside the job's
// cgroup (there is one, but CLONE_INTO_CGROUP was refused), `join_fd` is set to the group's directory fd before
// the process exists, and the process moves itself in before its exec (command_entry(); -1 otherwise): with
// a cgroup, the command runs in it or not at all. Returns the pid, or -1 (errno) when no process could be
// made. Only system calls after fork.
pid_t start_command(const JobCgroup* cgroup, [[maybe_unused]] const CommandStack& stack, int (*entry)(void*), void* arg,
                    int& join_fd) {
  const int cgroup_dir = cgroup != nullptr && cgroup->valid() ? cgroup->dir_fd() : -1;
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) // ASan does not follow a stack switch it did not make
  if (stack.base() != nullptr) {
    for (const bool with_cgroup : {cgroup_dir >= 0, false}) {
      join_fd = with_cgroup ? -1 : cgroup_dir;
      clone_args args{};
      args.flags = CLONE_VM | CLONE_VFORK | (with_cgroup ? CLONE_INTO_CGROUP : 0);
      args.exit_signal = SIGCHLD;
      args.stack = reinterpret_cast<std::uint64_t>(stack.base());
      args.stack_size = stack.size();
      if (with_cgroup) args.cgroup = static_cast<std::uint64_t>(cgroup_dir);
      const long pid = clone3_on_own_stack(&args, entry, arg);
      if (pid > 0) return static_cast<pid_t>(pid);
      if (!with_cgroup) break; // ENOSYS (before Linux 5.3) or refused: fork below
    }
  }
#endif
  const pid_t pid = fork_command(cgroup_dir, join_fd);
  if (pid == 0) _exit(entry(arg));
  return pid;
}

// What the command's process needs from the guardian: read only (it may share the guardian's memory).
template <typename Exec> struct CommandEntry {
  const Exec* exec = nullptr;
  int exec_pipe = -1;
  std::int64_t start_by = 0;
  pid_t guardian = 0;
  int join_cgroup = -1; // start_command()'s join_fd: the job's cgroup to move into before the exec, or -1
};

// The command's process from its start to its exec: never returns (exec, or _exit with the exec's errno
// written to the exec pipe). System calls only, and no writes to memory but its own stack and errno (the
// guardian's, which it does not read until its own next call): it may share the guardian's memory.
template <typename Exec> int command_entry(void* arg) {
  const auto& entry = *static_cast<const CommandEntry<Exec>*>(arg);
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != entry.guardian) _exit(128 + SIGKILL);
  if (entry.join_cgroup >= 0 && !join_cgroup(entry.join_cgroup)) {
    const int failed = k_cgroup_join_failed; // never run outside the group mongolock counts on
    [[maybe_unused]] const auto n = write(entry.exec_pipe, &failed, sizeof failed);
    _exit(126);
  }
  exit_if_too_late(entry.start_by, entry.exec_pipe); // the last moment before the job exists
  (*entry.exec)();
  const int err = errno;
  [[maybe_unused]] const auto n = write(entry.exec_pipe, &err, sizeof err);
  _exit(127);
}

template <typename Exec>
[[noreturn]] void run_guardian(const GuardianSetup& setup, int exec_pipe, std::int64_t deadline, std::int64_t grace_ns,
                               std::int64_t start_by, std::size_t argc, const Exec& exec) {
  const sigset_t waited = block_guardian_signals(setup.kill_signal);
  prctl(PR_SET_PDEATHSIG, setup.kill_signal);
  if (getppid() != setup.mongolock) _exit(128 + SIGKILL); // mongolock died before prctl took effect
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t guardian = getpid();
  exit_if_too_late(start_by, exec_pipe);                // the lease ended before the job could start: never start it
  record_job_group(setup.holder_fd, guardian, nullptr); // before the job exists: the group it starts in (ours)
  CommandEntry<Exec> entry{.exec = &exec, .exec_pipe = exec_pipe, .start_by = start_by, .guardian = guardian};
  pid_t command = -1;
  {
    const CommandStack stack(argc);
    command = start_command(setup.cgroup, stack, command_entry<Exec>, &entry, entry.join_cgroup);
  }
  // No process for the command (EAGAIN at a pids limit): said on the exec pipe as an exec failure is (red team 10, F5).
  if (command < 0) {
    const int err = errno;
    [[maybe_unused]] const auto n = write(exec_pipe, &err, sizeof err);
    _exit(126);
  }
  close(exec_pipe); // mongolock sees end-of-file once the command has exec'd (the pipe is close-on-exec)
  // In its cgroup where there is one: started there, or it moves itself in before its exec (or never execs).
  if (setup.cgroup != nullptr && setup.cgroup->valid()) {
    record_job_group(setup.holder_fd, guardian, setup.cgroup->path().c_str());
  }
  const int signals = signalfd(-1, &waited, SFD_NONBLOCK | SFD_CLOEXEC);
  const int timer = timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
  if (signals < 0 || timer < 0) kill_descendants_and_exit(guardian, setup.control, setup.cgroup);
  GuardianLoop(setup, command, GuardianDeadline(deadline, grace_ns), signals, timer).run();
}

} // namespace

namespace {

// The request in a memfd (close-on-exec, so the job never inherits it) and the argv to execute; nothing
// when there is no request or the kernel has no memfd (then mongolock's death only ends the job).
OrphanExec prepare_orphan_exec(const std::optional<std::string>& request) {
  OrphanExec orphan;
  if (!request) return orphan;
  const int fd = memfd_create("mongolock-orphan-release", MFD_CLOEXEC);
  if (fd < 0) return orphan;
  std::size_t done = 0;
  while (done < request->size()) {
    const auto n = write(fd, request->data() + done, request->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return orphan;
    }
    done += static_cast<std::size_t>(n);
  }
  lseek(fd, 0, SEEK_SET);
  orphan.fd = fd;
  orphan.strings = {"/proc/self/exe", std::string(k_release_orphaned_command), std::to_string(fd)};
  for (auto& s : orphan.strings)
    orphan.argv.push_back(s.data());
  orphan.argv.push_back(nullptr);
  return orphan;
}

} // namespace

namespace {

// Why the command could not start: the lease ended first (76), not found (127), or not executable (126).
Error exec_failure(const std::string& name, int exec_errno) {
  if (exec_errno == k_start_by_passed) {
    return Error(k_exit_lease_lost, fmt::format("the lease's renew deadline passed before '{}' could start "
                                                "(mongolock or its guardian was stopped or starved of CPU); "
                                                "the command was not started",
                                                name));
  }
  if (exec_errno == k_start_stalled) {
    return Error(k_exit_lease_lost,
                 fmt::format("the lease's renew deadline passed before '{}' could start: its process "
                             "was stopped or starved of CPU before its exec, and was killed; the "
                             "command was not started",
                             name));
  }
  if (exec_errno == k_cgroup_join_failed) {
    return Error(k_exit_cannot_execute,
                 fmt::format("cannot start '{}' in the job's own cgroup: the kernel refused clone3 into it and the "
                             "move into it (cgroup.procs) failed; the command was not started",
                             name));
  }
  if (exec_errno == ENOENT || exec_errno == ENOTDIR) {
    return Error(k_exit_not_found,
                 fmt::format("command not found: '{}'; check the name and PATH, or give a full path", name));
  }
  return Error(k_exit_cannot_execute, fmt::format("cannot execute '{}': {}", name, std::strerror(exec_errno)));
}

} // namespace

namespace {

// In the command's process before exec: a signal handler (mongolock installs none; a program embedding
// this may) would run if a signal came between the unblocking of the mask and the exec: the default, as
// exec would give it. Async-signal-safe.
void reset_caught_handlers() {
  for (const int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) {
    struct sigaction found {};
    if (sigaction(s, nullptr, &found) != 0 || found.sa_handler == SIG_IGN || found.sa_handler == SIG_DFL) continue;
    struct sigaction deflt {};
    sigemptyset(&deflt.sa_mask);
    deflt.sa_handler = SIG_DFL;
    sigaction(s, &deflt, nullptr);
  }
}

// Waits for the guardian's word on the command's start on `exec_pipe`: end-of-file once the command has exec'd
// (true), or an int (false, `report` set): an errno of the exec, or k_start_by_passed / k_cgroup_join_failed.
// Until `start_by` (LeaseClock) and a grace at most: a command process stopped between its start and its exec
// (SIGSTOP, Ctrl-Z) holds the guardian in its vfork wait, blind to its deadline, and would hold mongolock here for
// as long (red team 10, F2); then `report` is k_start_stalled. The grace lets the guardian's own report of a
// start_by that had passed before it could start the command (k_start_by_passed) arrive first; the command's
// process checks start_by right before its exec, so it cannot start the job meanwhile.
bool wait_for_exec(int exec_pipe, const std::optional<LocalTime>& start_by, int& report) {
  constexpr auto grace = std::chrono::milliseconds(500);
  for (;;) {
    int timeout = -1;
    if (start_by) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*start_by + grace - LeaseClock::now()).count();
      if (left <= 0) {
        report = k_start_stalled;
        return false;
      }
      timeout = static_cast<int>(std::min<std::int64_t>(left, std::numeric_limits<int>::max()));
    }
    pollfd ready{.fd = exec_pipe, .events = POLLIN, .revents = 0};
    const int r = poll(&ready, 1, timeout);
    if (r == 0 || (r < 0 && errno == EINTR)) continue; // (start_by checked again)
    const ssize_t n = read(exec_pipe, &report, sizeof report);
    if (n < 0 && errno == EINTR) continue;
    return n <= 0;
  }
}

// Child::spawn's two channels to the guardian, close-on-exec: `exec_pipe` (the exec's errno, or EOF on
// exec) and `control` (a SOCK_SEQPACKET pair). Throws Error (70) when either cannot be made (none is left open).
void open_spawn_channels(int (&exec_pipe)[2], int (&control)[2]) {
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) throw internal_error(fmt::format("pipe failed: {}", std::strerror(errno)));
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control) != 0) {
    const int err = errno;
    close(exec_pipe[0]);
    close(exec_pipe[1]);
    throw internal_error(fmt::format("socketpair failed: {}", std::strerror(err)));
  }
}

} // namespace

namespace {

// What the command's process does between fork and exec, prepared before fork (after it, only
// async-signal-safe calls). Not movable: argv and envp point into the strings.
class CommandStart {
public:
  explicit CommandStart(const ChildSpec& spec)
      : m_argv_strings(spec.argv), m_env_strings(child_environment(spec)), m_argv(c_strings(m_argv_strings)),
        m_envp(c_strings(m_env_strings)), m_mask(spec.signal_mask), m_chld_ignored(ignored_at_start(SIGCHLD)),
        m_pipe_ignored(ignored_at_start(SIGPIPE)), m_no_new_privs(spec.no_new_privs) {
    // The mask with what reset_inherited_signals() unblocked blocked again.
    for (const int s : {SIGTSTP, SIGCONT, SIGCHLD}) {
      if (sigismember(&g_unblocked, s) == 1) sigaddset(&m_mask, s);
    }
  }
  CommandStart(const CommandStart&) = delete;
  CommandStart& operator=(const CommandStart&) = delete;

  // mongolock installs no handlers (it reads signals from a signalfd), so dispositions pass through as
  // found (nohup's ignored SIGHUP stays ignored); SIGCHLD and SIGPIPE, which mongolock reset for itself
  // (reset_inherited_signals(), ignore_sigpipe()), get back what mongolock found; so does the mask.
  // Returns only when the exec failed (errno says why).
  void exec() const {
    struct sigaction action {};
    sigemptyset(&action.sa_mask);
    action.sa_handler = m_chld_ignored ? SIG_IGN : SIG_DFL;
    sigaction(SIGCHLD, &action, nullptr);
    action.sa_handler = m_pipe_ignored ? SIG_IGN : SIG_DFL;
    sigaction(SIGPIPE, &action, nullptr);
    reset_caught_handlers();
    if (m_no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return; // errno: exec failed
    sigprocmask(SIG_SETMASK, &m_mask, nullptr);
    execvpe(m_argv[0], m_argv.data(), m_envp.data());
  }

private:
  std::vector<std::string> m_argv_strings;
  std::vector<std::string> m_env_strings;
  std::vector<char*> m_argv;
  std::vector<char*> m_envp;
  sigset_t m_mask;
  bool m_chld_ignored;
  bool m_pipe_ignored;
  bool m_no_new_privs;
};

// Whether the job's remains are found among mongolock's children (kill_job_remains()): only when no cgroup
// holds the job and mongolock is not PID 1 (orphans of an nsenter session come to it). Then spawn() lists
// mongolock's children from before (Child::m_others), which are not the job's.
bool job_scan_needed(const JobCgroup& cgroup) { return !cgroup.valid() && getpid() != 1; }

// The job's own cgroup (cgroup.hpp), named after this process (pid and start), a count of the commands it
// started and a random number (processes of two PID namespaces may share pid and /proc).
JobCgroup make_job_cgroup() {
  static int started = 0;
  std::uint32_t nonce = 0;
  if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof nonce)) nonce = 0;
  return JobCgroup::create(
      fmt::format("{}-{}-{}-{:08x}", getpid(), process_start(getpid()).value_or(0), ++started, nonce));
}

} // namespace

Child Child::spawn(const ChildSpec& spec) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  const CommandStart command(spec);
  const int terminal = controlling_terminal();
  const int tty = terminal >= 0 && tcgetpgrp(terminal) == getpgrp() ? terminal : -1; // we are in the foreground
  // mongolock is a subreaper too: if the guardian dies (SIGKILL), what is left of the job comes back to
  // mongolock, which kills it before the release (try_wait()) instead of leaving it running under init.
  // Its children from before (a wrapper's `helper & exec mongolock run ...`) are not the job's: left alone.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  auto cgroup = make_job_cgroup();
  // Read only where kill_job_remains() scans (no cgroup, not PID 1): a scan of every process's
  // /proc/PID/stat, whose cost grows with the host's processes (issue 30: 1.8 ms of CPU a run with 166).
  auto others = job_scan_needed(cgroup) ? children_of(getpid()) : std::vector<pid_t>();
  const auto orphan = prepare_orphan_exec(spec.orphan_request);
  GuardianSetup setup{.mongolock = getpid(),
                      .kill_signal = SIGRTMIN, // a function call in glibc: not after fork
                      .job_control = tty >= 0,
                      .cgroup = &cgroup,
                      .orphan = &orphan,
                      .holder_fd = spec.holder_fd};
  int exec_pipe[2];
  int control[2];
  open_spawn_channels(exec_pipe, control);
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    for (const int fd : {exec_pipe[0], exec_pipe[1], control[0], control[1], orphan.fd})
      if (fd >= 0) close(fd);
    throw internal_error(fmt::format("fork failed: {}", std::strerror(err)));
  }
  if (pid == 0) {
    close(exec_pipe[0]);
    close(control[0]);
    setpgid(0, 0);
    if (tty >= 0) tcsetpgrp(tty, getpid()); // SIGTTOU is blocked here, as in the parent
    setup.control = control[1];
    run_guardian(setup, exec_pipe[1], spec.deadline ? spec.deadline->time_since_epoch().count() : k_never,
                 std::chrono::duration_cast<std::chrono::nanoseconds>(spec.kill_grace).count(),
                 spec.start_by ? spec.start_by->time_since_epoch().count() : k_never, spec.argv.size(),
                 [&] { command.exec(); });
  }
  close(exec_pipe[1]);
  close(control[1]);
  if (orphan.fd >= 0) close(orphan.fd);
  setpgid(pid, pid); // also in the parent, so the group exists before we signal it
  if (tty >= 0) tcsetpgrp(tty, pid);
  int exec_errno = 0;
  const bool started = wait_for_exec(exec_pipe[0], spec.start_by, exec_errno);
  close(exec_pipe[0]);
  Child child(pid, terminal, setup.kill_signal, control[0]);
  child.m_cgroup = std::make_shared<JobCgroup>(std::move(cgroup));
  child.m_others = std::move(others);
  if (started) return child; // the pipe closed on exec: the command runs

  // Stalled past start_by: the guardian, held in its vfork wait, cannot act; SIGKILL it (the command's process
  // dies with it: PR_SET_PDEATHSIG), and what is left goes as after any guardian killed from outside.
  if (exec_errno == k_start_stalled) kill(pid, SIGKILL);
  // exec failed: reap the child, hand back the terminal, and report why.
  (void)child.try_wait();
  throw exec_failure(spec.argv.front(), exec_errno);
}

Child::Child(Child&& other) noexcept
    : m_pid(other.m_pid), m_tty_fd(other.m_tty_fd), m_kill_signal(other.m_kill_signal), m_reaped(other.m_reaped),
      m_control_fd(other.m_control_fd), m_control_eof(other.m_control_eof), m_watchdog_fired(other.m_watchdog_fired),
      m_job_ended(other.m_job_ended), m_ended_status(other.m_ended_status), m_unkillable(other.m_unkillable),
      m_orphans_killed(other.m_orphans_killed), m_watchdog_killed_at_once(other.m_watchdog_killed_at_once),
      m_cgroup(std::move(other.m_cgroup)), m_others(std::move(other.m_others)) {
  other.m_pid = -1;
  other.m_tty_fd = -1;
  other.m_reaped = true;
  other.m_control_fd = -1;
}

Child::~Child() {
  if (m_pid > 0 && !m_reaped && m_ended_status) {
    // The guardian reported the job's end (try_wait()) and exits on its own: only reaped here. SIGKILL, so
    // that one stopped from outside meanwhile cannot hold up the exit; nothing of the job is left to kill.
    kill(m_pid, SIGKILL);
    int status = 0;
    while (waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {}
    m_reaped = true;
  }
  if (m_pid > 0 && !m_reaped) {
    kill_job();
    int status = 0;
    while (waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {}
    kill_job_remains();
  }
  take_back_terminal();
  if (m_control_fd >= 0) close(m_control_fd);
}

void Child::give_terminal() const {
  if (m_tty_fd >= 0 && tcgetpgrp(m_tty_fd) == getpgrp()) tcsetpgrp(m_tty_fd, m_pid);
}

void Child::take_back_terminal() const {
  if (m_tty_fd >= 0 && tcgetpgrp(m_tty_fd) == m_pid) tcsetpgrp(m_tty_fd, getpgrp());
}

bool Child::signal(int signo) const {
  if (m_pid <= 0 || m_reaped) return false;
  const bool sent = kill(-m_pid, signo) == 0;
  if (signo == SIGTERM || signo == SIGINT || signo == SIGHUP || signo == SIGQUIT) kill(-m_pid, SIGCONT);
  return sent;
}

void Child::kill_job() const {
  if (m_pid <= 0 || m_reaped) return;
  kill(m_pid, m_kill_signal);
  kill(m_pid, SIGCONT); // a stopped guardian must run to do it
}

bool Child::extend_deadline(LocalTime deadline) const {
  if (m_control_fd < 0) return false; // (not m_reaped: the main thread writes it; the fd outlives the heartbeat)
  const ControlMessage message{ControlMessage::deadline, deadline.time_since_epoch().count(),
                               LeaseClock::now().time_since_epoch().count()};
  // Never blocks: a guardian that does not read (stopped) misses the extension and stops the job: safe.
  return send(m_control_fd, &message, sizeof message, MSG_DONTWAIT | MSG_NOSIGNAL) ==
         static_cast<ssize_t>(sizeof message);
}

void Child::stop_job(std::chrono::milliseconds grace) const {
  if (m_pid <= 0 || m_reaped) return;
  const auto kill_at = LeaseClock::now() + grace;
  const ControlMessage message{ControlMessage::stop, kill_at.time_since_epoch().count()};
  if (send(m_control_fd, &message, sizeof message, MSG_DONTWAIT | MSG_NOSIGNAL) !=
      static_cast<ssize_t>(sizeof message)) {
    kill_job(); // the message did not get through: the safe side is SIGKILL now
    return;
  }
  kill(m_pid, SIGCONT); // a stopped guardian must run to act on it
}

void Child::read_reports() {
  ControlMessage message;
  ssize_t n = -1;
  while (m_control_fd >= 0 && !m_control_eof &&
         (n = recv(m_control_fd, &message, sizeof message, MSG_DONTWAIT)) == static_cast<ssize_t>(sizeof message)) {
    const LocalTime at{std::chrono::nanoseconds(message.at)};
    if ((message.kind == ControlMessage::fired || message.kind == ControlMessage::fired_killed) && !m_watchdog_fired) {
      m_watchdog_fired = at;
      m_watchdog_killed_at_once = message.kind == ControlMessage::fired_killed;
    }
    if (message.kind == ControlMessage::ended && !m_job_ended) {
      m_job_ended = at;
      m_ended_status = static_cast<int>(message.status);
    }
    if (message.kind == ControlMessage::unkillable && !m_unkillable) m_unkillable = static_cast<pid_t>(message.at);
  }
  // The guardian's end closed the socket: no report can follow, and report_fd() stops being polled (it would
  // be readable, POLLHUP, at once on every pass until the guardian is reaped).
  if (n == 0) m_control_eof = true;
}

std::optional<pid_t> Child::unkillable() {
  read_reports();
  return m_unkillable;
}

std::optional<LocalTime> Child::watchdog_fired() {
  read_reports();
  return m_watchdog_fired;
}

std::optional<LocalTime> Child::job_ended() {
  read_reports();
  return m_job_ended;
}

Child::WaitResult Child::try_wait() {
  if (m_reaped) return {WaitResult::exited, 0, 0};
  read_reports();
  if (m_ended_status) {
    // The guardian reported that the whole job has ended (it reaped the command and every process left,
    // ECHILD) and with which status; it is about to exit with that status. The run goes on at once (its
    // release), not after the guardian's exit (its address space torn down: ~2 ms, issue 30); the destructor
    // reaps it. Nothing of the job is left for kill_job_remains().
    take_back_terminal();
    const int status = *m_ended_status;
    if (WIFSIGNALED(status)) return {WaitResult::exited, exit_code_for_signal(WTERMSIG(status)), WTERMSIG(status)};
    return {WaitResult::exited, WEXITSTATUS(status), 0};
  }
  int status = 0;
  pid_t r;
  do {
    r = waitpid(m_pid, &status, WNOHANG | WUNTRACED);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) {
    if (getpid() == 1) reap_strays();
    return {WaitResult::running, 0, 0};
  }
  if (WIFSTOPPED(status)) return {WaitResult::stopped, 0, 0};
  m_reaped = true;
  // Normally nothing: the guardian exits only when the whole job has ended. A guardian killed from outside
  // left the job's processes to us (a subreaper): they are killed now, while the lock is still held.
  m_orphans_killed = kill_job_remains();
  take_back_terminal();
  if (WIFSIGNALED(status)) return {WaitResult::exited, exit_code_for_signal(WTERMSIG(status)), WTERMSIG(status)};
  return {WaitResult::exited, WEXITSTATUS(status), 0};
}

std::optional<std::string> Child::cgroup() const {
  if (m_cgroup && m_cgroup->valid()) return m_cgroup->path();
  return std::nullopt;
}

std::string Child::cgroup_why_not() const { return m_cgroup ? m_cgroup->why_not() : std::string(); }

bool Child::is_other(pid_t pid) const { return std::find(m_others.begin(), m_others.end(), pid) != m_others.end(); }

void Child::reap_strays() {
  for (;;) {
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid <= 0 || info.si_pid == m_pid) return;
    int status = 0;
    waitpid(info.si_pid, &status, WNOHANG);
    m_others.erase(std::remove(m_others.begin(), m_others.end(), info.si_pid), m_others.end());
  }
}

int Child::kill_job_remains() {
  int killed = 0;
  useconds_t pause = 2000;
  // mongolock's children are the job's only by elimination (not its children before the spawn): where a
  // cgroup holds the job, or as PID 1 (orphans of an nsenter session come to it), they are not scanned.
  const bool scan = m_cgroup ? job_scan_needed(*m_cgroup) : getpid() != 1;
  const auto job_children = [&] { return scan ? children_of(getpid()) : std::vector<pid_t>(); };
  for (;;) {
    bool left = false;
    if (m_cgroup && m_cgroup->valid() && m_cgroup->state() != CgroupState::empty) {
      left = left || m_cgroup->state() == CgroupState::populated;
      if (m_cgroup->kill_all()) ++killed;
    }
    if (kill(-m_pid, SIGKILL) == 0) {
      left = true;
      ++killed;
    } else if (errno == EPERM) {
      left = true; // members run as another user: waited for (warn_unkillable() says so)
    }
    for (const pid_t child : job_children()) {
      if (is_other(child)) continue;
      left = true;
      if (kill(child, SIGKILL) == 0)
        ++killed;
      else if (errno == EPERM && !m_unkillable)
        m_unkillable = child;
    }
    if (!left) return killed;
    // Reaps the job's processes only: the members of its group and the children listed above.
    int status = 0;
    bool reaped = false;
    while (waitpid(-m_pid, &status, WNOHANG) > 0)
      reaped = true;
    for (const pid_t child : job_children()) {
      if (!is_other(child) && waitpid(child, &status, WNOHANG) > 0) reaped = true;
    }
    if (getpid() == 1) reap_strays();
    pause = reaped ? 2000 : std::min<useconds_t>(pause * 2, 100'000);
    usleep(pause);
  }
}

void Child::suspend() {
  kill(-m_pid, SIGSTOP);
  take_back_terminal();
  raise(SIGTSTP); // stops here (default action) until the shell continues us
}

void Child::resume() {
  give_terminal();
  kill(-m_pid, SIGCONT);
}

} // namespace mongolock
