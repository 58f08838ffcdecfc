// Process control for `run`: starting the command, signalling it, reaping it, and handing it the
// terminal. POSIX and Linux calls stay in process.cpp.
#pragma once

#include <mongolock/clock.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <signal.h>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace mongolock {

class JobCgroup;

// Whether /proc is this process's PID namespace's: /proc/self names getpid(). A /proc of another
// namespace (a container's, `unshare -pf` without --mount-proc) or none at all is not: its pids are other
// processes, and nothing may be decided or killed from it (issue 26). Async-signal-safe.
[[nodiscard]] bool proc_is_own();

// The signals `run` forwards to its command: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2.
[[nodiscard]] const std::vector<int>& forwarded_signals();

// Waits up to `timeout` for one of the forwarded signals (blocked, see SignalBlock) and takes it:
// returns its number, or nullopt when none came. Millis(0) only checks what is pending.
[[nodiscard]] std::optional<int> take_forwarded_signal(std::chrono::milliseconds timeout);

// Resets, for mongolock itself, what it inherited and depends on (called first thing in cli_main()):
// SIGCHLD to its default (ignored, the kernel would reap the guardian unseen and `run` would never learn
// that the job ended), and unblocks SIGCHLD, SIGTSTP and SIGCONT (job control). Records SIGPIPE's
// disposition for ignore_sigpipe(). The command started by `run` gets SIGCHLD, SIGPIPE and the mask as
// they were found (ignored_at_start(), Child::spawn()). Not thread-safe: call before any thread starts.
void reset_inherited_signals();

// run: ignores SIGPIPE in mongolock, so that a reader of its messages that went away (`2>&1 | head`)
// cannot kill it before its release: a write then fails with EPIPE, which Log ignores. Other commands
// keep the default (`mongolock list | head` ends quietly, as any filter). After reset_inherited_signals().
void ignore_sigpipe();

// Whether `signo` (SIGCHLD or SIGPIPE; false for any other) was ignored when reset_inherited_signals() ran.
[[nodiscard]] bool ignored_at_start(int signo);

// Blocks the forwarded signals plus SIGCHLD, SIGTTOU and SIGTTIN in the calling thread (threads started
// later inherit the mask), so they are read from a signalfd instead of acting. On destruction it discards
// the blocked signals still pending (one that came after the last read, e.g. a SIGTERM during the
// release, must not kill mongolock when the mask is restored) and restores the previous mask, unless
// keep_blocked() was called. Create it before starting threads.
class SignalBlock {
public:
  SignalBlock();
  ~SignalBlock();
  // The mask stays as it is until the process exits (run: nothing may turn a finished run into 128+N).
  void keep_blocked() { m_restore = false; }
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;
  [[nodiscard]] const sigset_t& blocked() const { return m_blocked; }
  [[nodiscard]] const sigset_t& previous() const { return m_previous; }

private:
  sigset_t m_blocked{};
  sigset_t m_previous{};
  bool m_restore = true;
};

struct ChildSpec {
  std::vector<std::string> argv;                        // argv[0] is looked up in PATH (execvpe)
  std::vector<std::pair<std::string, std::string>> env; // set in (replacing) this environment; an empty
                                                        // value removes the variable
  sigset_t signal_mask{};                               // the mask the command starts with
  // The lease watchdog (run --on-lost term/kill): the guardian stops the job on its own once its deadline
  // passes (LeaseClock, CLOCK_BOOTTIME), unless Child::extend_deadline() moved it first. Unset: the guardian
  // never stops the job on its own (--on-lost ignore).
  std::optional<LocalTime> deadline;
  std::chrono::milliseconds kill_grace{0}; // after the deadline: SIGTERM, and SIGKILL this much later (0: at once)
  // The command is not started at or after this time (LeaseClock, CLOCK_BOOTTIME): the lease's renew
  // deadline as acquired. The guardian checks it before it forks the command and the command's process
  // right before exec, so a guardian or mongolock stopped between the acquisition and the start never
  // starts a job after its lease (issue #19). Unset: no check.
  std::optional<LocalTime> start_by;
  // run --no-new-privs: the command starts with PR_SET_NO_NEW_PRIVS, so setuid/setgid bits and file
  // capabilities give it no privileges, and it stays a process mongolock may signal (prctl(2)).
  bool no_new_privs = false;
  // When mongolock dies while the job runs (kill -9, the OOM killer), the guardian kills the job as
  // always and then, rather than leaving the locks to expire, executes mongolock again as
  // `/proc/self/exe __release-orphaned FD` with this text readable on FD (a memfd; orphan.hpp encodes
  // it), which releases the locks by _id and token (issue #17). Unset: the guardian only exits.
  std::optional<std::string> orphan_request;
  // The run's holder file (liveness.hpp HolderFile::fd()), or -1: before it forks the command, the guardian
  // writes there the job's process group id (its own pid), which must be empty before a run on this host
  // may take the lock over at once (holder_provably_dead()).
  int holder_fd = -1;
};

