#include <mongolock/cgroup.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace mongolock {

namespace {

// The mount point of the first cgroup2 mount in /proc/self/mountinfo ("ID PARENT MAJ:MIN ROOT MOUNTPOINT
// OPTIONS... - FSTYPE SOURCE SUPER") whose ROOT `want_root` accepts. Mount points with spaces are escaped
// (\040): not supported, skipped.
template <typename Accept> std::optional<std::string> cgroup2_mount_with(Accept want_root) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    if (!(tail >> fstype) || fstype != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, dev, root, mount_point;
    if (!(head >> id >> parent >> dev >> root >> mount_point)) continue;
    if (!want_root(root) || mount_point.find('\\') != std::string::npos) continue;
    return mount_point;
  }
  return std::nullopt;
}

// The cgroup2 hierarchy's mount point, when its root is "/" (a bind mount of a subtree would not match the
// path of /proc/self/cgroup).
std::optional<std::string> cgroup2_mount() {
  return cgroup2_mount_with([](const std::string& root) { return root == "/"; });
}

// A cgroup2 mount whose root is outside this process's cgroup namespace ("/..", "/../..", "/../x": a mount made
// before the namespace): it shows groups that /proc/self/cgroup's path does not lead to. A mount of a subtree
// inside the namespace ("/x", a bind mount) shows none of those, so it is not one (red team 10, F4: walking one of
// 20,000 groups refused an operator's release "unproven"). The kernel shows a root as a path from the namespace's
// root, so only one outside it starts with "/..".
std::optional<std::string> cgroup2_mount_outside_view() {
  return cgroup2_mount_with([](const std::string& root) { return root == "/.." || root.rfind("/../", 0) == 0; });
}

// Whether `pid` (decimal, as this PID namespace numbers it) is listed in DIR/cgroup.procs.
bool lists_member(const std::string& dir, const std::string& pid) {
  std::ifstream in(dir + "/cgroup.procs");
  std::string line;
  while (std::getline(in, line)) {
    if (line == pid) return true;
  }
  return false;
}

// Reads a small file through `fd` from offset 0 into `buf` (NUL-terminated). Async-signal-safe.
ssize_t read_small(int fd, char* buf, std::size_t size) {
  ssize_t n;
  do {
    n = pread(fd, buf, size - 1, 0);
  } while (n < 0 && errno == EINTR);
  buf[n > 0 ? n : 0] = '\0';
  return n;
}

// "populated 0|1" in the text of cgroup.events. Async-signal-safe.
CgroupState parse_events(const char* text) {
  const char* p = std::strstr(text, "populated ");
  if (p == nullptr) return CgroupState::unknown;
  p += std::strlen("populated ");
  if (*p == '0') return CgroupState::empty;
  if (*p == '1') return CgroupState::populated;
  return CgroupState::unknown;
}

bool off_by_environment() {
  const char* value = std::getenv("MONGOLOCK_CGROUP");
  return value != nullptr && std::strcmp(value, "off") == 0;
}

} // namespace

std::optional<std::string> hidden_cgroup_named(std::string_view prefix, bool* complete) {
  if (complete != nullptr) *complete = true;
  const auto mount = cgroup2_mount_outside_view();
  if (!mount) return std::nullopt;
  const auto self = std::to_string(getpid());
  struct Dir {
    std::string path;  // below the mount, "" for its root
    std::string match; // the first group named `prefix`... on the way here; "" while none
  };
  std::vector<Dir> todo{{"", ""}};
  bool unread = false;
  for (int budget = 20'000; !todo.empty() && budget > 0; --budget) {
    auto dir = std::move(todo.back());
    todo.pop_back();
    const auto full = *mount + dir.path;
    if (!dir.match.empty() && lists_member(full, self)) return dir.path;
    DIR* d = opendir(full.empty() ? "/" : full.c_str());
    if (d == nullptr) {
      unread = unread || errno != ENOENT; // gone meanwhile: nothing below; unreadable: it may hide the caller
      continue;
    }
    while (const dirent* entry = readdir(d)) {
      const std::string_view name = entry->d_name;
      if (entry->d_type != DT_DIR || name == "." || name == "..") continue;
      auto path = dir.path + "/" + std::string(name);
      auto match = !dir.match.empty() ? dir.match : (name.substr(0, prefix.size()) == prefix ? path : "");
      todo.push_back({std::move(path), std::move(match)});
    }
    closedir(d);
  }
  if (complete != nullptr) *complete = todo.empty() && !unread; // the budget ran out, or a group was unreadable
  return std::nullopt;
}

std::optional<std::string> own_cgroup_dir(std::string* why) {
  const auto say = [&](std::string text) {
    if (why != nullptr) *why = std::move(text);
    return std::nullopt;
  };
  const auto mount = cgroup2_mount();
  if (!mount) return say("no cgroup2 hierarchy is mounted (or not at its root)");
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    const auto path = line.substr(3);
    if (path.empty() || path.front() != '/' || path.find(" (deleted)") != std::string::npos) break;
    return path == "/" ? *mount : *mount + path;
  }
  return say("this process's cgroup2 group is unknown (/proc/self/cgroup has no \"0::\" line)");
}

