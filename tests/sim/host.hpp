// The one host every client of a same-host schedule runs on (Config::same_host): each run's processes (its
// mongolock and guardian, the job's command, a part of the job that escaped its process group or session and
// runs on after both were killed), its holder file and cgroup, and what a contender on the host can see of
// them (hidepid, a job of another user: EPERM, a foreign /proc or cgroup namespace). The real
// holder_verdict() reads it through a HostProbe (liveness.hpp's LivenessProbe): the instant takeover is
// decided by the real rules on simulated evidence, and World checks each "dead" against the truth.
#pragma once

#include "world.hpp"

#include <mongolock/liveness.hpp>

namespace sim {

// The shared host's name and the identity every run on it records (LockRecord::boot_id, pid_ns).
inline constexpr const char* k_shared_host = "shared";
inline const mongolock::ProcessIdentity k_shared_identity{
    .boot_id = "0b5e7e1d-boot", .pid_ns = "pid:[4026531836]", .pid_start = 1};

// One `mongolock run` process on the shared host and what belongs to it (the truth).
struct RunProc {
  int client = 0;
  pid_t pid = 0;
  std::int64_t start = 0;          // its process start (pid_start in its lock documents)
  bool supervised = true;          // its mongolock or guardian runs: the holder file is locked
  bool file = true;                // its holder file exists (a run that ends removes it)
  pid_t pgid = 0;                  // the job's process group, written to the holder file once the job started
  std::string cgroup;              // the job's cgroup, when the schedule has them ("" otherwise)
  bool cgroup_removed = false;     // removed by an instant takeover (remove_leftovers)
  LocalTime command_until{};       // a killed run: its command dies then (PR_SET_PDEATHSIG's SIGKILL takes a moment)
  bool escape_in_group = false;    // the escaped part stayed in the job's process group (else it called setsid)
  bool escape_left_cgroup = false; // ...and moved itself out of the job's cgroup (root: cgroup.procs), not its group
  LocalTime escape_until{};        // a killed run: a part of its job runs on until then (no escape: before the kill)
  bool zombie = false; // a killed run leaves a zombie in the job's process group (an init that does not reap)
  std::optional<std::int64_t> reused; // a killed run's pid now belongs to a process started then
  std::vector<std::string> names;     // the names its job runs on
  std::vector<std::string> lock_ids;  // the _id of its job's locks
};

// What the contenders of the host cannot see (drawn per schedule): each makes holder_verdict() refuse.
struct Hidden {
  bool hidepid = false;        // /proc is mounted with hidepid: other users' processes are missing
  bool eperm = false;          // the job runs as another user: kill(-pgid, 0) fails with EPERM while it has members
  bool foreign_proc = false;   // /proc is another PID namespace's
  bool cgroup_gone = false;    // another cgroup namespace or mount view: the job's cgroup is not there
  bool cgroup_unknown = false; // cgroup.events cannot be read
};

class Host {
public:
  explicit Host(World& world) : m_world(world) {}
  // A new run of client `client` (a new mongolock process: a new pid and start). Returns its pid.
  pid_t begin_run(int client);
  [[nodiscard]] RunProc& run(pid_t pid) { return m_runs.at(pid); }
  [[nodiscard]] RunProc* find(pid_t pid);
  [[nodiscard]] const std::map<pid_t, RunProc>& runs() const { return m_runs; }
  // The job's command, or its escaped part, runs now (for a killed run; a live run's job is its client's).
  [[nodiscard]] bool command_runs(const RunProc& run) const;
  [[nodiscard]] bool escape_runs(const RunProc& run) const;
  [[nodiscard]] Hidden& hidden() { return m_hidden; }
  [[nodiscard]] const Hidden& hidden() const { return m_hidden; }

private:
  World& m_world;
  std::map<pid_t, RunProc> m_runs;
  pid_t m_next_pid = 1000;
  Hidden m_hidden;
};

// holder_verdict()'s questions answered from the Host for one contender. Under Plant::hidden_proof it treats
// hidden evidence as proof (a pid hidden by hidepid as gone, a cgroup it cannot see or read as empty, EPERM as
// no member, a /proc it cannot fully list as showing no member).
class HostProbe final : public mongolock::LivenessProbe {
public:
  HostProbe(World& world, Host& host, bool plant) : m_world(world), m_host(host), m_plant(plant) {}
  bool proc_is_own() override;
  std::optional<std::int64_t> process_start(pid_t pid) override;
  bool pid_exists(pid_t pid) override;
  HolderFileView holder_file(const std::string& path) override;
  mongolock::CgroupState cgroup_state(const std::string& dir) override;
  int signal_group(pid_t pgid) override;
  std::string group_still_runs(pid_t pgid) override;
  void remove_leftovers(const std::string& path, const std::string& cgroup) override;

private:
  [[nodiscard]] RunProc* by_path(const std::string& path);
  [[nodiscard]] RunProc* by_pgid(pid_t pgid);
  World& m_world;
  Host& m_host;
  bool m_plant;
};

} // namespace sim
