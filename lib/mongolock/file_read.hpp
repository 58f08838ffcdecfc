// Reading the files a user names (config file, --uri-file): bounded in size and in time.
#pragma once

#include <mongolock/duration.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace mongolock {

// The most a file mongolock reads may hold: 64 KiB (a URI or a config file is far smaller).
inline constexpr std::size_t k_max_file_bytes = 64 * 1024;

// What a file may be: a regular file only (the config file), or also a pipe (--uri-file, so that
// `--uri-file <(secret-tool lookup ...)` and `--uri-file /dev/stdin` work).
enum class FileKind { regular, regular_or_pipe };

// Reads the whole file at `path` (to its end) and returns its bytes. Refuses, with Error exit 64 naming
// `what` (e.g. "config file"), the path and the reason: a file that cannot be opened; anything but a
// regular file or, with FileKind::regular_or_pipe, a pipe (devices such as /dev/zero, directories,
// sockets, terminals: checked before the file is opened, so a FIFO without a writer cannot block); more
// than k_max_file_bytes; and a pipe that has not reached its end within `timeout` (ms; the connect
// timeout). Opens with O_NONBLOCK and waits with poll(2), so no read blocks past `timeout`.
[[nodiscard]] std::string read_bounded_file(const std::string& path, std::string_view what, FileKind kind,
                                            Millis timeout);

} // namespace mongolock
