// Who holds a lock: the holder identity "host:pid" stored as `process`.
#pragma once

#include <string>
#include <sys/types.h>

namespace mongolock {

// This machine's host name (gethostname(2)); "unknown-host" if it cannot be read.
[[nodiscard]] std::string host_name();

// The holder identity "<host>:<pid>" for process `pid` on this host.
[[nodiscard]] std::string holder_identity(pid_t pid);

// The login name of the effective user (getpwuid(3)), or the numeric uid when it has no name.
[[nodiscard]] std::string user_name();

} // namespace mongolock
