// The job's own cgroup v2 group (issue 26), as systemd gives each unit one (KillMode=control-group): when
// mongolock may create a group below its own (root with a writable cgroup2 hierarchy, or a delegated
// subtree), the guardian starts the command in it (clone3 CLONE_INTO_CGROUP), so that every process of the
// job is in it whatever it does (setsid, double fork, another process group). `cgroup.kill` (Linux 5.14+)
// is then the final kill, and `cgroup.events` "populated 0" the proof that nothing of the job runs, for the
// run and for the instant takeover on this host (liveness.hpp). Where no group can be made, nothing
// changes but what can be proven (man page LIMITS). Linux calls stay in cgroup.cpp.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mongolock {

// The directory of this process's cgroup v2 group: the cgroup2 mount (from /proc/self/mountinfo, whose
// mount root must be "/") joined with the path of the "0::" line of /proc/self/cgroup. nullopt (and
// `why` says why, when given) where there is no cgroup2 hierarchy or it cannot be resolved.
[[nodiscard]] std::optional<std::string> own_cgroup_dir(std::string* why = nullptr);

// The path (from the hierarchy's root, "/" first) of the group this process is in, when that group or one
// above it has a directory name that starts with `prefix`, found by walking the cgroup2 mount when
// /proc/self/cgroup cannot say it: in a cgroup namespace (unshare -C) the path there is relative to the
// namespace's root ("0::/"), while a mount made before the namespace still shows the whole hierarchy
// (its mount root in /proc/self/mountinfo then starts with "/.."). Membership is read from cgroup.procs, which
// lists the members as this process's PID namespace numbers them, so a new PID namespace hides nothing.
// nullopt where no cgroup2 mount's root is outside the namespace (a mount of a subtree inside it, such as a
// bind mount, shows nothing above: red team 10, F4), where none is found, or after 20,000 directories (a bound
// on a host with very many groups). Red team 8, F3.
// `complete`, when given, is set false when the walk stopped at that bound with directories left, or could
// not read a group's directory (EACCES: what is below it is unknown): then nullopt proves nothing (red team
// 9, F1: a job that makes 20,000 groups first). Never throws.
[[nodiscard]] std::optional<std::string> hidden_cgroup_named(std::string_view prefix, bool* complete = nullptr);

// What cgroup.events says of group directory `dir`.
enum class CgroupState {
  empty,     // "populated 0"
  populated, // "populated 1": some process of it (or of a group below it) runs
  gone,      // no such directory, under a cgroup2 parent: removed (only an empty group can be), or the path
             // names another group or none in this mount view or cgroup namespace: no proof of anything
  unknown,   // unreadable or malformed: no proof either way
};
[[nodiscard]] CgroupState cgroup_state(const std::string& dir);

// Removes group directory `dir` and the groups below it, deepest first (rmdir(2); a group with processes
// stays: EBUSY). Returns true when `dir` is gone. Best effort, never throws.
bool remove_cgroup_tree(const std::string& dir);

// The job's group, created by create() and removed (with the groups below it, once empty) on destruction.
// Holds the descriptors the guardian uses after fork (async-signal-safe calls only there).
class JobCgroup {
public:
  JobCgroup() = default;
  // Creates DIR/mongolock-job-<tag> below this process's group (own_cgroup_dir()), a stale empty one of
  // that name removed first. Where it cannot (no cgroup2, no permission, a read-only hierarchy), returns a
  // group with valid() false and why_not() saying why. MONGOLOCK_CGROUP=off in the environment turns the
  // group off (tests of the fallback; the man page's ENVIRONMENT).
  static JobCgroup create(std::string_view tag);
  JobCgroup(JobCgroup&& other) noexcept;
  JobCgroup& operator=(JobCgroup&& other) noexcept;
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;
  ~JobCgroup();

  [[nodiscard]] bool valid() const { return m_dir_fd >= 0; }
  [[nodiscard]] const std::string& path() const { return m_path; }
  [[nodiscard]] const std::string& why_not() const { return m_why_not; }
  // The group directory (O_DIRECTORY, close-on-exec): clone3's cgroup for CLONE_INTO_CGROUP. -1 if not valid().
  [[nodiscard]] int dir_fd() const { return m_dir_fd; }
  // Kills every process of the group (and of the groups below it): "1" to cgroup.kill, or, on kernels
  // before 5.14, SIGKILL to every pid cgroup.procs lists. Async-signal-safe (no allocation). Returns false
  // when neither could be done (then only the process group and the subreaper's /proc scan are left).
  bool kill_all() const;
  // cgroup_state() of the group through the held descriptor of cgroup.events. Async-signal-safe.
  [[nodiscard]] CgroupState state() const;
  // The descriptor of cgroup.events (poll(2) reports POLLPRI|POLLERR when "populated" changes), or -1.
  [[nodiscard]] int events_fd() const { return m_events_fd; }

private:
  void close_all();
  std::string m_path;
  std::string m_why_not;
  int m_dir_fd = -1;
  int m_kill_fd = -1;   // cgroup.kill, O_WRONLY; -1 before Linux 5.14
  int m_procs_fd = -1;  // cgroup.procs, O_RDONLY (the fallback of kill_all())
  int m_events_fd = -1; // cgroup.events, O_RDONLY
};

} // namespace mongolock
