// Reading the files a user names (config file, --uri-file): bounded in size and in time.
#pragma once

#include <mongolock/duration.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace mongolock {

// The most a file mongolock reads may hold: 64 KiB (a URI or a config file is far smaller).
inline constexpr std::size_t k_max_file_bytes = 64 * 1024;

// What a file may be: a regular file only (the config file), or also a pipe (--uri-file, so that
// `--uri-file <(secret-tool lookup ...)` and `--uri-file /dev/stdin` work).
enum class FileKind { regular, regular_or_pipe };

// Whose changes a file's content may come from: anyone who could write it (FileTrust::any), or only its
// reader and root (FileTrust::private_to_user: the config file, --uri-file, which say which server to
// trust with the credentials and the lock; refused as ssh refuses its files otherwise).
enum class FileTrust { any, private_to_user };

// Why a regular file with owner `owner` and mode `mode` may not be trusted by user `me` (FileTrust::
// private_to_user): "it is writable by others (mode 0666)", "it is owned by uid 1001 (not you or root)"
// ; nullopt when it may. Group- or other-writable, or owned by a user other than `me` and root.
[[nodiscard]] std::optional<std::string> untrusted_reason(uid_t owner, mode_t mode, uid_t me);

// Reads the whole file at `path` (to its end) and returns its bytes. Refuses, with Error exit 64 naming
// `what` (e.g. "config file"), the path and the reason: a file that cannot be opened; anything but a
// regular file or, with FileKind::regular_or_pipe, a pipe (devices such as /dev/zero, directories,
// sockets, terminals: checked before the file is opened, so a FIFO without a writer cannot block); more
// than k_max_file_bytes; and a pipe that has not reached its end within `timeout` (ms; the connect
// timeout). Opens with O_NONBLOCK and waits with poll(2), so no read blocks past `timeout`. With
// FileTrust::private_to_user also a regular file that untrusted_reason() refuses (exit 64, with the fix:
// chmod go-w, or a file of one's own); pipes are not checked (their writer is whoever made them).
// `max_bytes`: the bound (a URI or config file: k_max_file_bytes; a metrics file: more).
[[nodiscard]] std::string read_bounded_file(const std::string& path, std::string_view what, FileKind kind,
                                            Millis timeout, FileTrust trust = FileTrust::any,
                                            std::size_t max_bytes = k_max_file_bytes);

} // namespace mongolock
