#include <doctest/doctest.h>

#include <mongolock/error.hpp>
#include <mongolock/file_read.hpp>

#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace mongolock;
using namespace std::chrono_literals;

TEST_SUITE_BEGIN("FileRead");

namespace {

// A temporary directory of the test case, removed with everything in it.
struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/mongolock-unit-XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    path = name;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
  [[nodiscard]] std::string file(const std::string& name, const std::string& content) const {
    const auto p = path + "/" + name;
    FILE* f = std::fopen(p.c_str(), "wb");
    REQUIRE(f != nullptr);
    std::fwrite(content.data(), 1, content.size(), f);
    std::fclose(f);
    return p;
  }
};

std::string error_of(const std::string& path, FileKind kind, Millis timeout = Millis(200)) {
  try {
    (void)read_bounded_file(path, "config file", kind, timeout);
  } catch (const Error& e) {
    CHECK(e.exit_code() == k_exit_usage);
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("A regular file is read whole, up to 64 KiB") {
  const TempDir dir;
  CHECK(read_bounded_file(dir.file("a", "db = x\n"), "config file", FileKind::regular, 1s) == "db = x\n");
  const std::string full(k_max_file_bytes, 'x');
  CHECK(read_bounded_file(dir.file("b", full), "config file", FileKind::regular, 1s) == full);
  const auto big = dir.file("c", full + "x");
  CHECK(error_of(big, FileKind::regular) ==
        "cannot read config file '" + big + "': it is 65537 bytes long; the limit is 64 KiB");
}

TEST_CASE("Devices, directories, missing files and (for the config file) pipes are refused before reading") {
  const TempDir dir;
  CHECK(error_of("/dev/zero", FileKind::regular_or_pipe) ==
        "cannot read config file '/dev/zero': it is a character device; it must be a regular file or a pipe");
  CHECK(error_of("/dev/urandom", FileKind::regular) ==
        "cannot read config file '/dev/urandom': it is a character device; it must be a regular file");
  CHECK(error_of(dir.path, FileKind::regular) ==
        "cannot read config file '" + dir.path + "': it is a directory; it must be a regular file");
  CHECK(error_of(dir.path + "/missing", FileKind::regular) ==
        "cannot read config file '" + dir.path + "/missing': No such file or directory");
  const auto fifo = dir.path + "/fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(error_of(fifo, FileKind::regular) ==
        "cannot read config file '" + fifo + "': it is a pipe; it must be a regular file");
  CHECK(error_of("", FileKind::regular) == "empty config file name; give a path");
}

TEST_CASE("A pipe is read to its end; one without a writer, or one that never ends, times out") {
  const TempDir dir;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  REQUIRE(write(fds[1], "mongodb://h\n", 12) == 12);
  close(fds[1]);
  CHECK(read_bounded_file("/dev/fd/" + std::to_string(fds[0]), "--uri-file", FileKind::regular_or_pipe, 1s) ==
        "mongodb://h\n");
  close(fds[0]);

  const auto fifo = dir.path + "/fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  CHECK(error_of(fifo, FileKind::regular_or_pipe, Millis(300)) ==
        "cannot read config file '" + fifo +
            "': it did not end within 300ms (the connect timeout); a pipe must be closed by its writer");
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= 300ms);
  CHECK(took < 5s); // bounded (generous: a loaded machine)

  // A writer that keeps the pipe open: the timeout ends it too.
  REQUIRE(pipe(fds) == 0);
  REQUIRE(write(fds[1], "x", 1) == 1);
  CHECK(error_of("/dev/fd/" + std::to_string(fds[0]), FileKind::regular_or_pipe, Millis(100))
            .find("did not end within") != std::string::npos);
  close(fds[0]);
  close(fds[1]);
}

TEST_CASE("A pipe with more than 64 KiB is refused") {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  REQUIRE(fcntl(fds[1], F_SETPIPE_SZ, 1 << 20) > 0);
  const std::string data(k_max_file_bytes + 1, 'x');
  REQUIRE(write(fds[1], data.data(), data.size()) == static_cast<ssize_t>(data.size()));
  const auto path = "/dev/fd/" + std::to_string(fds[0]);
  CHECK(error_of(path, FileKind::regular_or_pipe, Millis(1000)) ==
        "cannot read config file '" + path + "': it is longer than 64 KiB");
  close(fds[0]);
  close(fds[1]);
}

TEST_CASE("A file others could change is not trusted (FileTrust::private_to_user)") {
  CHECK_FALSE(untrusted_reason(1000, S_IFREG | 0600, 1000).has_value());
  CHECK_FALSE(untrusted_reason(0, S_IFREG | 0644, 1000).has_value()); // root's file
  CHECK(*untrusted_reason(1000, S_IFREG | 0620, 1000) == "it is writable by its group (mode 0620)");
  CHECK(*untrusted_reason(1000, S_IFREG | 0602, 1000) == "it is writable by others (mode 0602)");
  CHECK(*untrusted_reason(0, S_IFREG | 0666, 0) == "it is writable by its group and others (mode 0666)");
  CHECK(*untrusted_reason(1001, S_IFREG | 0644, 1000) == "it is owned by uid 1001 (not you or root)");

  const TempDir dir;
  const auto path = dir.file("uri", "mongodb://x\n");
  REQUIRE(chmod(path.c_str(), 0646) == 0);
  CHECK(read_bounded_file(path, "uri-file", FileKind::regular, 1s) == "mongodb://x\n"); // FileTrust::any
  try {
    (void)read_bounded_file(path, "uri-file", FileKind::regular, 1s, FileTrust::private_to_user);
    FAIL("a file writable by others was read");
  } catch (const Error& e) {
    CHECK(e.exit_code() == 64);
    CHECK(std::string(e.what()).find("chmod go-w '" + path + "'") != std::string::npos);
  }
  REQUIRE(chmod(path.c_str(), 0600) == 0);
  CHECK(read_bounded_file(path, "uri-file", FileKind::regular, 1s, FileTrust::private_to_user) == "mongodb://x\n");
}

TEST_SUITE_END();