// The hidden command the guardian executes with ChildSpec::orphan_request (cli: release_orphaned()).
inline constexpr std::string_view k_release_orphaned_command = "__release-orphaned";

// A started command. The process mongolock starts is a guardian that leads a new process group, starts
// the command in it and waits as a child subreaper: it exits only when the command and every process the
// command left behind have ended, with the command's status (or dying of the same signal), so the lock
// is held until nothing of the job runs. If mongolock dies (PR_SET_PDEATHSIG) or calls kill_job(), the
// guardian kills every descendant, also those that left the process group. When mongolock owns the
// terminal's foreground, the job's group gets it while it runs.
// spawn() makes mongolock a child subreaper (PR_SET_CHILD_SUBREAPER) as well: if the guardian itself is
// killed (SIGKILL from outside), the job's processes come back to mongolock, and try_wait() kills and
// reaps them before it reports the end, so the lock is still held until nothing of the job runs. A
// process that runs as another user (a setuid program that changed its real uid) cannot be signalled by
// an unprivileged mongolock: the guardian reports it (unkillable()) and waits for it to end.
//
// The guardian is also the lease's watchdog: it keeps the deadline by which the job must be stopped
// (ChildSpec::deadline, moved later by extend_deadline() after every renewal) on a CLOCK_BOOTTIME timer of
// its own, and when it passes stops the job as a lost lease does (SIGTERM to the group, then SIGKILL of
// every descendant after the kill grace), so the job is stopped in time even while mongolock is stopped,
// hung or starved of CPU. Every time the guardian wakes, it checks the deadline before anything else.
class Child {
public:
  // Starts the command. Throws Error with exit 127 when it is not found, 126 when it cannot be executed
  // (permission, not an executable, no process for it: EAGAIN at a pids limit; or the move into its cgroup
  // failed), 76 when spec.start_by had passed (nothing was started; also when its process had not exec'd by
  // then: stopped or starved before its exec, it is killed with the guardian), 70 when fork fails.
  static Child spawn(const ChildSpec& spec);

  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  // Kills the job (kill_job()) if it still runs, and reaps it: nothing is left unsupervised. After an "ended"
  // report (try_wait()) only reaps the guardian (SIGKILL first, should it have been stopped since).
  ~Child();

  // The guardian's pid, which is also the job's process group id.
  [[nodiscard]] pid_t pid() const { return m_pid; }

  // Sends `signo` to the job's process group; after a terminating signal (INT, TERM, HUP, QUIT) also
  // SIGCONT, so that a stopped job acts on it. Returns false when the group no longer exists.
  bool signal(int signo) const;

  // Kills the whole job at once: the guardian SIGKILLs every descendant and exits 137.
  void kill_job() const;

  // Moves the watchdog's deadline to `deadline` (LeaseClock). Safe from any thread (one message to the
  // guardian). Ignored once the guardian has started to stop the job; a message the guardian reads after
  // the old deadline comes too late (it stops the job: the safe side). Returns false when the guardian is gone.
  bool extend_deadline(LocalTime deadline) const;

  // Has the guardian stop the job now: SIGTERM to the group, then SIGKILL of every descendant after `grace`
  // (at once when zero). Cannot be undone; the guardian exits as the job does.
  void stop_job(std::chrono::milliseconds grace) const;

  // Readable when the guardian reports something; watchdog_fired() and job_ended() read the reports. -1 (not
  // to be polled) once a read found the guardian's end of the socket closed: nothing more can come.
  [[nodiscard]] int report_fd() const { return m_control_eof ? -1 : m_control_fd; }
  // The time (LeaseClock) at which the guardian stopped the job because its own deadline passed, when it
  // did (read from the guardian's reports; later calls return the same).
  [[nodiscard]] std::optional<LocalTime> watchdog_fired();
  // After watchdog_fired(): true when the guardian sent SIGKILL at once, no SIGTERM (it woke after the
  // deadline and its kill grace: stopped or starved).
  [[nodiscard]] bool watchdog_killed_at_once() const { return m_watchdog_killed_at_once; }
  // The directory of the job's own cgroup (cgroup.hpp) when spawn() could create one; the guardian starts
  // the command in it. nullopt otherwise; cgroup_why_not() then says why (for -v).
  [[nodiscard]] std::optional<std::string> cgroup() const;
  [[nodiscard]] std::string cgroup_why_not() const;
  // The time (LeaseClock) at which the whole job had ended, as the guardian reported just before it
  // exited; nullopt while it runs (or when the report was lost: the guardian exits anyway).
  [[nodiscard]] std::optional<LocalTime> job_ended();
  // A pid of the job that the guardian could not SIGKILL (EPERM: it runs as another user), as first
  // reported; the guardian then waits for the job to end on its own. nullopt when none was reported.
  [[nodiscard]] std::optional<pid_t> unkillable();
  // How many SIGKILLs mongolock sent to processes of the job that were left when the guardian was reaped
  // (try_wait() reaps them before it reports the end): 0 unless the guardian was killed from outside.
  [[nodiscard]] int orphans_killed() const { return m_orphans_killed; }

