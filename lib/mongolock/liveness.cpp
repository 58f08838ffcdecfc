#include <mongolock/cgroup.hpp>
#include <mongolock/liveness.hpp>
#include <mongolock/process.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace mongolock {

namespace {

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The fields of /proc/PID/stat from field 3 (STATE) on: "PID (COMM) STATE PPID ...", where COMM may hold
// spaces and parentheses, so they follow the last ')'. nullopt when there is no such process.
std::optional<std::istringstream> stat_fields_after_comm(std::string_view pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  return std::istringstream(stat.substr(close + 1));
}

// Fields 3 (state) and 5 (process group) of /proc/PID/stat.
struct StatFields {
  char state = '?';
  pid_t pgrp = 0;
};
std::optional<StatFields> stat_fields(std::string_view pid) {
  auto fields = stat_fields_after_comm(pid);
  if (!fields) return std::nullopt;
  StatFields out;
  pid_t ppid = 0;
  if (!(*fields >> out.state >> ppid >> out.pgrp)) return std::nullopt;
  return out;
}

// Whether /proc is mounted with hidepid (other than 0/off; systemd's ProtectProc=invisible is hidepid=2 or
// "invisible"): processes of other users may then be missing from it.
bool proc_hides_pids() {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, mount_point;
    if (!(fields >> id >> parent >> dev >> root >> mount_point) || mount_point != "/proc") continue;
    const auto at = line.find("hidepid=");
    if (at == std::string::npos) continue;
    const auto value = line.substr(at + 8, line.find_first_of(", ", at) - at - 8);
    if (value != "0" && value != "off") return true;
  }
  return false;
}

// Why process `pid` (a member of a group that kill() found, a zombie to /proc/PID/stat) may still run:
// a thread of it that is not a zombie (a leader whose main thread called pthread_exit() while others run
// on shows as Z, issue 26), or a task list it cannot read. Empty when every thread is a zombie (or gone).
std::string zombie_still_runs(std::string_view pid) {
  DIR* tasks = opendir(fmt::format("/proc/{}/task", pid).c_str());
  if (tasks == nullptr) {
    return errno == ENOENT ? std::string() : fmt::format("the threads of pid {} cannot be read", pid);
  }
  std::string why;
  while (const dirent* entry = readdir(tasks)) {
    const std::string_view tid = entry->d_name;
    if (tid.empty() || tid.find_first_not_of("0123456789") != std::string_view::npos) continue;
    auto fields = stat_fields_after_comm(fmt::format("{}/task/{}", pid, tid));
    char state = '?';
    if (!fields) continue; // gone meanwhile
    if (!(*fields >> state) || (state != 'Z' && state != 'X')) {
      why = fmt::format("pid {} is a zombie whose thread {} runs on", pid, tid);
      break;
    }
  }
  closedir(tasks);
  return why;
}

// Why group `pgid`, which kill() says has members, may still run something: a member that is not a
// zombie, a zombie with a live thread, or members it cannot see all of (hidepid, an unreadable entry).
// Empty when every member is a zombie with no thread left (an init that does not reap, as in some
// containers). Only from this namespace's /proc (the caller checked).
std::string group_still_runs(pid_t pgid) {
  if (proc_hides_pids()) return "/proc is mounted with hidepid: members of other users are not listed";
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return "/proc cannot be read";
  std::string why;
  while (const dirent* entry = readdir(proc)) {
    const std::string_view pid = entry->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string_view::npos) continue;
    const int fd = open(fmt::format("/proc/{}/stat", pid).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT || errno == ESRCH) continue; // gone meanwhile
      why = fmt::format("/proc/{}/stat cannot be read", pid);
      break;
    }
    close(fd);
    const auto fields = stat_fields(pid);
    if (!fields || fields->pgrp != pgid) continue;
    if (fields->state != 'Z' && fields->state != 'X') {
      why = fmt::format("pid {} runs", pid);
      break;
    }
    if (why = zombie_still_runs(pid); !why.empty()) break;
  }
  closedir(proc);
  return why;
}