CgroupState cgroup_state(const std::string& dir) {
  const int fd = open((dir + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    struct stat st {};
    // The directory itself is gone: it was removed (the kernel allows that only for an empty group), or the
    // path means another place in this mount view or cgroup namespace (red team of issue 26, X1).
    if (errno != ENOENT || stat(dir.c_str(), &st) == 0 || errno != ENOENT) return CgroupState::unknown;
    const auto parent = dir.substr(0, dir.rfind('/'));
    return !parent.empty() && stat((parent + "/cgroup.procs").c_str(), &st) == 0 ? CgroupState::gone
                                                                                 : CgroupState::unknown;
  }
  char text[256];
  const auto n = read_small(fd, text, sizeof text);
  close(fd);
  return n > 0 ? parse_events(text) : CgroupState::unknown;
}

bool remove_cgroup_tree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    std::vector<std::string> below;
    while (const dirent* entry = readdir(d)) {
      const std::string_view name = entry->d_name;
      if (entry->d_type == DT_DIR && name != "." && name != "..") below.emplace_back(name);
    }
    closedir(d);
    for (const auto& name : below)
      remove_cgroup_tree(dir + "/" + name);
  }
  return rmdir(dir.c_str()) == 0 || errno == ENOENT;
}

JobCgroup JobCgroup::create(std::string_view tag) {
  JobCgroup group;
  if (off_by_environment()) {
    group.m_why_not = "MONGOLOCK_CGROUP=off";
    return group;
  }
  std::string why;
  const auto parent = own_cgroup_dir(&why);
  if (!parent) {
    group.m_why_not = why;
    return group;
  }
  group.m_path = fmt::format("{}/mongolock-job-{}", *parent, tag);
  int made = mkdir(group.m_path.c_str(), 0755);
  if (made != 0 && errno == EEXIST) {
    remove_cgroup_tree(group.m_path); // a stale group of a process with this pid and start: none runs
    made = mkdir(group.m_path.c_str(), 0755);
  }
  if (made != 0) {
    group.m_why_not = fmt::format("cannot create {}: {}", group.m_path, std::strerror(errno));
    return group;
  }
  group.m_dir_fd = open(group.m_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  group.m_events_fd = open((group.m_path + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC);
  group.m_procs_fd = open((group.m_path + "/cgroup.procs").c_str(), O_RDONLY | O_CLOEXEC);
  group.m_kill_fd = open((group.m_path + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC); // Linux 5.14+
  if (group.m_dir_fd < 0 || group.m_events_fd < 0 || group.m_procs_fd < 0) {
    group.m_why_not = fmt::format("cannot open {}: {}", group.m_path, std::strerror(errno));
    group.close_all();
    rmdir(group.m_path.c_str());
  }
  return group;
}

JobCgroup::JobCgroup(JobCgroup&& other) noexcept { *this = std::move(other); }

JobCgroup& JobCgroup::operator=(JobCgroup&& other) noexcept {
  if (this == &other) return *this;
  close_all();
  m_path = std::move(other.m_path);
  m_why_not = std::move(other.m_why_not);
  m_dir_fd = std::exchange(other.m_dir_fd, -1);
  m_kill_fd = std::exchange(other.m_kill_fd, -1);
  m_procs_fd = std::exchange(other.m_procs_fd, -1);
  m_events_fd = std::exchange(other.m_events_fd, -1);
  return *this;
}

JobCgroup::~JobCgroup() {
  if (!valid()) return;
  close_all();
  remove_cgroup_tree(m_path);
}

void JobCgroup::close_all() {
  for (int* fd : {&m_dir_fd, &m_kill_fd, &m_procs_fd, &m_events_fd}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

bool JobCgroup::kill_all() const {
  if (m_kill_fd >= 0 && pwrite(m_kill_fd, "1", 1, 0) == 1) return true;
  if (m_procs_fd < 0) return false;
  // Before Linux 5.14: every pid listed, SIGKILLed (the caller repeats until the group is empty).
  char text[4096];
  if (read_small(m_procs_fd, text, sizeof text) < 0) return false;
  for (char* p = text; *p != '\0';) {
    char* end = nullptr;
    const long pid = std::strtol(p, &end, 10);
    if (end == p) break;
    if (pid > 0) kill(static_cast<pid_t>(pid), SIGKILL);
    p = end;
    while (*p == '\n')
      ++p;
  }
  return true;
}

CgroupState JobCgroup::state() const {
  if (m_events_fd < 0) return CgroupState::unknown;
  char text[256];
  return read_small(m_events_fd, text, sizeof text) > 0 ? parse_events(text) : CgroupState::unknown;
}

} // namespace mongolock