  struct WaitResult {
    enum State { running, stopped, exited } state = running;
    int exit_code = 0; // exited: the command's status, or 128+N when it was killed by signal N
    int signal = 0;    // exited: N when the command was killed by signal N (the guardian dies of it too), else 0
  };
  // Reports the job's end: from the guardian's "ended" report (sent once the command and every process it
  // left were reaped, with the command's status; the guardian, which then only exits, is reaped by the
  // destructor), else by reaping the guardian (killed from outside: what it left is killed first). Reports a
  // stop (the guardian stops when the command does).
  [[nodiscard]] WaitResult try_wait();

  // Job control, after try_wait() reported a stop: stops the whole job (SIGSTOP to the group, so a command
  // that ignores SIGTSTP stops too), takes the terminal back and stops mongolock with SIGTSTP, so the shell
  // sees the job stop. Returns when mongolock is continued.
  void suspend();
  // True when mongolock has a controlling terminal, so that a shell can continue it after suspend();
  // without one (cron, systemd, CI) nothing would, and a stop is not job control.
  [[nodiscard]] bool has_terminal() const { return m_tty_fd >= 0; }
  // After suspend(): gives the terminal to the job if mongolock is in the foreground again (fg, not bg),
  // and continues the job.
  void resume();

private:
  Child(pid_t pid, int tty_fd, int kill_signal, int control_fd)
      : m_pid(pid), m_tty_fd(tty_fd), m_kill_signal(kill_signal), m_control_fd(control_fd) {}
  void give_terminal() const;
  void read_reports();
  void take_back_terminal() const;
  // After the guardian was reaped: SIGKILLs what is left of the job (a guardian killed from outside left
  // it to mongolock, a subreaper) round after round until nothing is: its cgroup, its process group, and,
  // without a cgroup and unless mongolock is PID 1, mongolock's children that were not its children before
  // spawn() (m_others; /proc only when it is ours); reaps those only. Returns the number of kills sent
  // (0: nothing was left).
  int kill_job_remains();
  // As PID 1 (a container's entrypoint): reaps every exited child but the guardian, as an init must.
  void reap_strays();
  [[nodiscard]] bool is_other(pid_t pid) const;

  pid_t m_pid = -1;
  int m_tty_fd = -1;     // mongolock's controlling terminal, or -1
  int m_kill_signal = 0; // the signal that makes the guardian kill the job (also its PDEATHSIG)
  bool m_reaped = false;
  int m_control_fd = -1;      // our end of the guardian's control socket (SOCK_SEQPACKET)
  bool m_control_eof = false; // the guardian's end is closed (read_reports() read end-of-file)
  std::optional<LocalTime> m_watchdog_fired;
  std::optional<LocalTime> m_job_ended;
  std::optional<int> m_ended_status; // the command's wait status, as the guardian's "ended" report gave it
  std::optional<pid_t> m_unkillable;
  int m_orphans_killed = 0;
  bool m_watchdog_killed_at_once = false;
  std::shared_ptr<JobCgroup> m_cgroup; // the job's cgroup (valid() or not); shared: Child moves
  std::vector<pid_t> m_others;         // mongolock's children when spawn() ran: not the job's
};

// Writes the holder file `fd` (ChildSpec::holder_fd) from its start: `pgid` in decimal and a newline, then,
// when the job runs in its own cgroup (`cgroup` not null), that group's directory and a newline, so that a
// run on this host that finds mongolock and its guardian gone can tell whether anything of the job still
// runs (liveness.hpp). When the write or the truncation fails (a full /dev/shm), makes the file writable by
// its group, which no reader takes as evidence. Async-signal-safe (the guardian calls it); nothing when fd < 0.
void record_job_group(int fd, pid_t pgid, const char* cgroup);

} // namespace mongolock