// What the holder file `fd` says (HolderEvidence); nullopt when malformed.
std::optional<HolderEvidence> read_evidence(int fd) {
  char text[4200] = {};
  const auto n = pread(fd, text, sizeof text - 1, 0);
  if (n == 0) return HolderEvidence{};
  if (n < 2 || text[n - 1] != '\n') return std::nullopt;
  const std::string_view all(text, static_cast<std::size_t>(n));
  const auto eol = all.find('\n');
  HolderEvidence evidence;
  const auto [end, ec] = std::from_chars(all.data(), all.data() + eol, evidence.pgid);
  if (ec != std::errc() || end != all.data() + eol || evidence.pgid <= 1) return std::nullopt;
  const auto rest = all.substr(eol + 1);
  if (!rest.empty()) {
    evidence.cgroup = std::string(rest.substr(0, rest.size() - 1));
    if (evidence.cgroup.find('\n') != std::string::npos || evidence.cgroup.front() != '/' ||
        evidence.cgroup.find("/mongolock-job-") == std::string::npos ||
        evidence.cgroup.find("..") != std::string::npos) {
      return std::nullopt;
    }
  }
  return evidence;
}

// Why something of the job recorded in a holder file (`evidence`) may still run; empty when nothing does, by
// proof: its cgroup is empty (or removed), and its process group has no member left (or only zombies with
// no live thread, seen in this namespace's /proc without hidepid). Without a cgroup there is no proof: a
// part of the job that left its process group (setsid) is invisible to both checks (issue 26).
std::string job_still_runs(const std::optional<HolderEvidence>& evidence, LivenessProbe& probe, std::string& cgroup) {
  if (!evidence) return "its holder file is malformed";
  if (evidence->pgid == 0) return {}; // no job was ever started
  cgroup = evidence->cgroup;
  if (cgroup.empty()) {
    return "its job ran without a cgroup of its own, so a part of it that left its process group (setsid) "
           "would be invisible";
  }
  switch (probe.cgroup_state(cgroup)) {
  case CgroupState::empty:
    break;
  case CgroupState::populated:
    return fmt::format("its job's cgroup {} still has processes", cgroup);
  case CgroupState::unknown:
    return fmt::format("its job's cgroup {} cannot be read", cgroup);
  case CgroupState::gone:
    // Removed, or the path names nothing in this process's cgroup namespace or mount view (a contender in
    // another container on this host): no proof (red team of issue 26, X1: a 2 s overlap).
    return fmt::format("its job's cgroup {} is not there (removed, or another cgroup namespace or mount view)", cgroup);
  }
  if (const int err = probe.signal_group(evidence->pgid); err != 0) {
    if (err == ESRCH) return {};
    return fmt::format("its job's process group {} has members this user may not signal ({})", evidence->pgid,
                       std::strerror(err));
  }
  const auto why = probe.group_still_runs(evidence->pgid);
  return why.empty() ? why : fmt::format("its job's process group {} has members: {}", evidence->pgid, why);
}

} // namespace

std::optional<std::int64_t> process_start(pid_t pid) {
  auto fields = stat_fields_after_comm(std::to_string(pid));
  if (!fields) return std::nullopt;
  std::string field;
  for (int i = 3; i <= 22 && *fields >> field; ++i) {
    if (i != 22) continue;
    std::int64_t start = 0;
    const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), start);
    if (ec == std::errc() && end == field.data() + field.size()) return start;
  }
  return std::nullopt;
}

ProcessIdentity own_process_identity() {
  // Read once per process (a run asked four times: 4 boot id reads, 4 readlinks, 4 stat reads, ~60 us of
  // CPU; issue 30): none of the three changes while the process lives. Keyed by pid, so that a forked
  // child (the guardian) reads its own.
  static std::mutex mutex;
  static pid_t cached_for = 0;
  static ProcessIdentity cached;
  const pid_t pid = getpid();
  std::lock_guard lock(mutex);
  if (cached_for == pid) return cached;
  ProcessIdentity self;
  self.boot_id = first_line("/proc/sys/kernel/random/boot_id");
  char ns[64] = {};
  const auto n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  if (n > 0) self.pid_ns.assign(ns, static_cast<std::size_t>(n));
  self.pid_start = process_start(pid).value_or(0);
  if (self.complete()) { // an unreadable field is read again next time
    cached = self;
    cached_for = pid;
  }
  return self;
}

