#include <mongolock/error.hpp>
#include <mongolock/process.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

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

SignalBlock::~SignalBlock() { pthread_sigmask(SIG_SETMASK, &m_previous, nullptr); }

namespace {

// The controlling terminal's fd when this process is in its foreground process group, else -1.
int foreground_terminal() {
  for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    if (isatty(fd) && tcgetpgrp(fd) == getpgrp()) return fd;
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

// The guardian: the first process of the command's process group, between mongolock and the command.
// PR_SET_PDEATHSIG reaches only a direct child, so a mongolock killed outright (SIGKILL) could leave the
// command's own children running after the lease runs out. The guardian gets `death_signal` when
// mongolock dies and then kills the whole group; otherwise it waits for the command and exits the way it
// did (same status, or the same signal), so mongolock sees the command's own status. The command gets
// SIGKILL if the guardian dies. Runs in the forked child only; never returns.
template <typename Exec>
[[noreturn]] void run_guardian(pid_t mongolock, int death_signal, int exec_pipe, const Exec& exec) {
  sigset_t waited;
  sigemptyset(&waited);
  sigaddset(&waited, SIGCHLD);
  sigaddset(&waited, death_signal);
  sigprocmask(SIG_BLOCK, &waited, nullptr); // the forwarded signals stay blocked too: they are for the command
  prctl(PR_SET_PDEATHSIG, death_signal);
  if (getppid() != mongolock) _exit(128 + SIGKILL); // mongolock died before prctl took effect
  const pid_t guardian = getpid();
  const pid_t command = fork();
  if (command == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != guardian) _exit(128 + SIGKILL);
    exec();
    const int err = errno;
    [[maybe_unused]] const auto n = write(exec_pipe, &err, sizeof err);
    _exit(127);
  }
  close(exec_pipe); // mongolock sees end-of-file once the command has exec'd (the pipe is close-on-exec)
  if (command < 0) _exit(126);
  for (;;) {
    siginfo_t info;
    const int signo = sigwaitinfo(&waited, &info);
    if (signo == death_signal) {
      kill(-guardian, SIGKILL); // mongolock is gone: nothing may run on without its lease
      _exit(128 + SIGKILL);
    }
    int status = 0;
    const pid_t done = waitpid(command, &status, WNOHANG);
    if (done != command) continue;
    if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
    // Die of the same signal, without a second core dump.
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
}

} // namespace

Child Child::spawn(const ChildSpec& spec) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  auto argv_strings = spec.argv;
  auto env_strings = child_environment(spec);
  const auto argv = c_strings(argv_strings);
  const auto envp = c_strings(env_strings);
  const int tty = foreground_terminal();
  const pid_t parent = getpid();
  const int death_signal = SIGRTMIN; // a function call in glibc: not after fork

  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) throw internal_error(fmt::format("pipe failed: {}", std::strerror(errno)));
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(exec_pipe[0]);
    close(exec_pipe[1]);
    throw internal_error(fmt::format("fork failed: {}", std::strerror(err)));
  }
  if (pid == 0) {
    close(exec_pipe[0]);
    setpgid(0, 0);
    if (tty >= 0) tcsetpgrp(tty, getpid()); // SIGTTOU is blocked here, as in the parent
    run_guardian(parent, death_signal, exec_pipe[1], [&] {
      // mongolock installs no handlers (it reads signals from a signalfd), so dispositions pass through
      // as found (nohup's ignored SIGHUP stays ignored); only the mask is restored.
      sigprocmask(SIG_SETMASK, &spec.signal_mask, nullptr);
      execvpe(argv[0], argv.data(), envp.data());
    });
  }
  close(exec_pipe[1]);
  setpgid(pid, pid); // also in the parent, so the group exists before we signal it
  if (tty >= 0) tcsetpgrp(tty, pid);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(exec_pipe[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  close(exec_pipe[0]);
  Child child(pid, tty);
  if (n <= 0) return child; // the pipe closed on exec: the command runs

  // exec failed: reap the child, hand back the terminal, and report why.
  (void)child.try_wait();
  const std::string name = spec.argv.front();
  if (exec_errno == ENOENT || exec_errno == ENOTDIR) {
    throw Error(k_exit_not_found,
                fmt::format("command not found: '{}'; check the name and PATH, or give a full path", name));
  }
  throw Error(k_exit_cannot_execute, fmt::format("cannot execute '{}': {}", name, std::strerror(exec_errno)));
}

Child::Child(Child&& other) noexcept : m_pid(other.m_pid), m_tty_fd(other.m_tty_fd), m_reaped(other.m_reaped) {
  other.m_pid = -1;
  other.m_tty_fd = -1;
  other.m_reaped = true;
}

Child::~Child() {
  if (m_pid > 0 && !m_reaped) {
    // Never leave a command unsupervised: a Child destroyed while running is killed and reaped.
    signal(SIGKILL);
    int status = 0;
    while (waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {}
  }
  take_back_terminal();
}

void Child::take_back_terminal() const {
  if (m_tty_fd >= 0) tcsetpgrp(m_tty_fd, getpgrp());
}

bool Child::signal(int signo) const {
  if (m_pid <= 0 || m_reaped) return false;
  return kill(-m_pid, signo) == 0 || kill(m_pid, signo) == 0;
}

std::optional<int> Child::try_wait() {
  if (m_reaped) return std::nullopt;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(m_pid, &status, WNOHANG | WUNTRACED);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return std::nullopt;
  if (WIFSTOPPED(status)) {
    // Job control: the command was stopped (Ctrl-Z). Stop ourselves too so the shell sees the job stop;
    // when continued, give the terminal back and continue the command.
    take_back_terminal();
    kill(getpid(), SIGSTOP);
    if (m_tty_fd >= 0) tcsetpgrp(m_tty_fd, m_pid);
    signal(SIGCONT);
    return std::nullopt;
  }
  m_reaped = true;
  take_back_terminal();
  if (WIFSIGNALED(status)) return exit_code_for_signal(WTERMSIG(status));
  return WEXITSTATUS(status);
}

} // namespace mongolock
