// Process control for `run`: starting the command, signalling it, reaping it, and handing it the
// terminal. POSIX and Linux calls stay in process.cpp.
#pragma once

#include <chrono>
#include <optional>
#include <signal.h>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace mongolock {

// The signals `run` forwards to its command: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2.
[[nodiscard]] const std::vector<int>& forwarded_signals();

// Waits up to `timeout` for one of the forwarded signals (blocked, see SignalBlock) and takes it:
// returns its number, or nullopt when none came. Millis(0) only checks what is pending.
[[nodiscard]] std::optional<int> take_forwarded_signal(std::chrono::milliseconds timeout);

// Blocks the forwarded signals plus SIGCHLD, SIGTTOU and SIGTTIN in the calling thread (threads started
// later inherit the mask), so they are read from a signalfd instead of acting. Restores the previous mask
// on destruction. Create it before starting threads.
class SignalBlock {
public:
  SignalBlock();
  ~SignalBlock();
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;
  [[nodiscard]] const sigset_t& blocked() const { return m_blocked; }
  [[nodiscard]] const sigset_t& previous() const { return m_previous; }

private:
  sigset_t m_blocked{};
  sigset_t m_previous{};
};

struct ChildSpec {
  std::vector<std::string> argv;                        // argv[0] is looked up in PATH (execvpe)
  std::vector<std::pair<std::string, std::string>> env; // set in (replacing) this environment; an empty
                                                        // value removes the variable
  sigset_t signal_mask{};                               // the mask the command starts with
};

// A started command, in its own process group (so a stop reaches everything it started). The process
// mongolock starts is a small guardian that leads the group, starts the command in it, and exits as the
// command does; if mongolock is killed outright, the guardian (PR_SET_PDEATHSIG) kills the whole group,
// the command's own children included. When mongolock owns the terminal's foreground, the command's group
// gets it, and gives it back on destruction. pid() is the guardian's, which is also the group id.
class Child {
public:
  // Starts the command. Throws Error with exit 127 when it is not found, 126 when it cannot be executed
  // (permission, not an executable), 70 when fork fails.
  static Child spawn(const ChildSpec& spec);

  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  ~Child();

  [[nodiscard]] pid_t pid() const { return m_pid; }

  // Sends `signo` to the command's process group. Returns false when it no longer exists.
  bool signal(int signo) const;

  // Reaps the command if it has ended: returns its exit code (its status, or 128+N when killed by signal
  // N). When it was stopped (SIGTSTP etc.), stops mongolock likewise, and continues both on SIGCONT.
  // Returns nullopt while it still runs.
  [[nodiscard]] std::optional<int> try_wait();

private:
  explicit Child(pid_t pid, int tty_fd) : m_pid(pid), m_tty_fd(tty_fd) {}
  void take_back_terminal() const;

  pid_t m_pid = -1;
  int m_tty_fd = -1; // the terminal handed to the command, or -1
  bool m_reaped = false;
};

} // namespace mongolock