HolderPlace process_place(pid_t pid) {
  HolderPlace place;
  // The boot id is the kernel's, whatever /proc shows; the PID namespace is mongolock's own, which is the
  // parent's whenever getppid() is not 0 (a parent outside this namespace shows as 0). Never left out: a
  // field that cannot be read is recorded as unknown, which matches nobody (issue 26 item 7, red team X1, X2).
  place.boot_id = first_line("/proc/sys/kernel/random/boot_id");
  if (place.boot_id.empty()) place.boot_id = k_unknown_place;
  const bool own = proc_is_own();
  if (own) {
    char ns[64] = {};
    const auto n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    if (n > 0) place.pid_ns.assign(ns, static_cast<std::size_t>(n));
  }
  if (place.pid_ns.empty()) place.pid_ns = k_unknown_place;
  if (pid <= 0) return place; // a caller outside this PID namespace: its namespace is all that identifies it
  place.pid_start = own ? process_start(pid).value_or(k_unknown_start) : k_unknown_start;
  return place;
}

std::string holder_file_path(pid_t pid, std::int64_t start) {
  return fmt::format("/dev/shm/mongolock-run-{}-{}.lock", pid, start);
}

std::vector<RunAncestor> enclosing_runs() {
  std::vector<RunAncestor> runs;
  pid_t pid = getppid();
  for (int depth = 0; depth < 128 && pid > 1; ++depth) {
    auto fields = stat_fields_after_comm(std::to_string(pid));
    char state = '?';
    pid_t parent = 0;
    if (!fields || !(*fields >> state >> parent)) break;
    if (const auto start = process_start(pid); start && access(holder_file_path(pid, *start).c_str(), F_OK) == 0) {
      runs.push_back({pid, *start});
    }
    pid = parent;
  }
  return runs;
}

namespace {

constexpr std::string_view k_job_cgroup_prefix = "mongolock-job-"; // process.cpp make_job_cgroup(): PID-START-N-NONCE

// The runs named by the job-cgroup components of cgroup path `path` ("a/b/c", no leading slash), outermost first.
std::vector<RunAncestor> job_cgroups_in(std::string_view path) {
  std::vector<RunAncestor> runs;
  while (!path.empty()) {
    const auto slash = path.find('/');
    const std::string part(path.substr(0, slash));
    path.remove_prefix(slash == std::string_view::npos ? path.size() : slash + 1);
    int pid = 0;
    long long start = 0;
    char dash = 0;
    if (part.rfind(k_job_cgroup_prefix, 0) == 0 &&
        std::sscanf(part.c_str() + k_job_cgroup_prefix.size(), "%d-%lld%c", &pid, &start, &dash) == 3 && dash == '-' &&
        pid > 0 && start > 0) {
      runs.push_back({pid, start});
    }
  }
  return runs;
}

} // namespace

std::vector<RunAncestor> enclosing_job_cgroups(bool* complete) {
  if (complete != nullptr) *complete = true;
  std::vector<RunAncestor> runs;
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::/", 0) != 0) continue;
    runs = job_cgroups_in(std::string_view(line).substr(4));
    break;
  }
  // In a cgroup namespace the path above starts at the namespace's root: the job's group may be above it,
  // still visible through a cgroup2 mount made before the namespace (red team 8, F3).
  if (runs.empty()) {
    if (const auto hidden = hidden_cgroup_named(k_job_cgroup_prefix, complete))
      runs = job_cgroups_in(std::string_view(*hidden).substr(1));
  }
  std::reverse(runs.begin(), runs.end()); // nearest first
  return runs;
}

namespace {

// The pid of `lock`'s holder ("<host>:<pid>"), if its process field ends in one.
std::optional<pid_t> holder_pid(const LockRecord& lock) {
  const auto colon = lock.process.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  const std::string_view digits = std::string_view(lock.process).substr(colon + 1);
  pid_t holder = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), holder);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return holder;
}

