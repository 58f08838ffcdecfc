#include <mongolock/identity.hpp>

#include <fmt/format.h>

#include <array>
#include <pwd.h>
#include <unistd.h>

namespace mongolock {

std::string host_name() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0 || buf[0] == '\0') return "unknown-host";
  return buf.data();
}

std::string holder_identity(pid_t pid) { return fmt::format("{}:{}", host_name(), pid); }

std::string user_name() {
  const uid_t uid = geteuid();
  if (const passwd* pw = getpwuid(uid); pw != nullptr && pw->pw_name != nullptr) return pw->pw_name;
  return fmt::format("{}", uid);
}

} // namespace mongolock
