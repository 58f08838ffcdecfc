#include "host.hpp"

#include "client.hpp"

#include <fmt/format.h>

#include <cerrno>

namespace sim {

using mongolock::CgroupState;

pid_t Host::begin_run(int client) {
  const pid_t pid = ++m_next_pid;
  RunProc run;
  run.client = client;
  run.pid = pid;
  run.start = 100'000 + pid; // clock ticks after boot: later runs start later
  m_runs.emplace(pid, std::move(run));
  return pid;
}

RunProc* Host::find(pid_t pid) {
  const auto it = m_runs.find(pid);
  return it == m_runs.end() ? nullptr : &it->second;
}

bool Host::command_runs(const RunProc& run) const {
  const auto& client = m_world.client(run.client);
  if (client.pid() == run.pid) return client.job_running(); // its current run (or the last, when killed)
  return false;                                             // a run that ended: its job ended before
}

bool Host::escape_runs(const RunProc& run) const { return run.pgid != 0 && m_world.now() < run.escape_until; }

RunProc* HostProbe::by_path(const std::string& path) {
  for (const auto& [pid, run] : m_host.runs()) {
    if (mongolock::holder_file_path(pid, run.start) == path) return &m_host.run(pid);
  }
  return nullptr;
}

RunProc* HostProbe::by_pgid(pid_t pgid) {
  for (const auto& [pid, run] : m_host.runs()) {
    if (run.pgid == pgid) return &m_host.run(pid);
  }
  return nullptr;
}

bool HostProbe::proc_is_own() { return !m_host.hidden().foreign_proc; }

std::optional<std::int64_t> HostProbe::process_start(pid_t pid) {
  const auto* run = m_host.find(pid);
  if (run == nullptr) return std::nullopt;
  if (run->supervised) {
    if (m_host.hidden().hidepid) return std::nullopt; // another user's mongolock: not listed
    return run->start;
  }
  return run->reused; // the pid now belongs to a later process, or to none
}

bool HostProbe::pid_exists(pid_t pid) {
  const auto* run = m_host.find(pid);
  if (run == nullptr) return false;
  if (run->supervised) return !m_plant; // the plant: not shown in /proc, so gone
  return run->reused.has_value();
}

mongolock::LivenessProbe::HolderFileView HostProbe::holder_file(const std::string& path) {
  HolderFileView view;
  const auto* run = by_path(path);
  if (run == nullptr || !run->file) {
    view.why = fmt::format("its holder file {} is missing", path);
    return view;
  }
  if (run->supervised) {
    view.state = HolderFileView::State::locked;
    return view;
  }
  view.state = HolderFileView::State::unlocked;
  view.evidence = mongolock::HolderEvidence{.pgid = run->pgid, .cgroup = run->cgroup};
  return view;
}

CgroupState HostProbe::cgroup_state(const std::string& dir) {
  const auto& hidden = m_host.hidden();
  if ((hidden.cgroup_gone || hidden.cgroup_unknown) && m_plant) return CgroupState::empty;
  if (hidden.cgroup_gone) return CgroupState::gone;
  if (hidden.cgroup_unknown) return CgroupState::unknown;
  for (const auto& [pid, run] : m_host.runs()) {
    if (run.cgroup != dir) continue;
    if (run.cgroup_removed) return CgroupState::gone;
    // The escaped part, in its group or not, stays in the job's cgroup unless it moved itself out.
    const bool escaped = m_host.escape_runs(run) && !run.escape_left_cgroup;
    return m_host.command_runs(run) || escaped ? CgroupState::populated : CgroupState::empty;
  }
  return CgroupState::gone;
}

int HostProbe::signal_group(pid_t pgid) {
  const auto* run = by_pgid(pgid);
  if (run == nullptr) return ESRCH;
  const bool members = m_host.command_runs(*run) || (run->escape_in_group && m_host.escape_runs(*run)) || run->zombie;
  if (!members) return ESRCH;
  if (m_host.hidden().eperm) return m_plant ? ESRCH : EPERM;
  return 0;
}

std::string HostProbe::group_still_runs(pid_t pgid) {
  if (m_host.hidden().hidepid && !m_plant)
    return "/proc is mounted with hidepid: members of other users are not listed";
  const auto* run = by_pgid(pgid);
  if (run == nullptr) return {};
  if (m_host.command_runs(*run)) return fmt::format("pid {} runs", pgid);
  if (run->escape_in_group && m_host.escape_runs(*run)) return fmt::format("pid {} runs", pgid + 1);
  return {}; // only a zombie, or nobody
}

void HostProbe::remove_leftovers(const std::string& path, const std::string& cgroup) {
  if (auto* run = by_path(path)) {
    run->file = false;
    // rmdir(2) of a group with processes fails (EBUSY).
    const bool populated = m_host.command_runs(*run) || (m_host.escape_runs(*run) && !run->escape_left_cgroup);
    if (!cgroup.empty() && cgroup == run->cgroup && !populated) run->cgroup_removed = true;
  }
  m_world.count("holder files removed by a takeover");
}

} // namespace sim