// Whether `lock` is a run's lock of this boot whose pid and start are one of `runs`.
bool held_by_one_of(const LockRecord& lock, const std::vector<RunAncestor>& runs) {
  if (runs.empty() || lock.command.empty() || !lock.pid_start) return false;
  const auto holder = holder_pid(lock);
  return holder && std::any_of(runs.begin(), runs.end(), [&](const RunAncestor& run) {
           return run.pid == *holder && run.start == *lock.pid_start;
         });
}

} // namespace

bool held_by_enclosing_run(const LockRecord& lock, const std::vector<RunAncestor>& runs, std::string_view host) {
  if (runs.empty() || lock.host != host) return false;
  const auto here = own_process_identity();
  if (here.boot_id.empty() || lock.boot_id != here.boot_id || lock.pid_ns != here.pid_ns) return false;
  return held_by_one_of(lock, runs);
}

bool run_lock_of_this_boot(const LockRecord& lock) {
  if (lock.command.empty()) return false;
  const auto here = own_process_identity();
  return here.boot_id.empty() || lock.boot_id.empty() || lock.boot_id == here.boot_id;
}

bool held_by_enclosing_job_cgroup(const LockRecord& lock, const std::vector<RunAncestor>& groups) {
  if (groups.empty()) return false;
  const auto here = own_process_identity();
  if (here.boot_id.empty() || lock.boot_id != here.boot_id) return false;
  return held_by_one_of(lock, groups);
}

namespace {

// Opens holder file `path` for reading, for evidence: only a regular file with one link, owned by root or
// by this user, that no group or other user may write (/dev/shm is world-writable: a file another user
// made or rewrote, a FIFO that would block open(2), a link, proves nothing; red team of issue 26, X2 and
// X16). -1 otherwise (errno ENOENT when there is no such file); `why` says why when given.
int open_evidence(const std::string& path, std::string* why = nullptr) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (why) *why = fmt::format("its holder file {} is missing", path);
    return -1;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || (st.st_uid != 0 && st.st_uid != geteuid()) ||
      (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    if (why) {
      *why = fmt::format("its holder file {} is not a regular file of root or this user that only its owner may "
                         "write",
                         path);
    }
    close(fd);
    errno = EPERM;
    return -1;
  }
  return fd;
}

// Whether holder file `name` (mongolock-run-PID-START.lock in /dev/shm) is stale: its process is gone (not
// merely hidden), nobody holds its lock, and no job was ever started (a run killed while it waited), or the
// file is older than k_evidence_kept and its job's cgroup, if any, is empty (then removed too). Other files
// are what an instant takeover reads (and removes): kept.
constexpr auto k_evidence_kept = std::chrono::hours(24);

bool evidence_expired(time_t mtime) {
  return std::chrono::system_clock::now() - std::chrono::system_clock::from_time_t(mtime) > k_evidence_kept;
}

// A job's evidence younger than k_evidence_kept, which the sweep keeps whatever its process does: known
// from one lstat, without reading /proc, the file or the job's cgroup (issue 30: every run sweeps, and a
// file of each killed run stays a day; the full check of 138 such files cost 3.3 ms of CPU a run).
// sweep_if_stale() decides the same from fstat. True also when there is no such file.
bool kept_evidence(const std::string& path) {
  struct stat seen {};
  return lstat(path.c_str(), &seen) != 0 ||
         (S_ISREG(seen.st_mode) && seen.st_size > 0 && !evidence_expired(seen.st_mtime));
}

bool sweep_if_stale(const std::string& name, pid_t self) {
  pid_t pid = 0;
  long long start = 0;
  char tail[8] = {};
  if (std::sscanf(name.c_str(), "mongolock-run-%d-%lld.%5s", &pid, &start, tail) != 3 ||
      std::string_view(tail) != "lock" || pid <= 0 || pid == self || name != holder_file_path(pid, start).substr(9)) {
    return false;
  }
  const auto path = "/dev/shm/" + name;
  if (kept_evidence(path)) return false;
  const auto alive = process_start(pid);
  if (alive == start || (!alive && (kill(pid, 0) == 0 || errno == EPERM))) return false;
  const int fd = open_evidence(path);
  if (fd < 0) return false;
  bool stale = false;
  struct stat st {};
  if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0) {
    const auto evidence = read_evidence(fd);
    const bool cgroup = evidence && !evidence->cgroup.empty();
    const bool no_job = st.st_size == 0;
    const bool expired = !no_job && evidence_expired(st.st_mtime);
    const auto state = expired && cgroup ? cgroup_state(evidence->cgroup) : CgroupState::gone;
    stale = (no_job || (expired && (state == CgroupState::empty || state == CgroupState::gone))) &&
            unlink(path.c_str()) == 0;
    if (stale && cgroup) remove_cgroup_tree(evidence->cgroup);
  }
  close(fd);
  return stale;
}

} // namespace

