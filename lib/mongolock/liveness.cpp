#include <mongolock/liveness.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/file.h>
#include <unistd.h>

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

// Whether any process of group `pgid` is other than a zombie (or unreadable: counted as running).
bool group_has_running_member(pid_t pgid) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return true;
  bool running = false;
  while (const dirent* entry = readdir(proc)) {
    const std::string_view pid = entry->d_name;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string_view::npos) continue;
    const auto fields = stat_fields(pid);
    if (!fields) continue; // gone meanwhile
    if (fields->pgrp == pgid && fields->state != 'Z' && fields->state != 'X') {
      running = true;
      break;
    }
  }
  closedir(proc);
  return running;
}

// Whether the job's process group recorded in the holder file `fd` (the guardian's pid, in decimal, then a
// newline: process.cpp record_job_group()) has no member left. An empty file: the guardian never forked a
// job. Anything unreadable, malformed, or a group that exists (or that we may not signal): false.
bool job_group_gone(int fd) {
  char text[32] = {};
  const auto n = pread(fd, text, sizeof text - 1, 0);
  if (n == 0) return true;
  if (n < 2 || text[n - 1] != '\n') return false;
  pid_t pgid = 0;
  const auto [end, ec] = std::from_chars(text, text + n - 1, pgid);
  if (ec != std::errc() || end != text + n - 1 || pgid <= 1) return false;
  if (kill(-pgid, 0) != 0 && errno == ESRCH) return true;
  // Members left, or not ours to signal: a group of zombies only (an init that does not reap, as in some
  // containers) runs nothing, so look at each member's state.
  return !group_has_running_member(pgid);
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
  ProcessIdentity self;
  self.boot_id = first_line("/proc/sys/kernel/random/boot_id");
  char ns[64] = {};
  const auto n = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  if (n > 0) self.pid_ns.assign(ns, static_cast<std::size_t>(n));
  self.pid_start = process_start(getpid()).value_or(0);
  return self;
}

std::string holder_file_path(pid_t pid, std::int64_t start) {
  return fmt::format("/dev/shm/mongolock-run-{}-{}.lock", pid, start);
}

HolderFile::HolderFile(const ProcessIdentity& self) {
  if (!self.complete()) return;
  m_path = holder_file_path(getpid(), self.pid_start);
  const int fd = open(m_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;
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

bool holder_provably_dead(const LockRecord& lock, const ProcessIdentity& here, std::string_view host,
                          bool remove_file) {
  if (!lock.pid_start || !here.complete() || lock.host != host || lock.boot_id != here.boot_id ||
      lock.pid_ns != here.pid_ns) {
    return false;
  }
  const auto colon = lock.process.rfind(':');
  pid_t pid = 0;
  const auto digits = std::string_view(lock.process).substr(colon == std::string::npos ? 0 : colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (colon == std::string::npos || ec != std::errc() || end != digits.data() + digits.size() || pid <= 0) return false;
  if (process_start(pid) == *lock.pid_start) return false; // still running
  const auto path = holder_file_path(pid, *lock.pid_start);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false; // no file: nothing proves that its guardian is gone
  const bool free = flock(fd, LOCK_SH | LOCK_NB) == 0 && job_group_gone(fd);
  if (free && remove_file) unlink(path.c_str());
  close(fd);
  return free;
}

} // namespace mongolock
