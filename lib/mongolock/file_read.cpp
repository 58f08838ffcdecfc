#include <mongolock/error.hpp>
#include <mongolock/file_read.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mongolock {

namespace {

const char* type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISFIFO(mode)) return "a pipe";
  return "not a regular file";
}

bool allowed(mode_t mode, FileKind kind) {
  return S_ISREG(mode) || (kind == FileKind::regular_or_pipe && S_ISFIFO(mode));
}

class Fd {
public:
  explicit Fd(int fd) : m_fd(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (m_fd >= 0) close(m_fd);
  }
  [[nodiscard]] int get() const { return m_fd; }

private:
  int m_fd;
};

} // namespace

std::optional<std::string> untrusted_reason(uid_t owner, mode_t mode, uid_t me) {
  if ((mode & (S_IWGRP | S_IWOTH)) != 0) {
    const char* who = (mode & S_IWGRP) != 0 && (mode & S_IWOTH) != 0 ? "its group and others"
                      : (mode & S_IWGRP) != 0                        ? "its group"
                                                                     : "others";
    return fmt::format("it is writable by {} (mode {:04o})", who, mode & 07777);
  }
  if (owner != me && owner != 0) return fmt::format("it is owned by uid {} (not you or root)", owner);
  return std::nullopt;
}

namespace {

// One read_bounded_file() call: what it reads and how its errors read.
struct BoundedRead {
  const std::string& path;
  std::string_view what;
  FileKind kind;
  Millis timeout;
  FileTrust trust;
  std::size_t max_bytes;

  [[nodiscard]] std::string limit() const {
    return max_bytes % (1024 * 1024) == 0 ? fmt::format("{} MiB", max_bytes / (1024 * 1024))
                                          : fmt::format("{} KiB", max_bytes / 1024);
  }
  [[nodiscard]] Error fail(std::string_view why) const {
    return usage_error(fmt::format("cannot read {} '{}': {}", what, path, why));
  }
  // The file's type and size (of the path, then again of what was opened, in case the path changed).
  void check(const struct stat& st) const {
    if (!allowed(st.st_mode, kind)) {
      throw fail(fmt::format("it is {}; it must be a regular file{}", type_name(st.st_mode),
                             kind == FileKind::regular_or_pipe ? " or a pipe" : ""));
    }
    if (S_ISREG(st.st_mode) && static_cast<std::size_t>(st.st_size) > max_bytes) {
      throw fail(fmt::format("it is {} bytes long; the limit is {}", st.st_size, limit()));
    }
  }
  // FileTrust::private_to_user: a regular file only another user could have written is refused.
  void check_owner(const struct stat& st) const {
    if (trust != FileTrust::private_to_user || !S_ISREG(st.st_mode)) return;
    if (const auto why = untrusted_reason(st.st_uid, st.st_mode, geteuid())) {
      throw fail(fmt::format("{}; another user could point mongolock at a server of theirs, so it is not used: {}",
                             *why,
                             (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 ? fmt::format("chmod go-w '{}'", path)
                                                                     : std::string("use a file of your own")));
    }
  }
  // Reads `fd` to its end within the timeout and max_bytes.
  [[nodiscard]] std::string read_all(int fd) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string content;
    char buf[8192];
    for (;;) {
      const auto left = std::chrono::ceil<Millis>(deadline - std::chrono::steady_clock::now());
      pollfd pfd{.fd = fd, .events = POLLIN, .revents = 0};
      const int ready = left.count() > 0 ? poll(&pfd, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) throw fail(std::strerror(errno));
      if (ready == 0) {
        throw fail(fmt::format("it did not end within {} (the connect timeout); a pipe must be closed by its writer",
                               format_duration(timeout)));
      }
      const auto n = read(fd, buf, sizeof buf);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n < 0) throw fail(std::strerror(errno));
      if (n == 0) return content;
      content.append(buf, static_cast<std::size_t>(n));
      if (content.size() > max_bytes) throw fail(fmt::format("it is longer than {}", limit()));
    }
  }
};

} // namespace

std::string read_bounded_file(const std::string& path, std::string_view what, FileKind kind, Millis timeout,
                              FileTrust trust, std::size_t max_bytes) {
  const BoundedRead r{path, what, kind, timeout, trust, max_bytes};
  struct stat st{};
  if (path.empty()) throw usage_error(fmt::format("empty {} name; give a path", what));
  if (stat(path.c_str(), &st) != 0) throw r.fail(std::strerror(errno));
  r.check(st);
  const Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (fd.get() < 0) throw r.fail(std::strerror(errno));
  if (fstat(fd.get(), &st) != 0) throw r.fail(std::strerror(errno));
  r.check(st);
  r.check_owner(st);
  return r.read_all(fd.get());
}

} // namespace mongolock
