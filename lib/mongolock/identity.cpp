#include <mongolock/identity.hpp>
#include <mongolock/liveness.hpp>
#include <mongolock/process.hpp>

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace mongolock {

std::string host_name() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0 || buf[0] == '\0') return "unknown-host";
  return buf.data();
}

std::string holder_identity(pid_t pid) { return fmt::format("{}:{}", host_name(), pid); }

namespace {

// This process's PID namespace, "pid:[INODE]"; "" when /proc is not this namespace's (proc_is_own()).
const std::string& own_pid_ns() {
  static const std::string own = [] {
    if (!proc_is_own()) return std::string();
    std::array<char, 64> ns{};
    const auto n = readlink("/proc/self/ns/pid", ns.data(), ns.size() - 1);
    return n > 0 ? std::string(ns.data(), static_cast<std::size_t>(n)) : std::string();
  }();
  return own;
}

// "pid:[INODE]" -> "INODE"; another form as it is.
std::string_view ns_inode(std::string_view pid_ns) {
  if (pid_ns.starts_with("pid:[") && pid_ns.ends_with(']')) return pid_ns.substr(5, pid_ns.size() - 6);
  return pid_ns;
}

} // namespace

std::string holder_label(std::string_view process, std::string_view pid_ns) {
  if (pid_ns.empty() || pid_ns == own_pid_ns()) return std::string(process);
  return fmt::format("{} (pid ns {})", process, ns_inode(pid_ns));
}

namespace {

constexpr std::string_view k_orphan_prefix = "mongolock-orphan-";

// The note of `caller` in this PID namespace (the caller is mongolock's parent, so in its namespace): the
// namespace's inode is in the name, so that containers sharing /dev/shm never read or sweep each other's
// notes (red team X3s). "" when this namespace cannot be read.
std::string orphan_note_path(pid_t caller, std::int64_t caller_start, std::string_view program) {
  if (own_pid_ns().empty()) return {};
  std::uint64_t hash = 14695981039346656037ULL; // FNV-1a
  for (const unsigned char c : program)
    hash = (hash ^ c) * 1099511628211ULL;
  return fmt::format("/dev/shm/{}{}-{}-{}-{}-{:016x}", k_orphan_prefix, geteuid(), ns_inode(own_pid_ns()), caller,
                     caller_start, hash);
}

// Removes this user's notes of this PID namespace whose caller no longer runs (its pid gone, or now another
// process's); only when /proc is this namespace's (else its pids are another namespace's processes).
void sweep_orphan_notes() {
  if (own_pid_ns().empty() || !proc_is_own()) return;
  DIR* shm = opendir("/dev/shm");
  if (shm == nullptr) return;
  const auto mine = fmt::format("{}{}-{}-", k_orphan_prefix, geteuid(), ns_inode(own_pid_ns()));
  std::vector<std::string> stale;
  while (const dirent* entry = readdir(shm)) {
    const std::string_view name = entry->d_name;
    int pid = 0;
    long long start = 0;
    if (!name.starts_with(mine) || std::sscanf(entry->d_name + mine.size(), "%d-%lld-", &pid, &start) != 2 ||
        pid <= 0) {
      continue;
    }
    if (process_start(pid) != start) stale.emplace_back(name);
  }
  closedir(shm);
  for (const auto& name : stale)
    unlink(("/dev/shm/" + name).c_str());
}

} // namespace

void note_own_orphan(pid_t caller, std::int64_t caller_start, const LockRecord& lock) {
  if (caller <= 0 || caller_start <= 0) return;
  sweep_orphan_notes();
  const auto path = orphan_note_path(caller, caller_start, lock.program);
  if (path.empty()) return;
  unlink(path.c_str()); // an older note of this caller and name (a file of another user stays: O_EXCL fails)
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const auto text = fmt::format("{} {}\n", lock.id, lock.token);
  if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) unlink(path.c_str());
  close(fd);
}

bool noted_own_orphan(pid_t caller, std::int64_t caller_start, const LockRecord& lock) {
  if (caller <= 0 || caller_start <= 0) return false;
  const auto path = orphan_note_path(caller, caller_start, lock.program);
  if (path.empty()) return false;
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  std::array<char, 128> text{};
  const bool trusted = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 && st.st_uid == geteuid() &&
                       (st.st_mode & 0777) == 0600;
  const auto n = trusted ? read(fd, text.data(), text.size() - 1) : -1;
  close(fd);
  return n > 0 &&
         std::string_view(text.data(), static_cast<std::size_t>(n)) == fmt::format("{} {}\n", lock.id, lock.token);
}

namespace {
std::string look_up_user(uid_t uid) {
  if (const passwd* pw = getpwuid(uid); pw != nullptr && pw->pw_name != nullptr) return pw->pw_name;
  return fmt::format("{}", uid);
}
} // namespace

std::string user_name() {
  // Looked up once a process (a run asks up to three times: its request, the guardian's orphan records, the
  // history record; each getpwuid() reads /etc/passwd again: issue 30). The euid it was looked up for is kept
  // with it, so that a process whose euid changed gets its new one.
  const uid_t uid = geteuid();
  static const std::pair<uid_t, std::string> first{uid, look_up_user(uid)};
  return first.first == uid ? first.second : look_up_user(uid);
}

} // namespace mongolock