void remove_dead_run_leftovers(pid_t pid, std::int64_t start) {
  const auto path = holder_file_path(pid, start);
  std::string cgroup;
  if (const int fd = open_evidence(path); fd >= 0) {
    if (const auto evidence = read_evidence(fd)) cgroup = evidence->cgroup;
    close(fd);
  }
  unlink(path.c_str());
  if (cgroup.empty()) return;
  // The job was reaped to the last process, but "populated" may lag its exit by a moment.
  for (int i = 0; i < 20 && cgroup_state(cgroup) == CgroupState::populated; ++i)
    usleep(10'000);
  remove_cgroup_tree(cgroup);
}

int sweep_holder_files() {
  DIR* shm = opendir("/dev/shm");
  if (shm == nullptr) return 0;
  std::vector<std::string> names;
  while (const dirent* entry = readdir(shm)) {
    if (std::string_view(entry->d_name).rfind("mongolock-run-", 0) == 0) names.emplace_back(entry->d_name);
  }
  closedir(shm);
  int swept = 0;
  const pid_t self = getpid();
  for (const auto& name : names)
    swept += sweep_if_stale(name, self) ? 1 : 0;
  return swept;
}

namespace {

// How often this user's runs on a host sweep /dev/shm at most (issue 30: every run listed /dev/shm and
// lstat'ed each mongolock-run-* file, a day's evidence of every killed run: ~225 files, ~1 ms a run here).
constexpr auto k_sweep_every = std::chrono::seconds(60);

std::string sweep_stamp_path() { return fmt::format("/dev/shm/mongolock-sweep-{}.stamp", geteuid()); }

// Whether this user's stamp says a sweep began less than k_sweep_every ago: a regular file of this user
// whose mtime is that recent (one in the future, after the clock was set back, is not). A stamp of another
// user (/dev/shm is world-writable) counts for nothing: it cannot put the sweep off.
bool swept_lately(const std::string& stamp) {
  struct stat st {};
  if (lstat(stamp.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) return false;
  const auto age = std::chrono::system_clock::now() - std::chrono::system_clock::from_time_t(st.st_mtime);
  return age >= std::chrono::seconds(0) && age < k_sweep_every;
}

// Sets the stamp's mtime to now (made, mode 0600, when missing); a file that is not this user's regular
// file is left alone (O_NONBLOCK: a FIFO must not hang the run).
void stamp_sweep(const std::string& stamp) {
  const int fd = open(stamp.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) return;
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid()) (void)futimens(fd, nullptr);
  close(fd);
}

} // namespace

int sweep_holder_files_when_due() {
  const auto stamp = sweep_stamp_path();
  if (swept_lately(stamp)) return -1;
  stamp_sweep(stamp); // first: runs starting meanwhile need not sweep too
  return sweep_holder_files();
}

HolderFile::HolderFile(const ProcessIdentity& self) {
  if (!self.complete()) return;
  sweep_holder_files_when_due();
  m_path = holder_file_path(getpid(), self.pid_start);
  // A new file only: no run of this pid and start made one before, so one that exists was made by someone
  // else (its name can be predicted); without a holder file of its own the lock is simply not taken over
  // early (red team of issue 26, X2).
  const int fd = open(m_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    m_path.clear();
    return;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return;
  }
  m_fd = fd;
}

HolderFile::~HolderFile() {
  if (m_fd < 0) return;
  unlink(m_path.c_str());
  close(m_fd);
}

namespace {

// The system's answers (/proc, /dev/shm, cgroupfs); keeps the holder file open and share-locked while it lives.
class SystemProbe final : public LivenessProbe {
public:
  SystemProbe() = default;
  SystemProbe(const SystemProbe&) = delete;
  SystemProbe& operator=(const SystemProbe&) = delete;
  ~SystemProbe() override {
    if (m_fd >= 0) close(m_fd);
  }
  bool proc_is_own() override { return mongolock::proc_is_own(); }
  std::optional<std::int64_t> process_start(pid_t pid) override { return mongolock::process_start(pid); }
  bool pid_exists(pid_t pid) override { return kill(pid, 0) == 0 || errno == EPERM; }
  HolderFileView holder_file(const std::string& path) override {
    HolderFileView view;
    if (m_fd >= 0) close(m_fd);
    m_fd = open_evidence(path, &view.why);
    if (m_fd < 0) return view;
    if (flock(m_fd, LOCK_SH | LOCK_NB) != 0) {
      view.state = HolderFileView::State::locked;
      return view;
    }
    view.state = HolderFileView::State::unlocked;
    view.evidence = read_evidence(m_fd);
    return view;
  }
  CgroupState cgroup_state(const std::string& dir) override { return mongolock::cgroup_state(dir); }
  int signal_group(pid_t pgid) override { return kill(-pgid, 0) == 0 ? 0 : errno; }
  std::string group_still_runs(pid_t pgid) override { return mongolock::group_still_runs(pgid); }
  void remove_leftovers(const std::string& path, const std::string& cgroup) override {
    unlink(path.c_str());
    if (!cgroup.empty()) remove_cgroup_tree(cgroup);
  }

private:
  int m_fd = -1;
};

} // namespace

HolderVerdict holder_verdict(const LockRecord& lock, const ProcessIdentity& here, std::string_view host,
                             bool remove_file) {
  SystemProbe probe;
  return holder_verdict(lock, here, host, probe, remove_file);
}

HolderVerdict holder_verdict(const LockRecord& lock, const ProcessIdentity& here, std::string_view host,
                             LivenessProbe& probe, bool remove_file) {
  HolderVerdict verdict;
  if (lock.command.empty() || !lock.pid_start || lock.host != host) return verdict; // acquire's: no holder file
  const auto colon = lock.process.rfind(':');
  pid_t pid = 0;
  const auto digits = std::string_view(lock.process).substr(colon == std::string::npos ? 0 : colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (colon == std::string::npos || ec != std::errc() || end != digits.data() + digits.size() || pid <= 0) {
    return verdict;
  }
  const auto no = [&](std::string why) {
    verdict.why_not = fmt::format("not taking lock '{}' over at once: {}; waiting for its lease as another host would",
                                  lock.program, why);
    return verdict;
  };
  if (!here.complete()) return no("this process's boot id, PID namespace or start cannot be read");
  if (lock.boot_id != here.boot_id || lock.pid_ns != here.pid_ns) return verdict; // another machine or container
  if (!probe.proc_is_own()) return no("/proc is not this PID namespace's (/proc/self is not this process)");
  const auto start = probe.process_start(pid);
  if (start == *lock.pid_start) return verdict; // still running
  if (!start && probe.pid_exists(pid))
    return no(fmt::format("pid {} exists but /proc does not show it (hidepid?)", pid));
  const auto path = holder_file_path(pid, *lock.pid_start);
  const auto file = probe.holder_file(path);
  if (file.state == LivenessProbe::HolderFileView::State::unusable) {
    return no(fmt::format("{} ({})", lock.process, file.why));
  }
  std::string cgroup;
  const auto why = file.state == LivenessProbe::HolderFileView::State::locked
                       ? std::string("its holder file is locked (its mongolock or guardian still runs)")
                       : job_still_runs(file.evidence, probe, cgroup);
  if (!why.empty()) return no(fmt::format("{} ({})", lock.process, why));
  verdict.dead = true;
  if (remove_file) probe.remove_leftovers(path, cgroup);
  return verdict;
}

bool holder_provably_dead(const LockRecord& lock, const ProcessIdentity& here, std::string_view host,
                          bool remove_file) {
  return holder_verdict(lock, here, host, remove_file).dead;
}

} // namespace mongolock
