#include <mongolock/identity.hpp>
#include <mongolock/report.hpp>
#include <mongolock/text.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <charconv>
#include <signal.h>

namespace mongolock {

namespace {

using Json = nlohmann::ordered_json;

Json time_or_null(ServerTime t) { return t == ServerTime{} ? Json(nullptr) : Json(format_time(t)); }

Json to_json(const LockView& view) {
  const auto& lock = view.lock;
  Json j;
  j["name"] = lock.name;
  j["program"] = lock.program;
  j["slot"] = lock.slot > 0 ? Json(lock.slot) : Json(nullptr);
  j["state"] = lock_state(view);
  j["holder"] = lock.process;
  j["host"] = lock.host;
  j["user"] = lock.user;
  j["command"] = lock.command.empty() ? Json(nullptr) : Json(lock.command);
  j["acquired_at"] = format_time(lock.acquired_at);
  j["renewed_at"] = format_time(lock.renewed_at);
  j["expires_at"] = format_time(lock.expires_at);
  j["expires_in_ms"] = (lock.expires_at - view.now).count();
  j["ttl_ms"] = lock.ttl.count();
  j["hold_until"] = time_or_null(lock.hold_until);
  j["released_at"] = lock.released_at ? Json(format_time(*lock.released_at)) : Json(nullptr);
  j["fence"] = lock.fence ? Json(*lock.fence) : Json(nullptr);
  j["holder_alive"] = view.holder_alive ? Json(*view.holder_alive) : Json(nullptr);
  return j;
}

std::string relative(ServerTime t, ServerTime now) {
  return t >= now ? fmt::format("in {}", format_duration(t - now)) : fmt::format("{} ago", format_duration(now - t));
}

Json to_json(const QueuedWaiter& waiter) {
  Json j;
  j["position"] = waiter.position;
  j["waiter"] = waiter.ticket.process;
  j["waiting_since"] = format_time(waiter.ticket.since);
  j["ticket_expires_at"] = format_time(waiter.ticket.expires_at);
  return j;
}

Json waiters_json(const std::vector<QueuedWaiter>& waiters, const std::string& name) {
  Json j = Json::array();
  for (const auto& waiter : waiters) {
    if (waiter.ticket.name == name) j.push_back(to_json(waiter));
  }
  return j;
}

std::string alive_text(const std::optional<bool>& alive) { return alive ? (*alive ? "yes" : "no (dead)") : "-"; }

} // namespace

std::string lock_state(const LockView& view) {
  if (view.lock.expires_at <= view.now) return "expired";
  return view.lock.released_at ? "released" : "held";
}

bool is_live(const LockView& view) { return view.lock.expires_at > view.now; }

std::optional<bool> holder_alive_here(const std::string& holder) {
  const auto colon = holder.rfind(':');
  if (colon == std::string::npos || holder.substr(0, colon) != host_name()) return std::nullopt;
  int pid = 0;
  const auto digits = std::string_view(holder).substr(colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  if (ec != std::errc() || end != digits.data() + digits.size() || pid <= 0) return std::nullopt;
  return kill(pid, 0) == 0 || errno == EPERM;
}

std::string status_text(const std::string& name, const std::vector<LockView>& locks,
                        const std::vector<QueuedWaiter>& waiters, ServerTime now) {
  std::string out;
  if (locks.empty()) out = fmt::format("name: {}\nstate: free\n", name);
  for (const auto& view : locks) {
    const auto& lock = view.lock;
    if (!out.empty()) out += "\n";
    out += fmt::format("name: {}\n", printable(lock.name));
    if (lock.slot > 0) out += fmt::format("slot: {}\n", lock.slot);
    out += fmt::format("state: {}\nholder: {}\n", lock_state(view), printable(lock.process));
    if (view.holder_alive) out += fmt::format("holder alive: {}\n", alive_text(view.holder_alive));
    if (!lock.user.empty()) out += fmt::format("user: {}\n", printable(lock.user));
    if (!lock.command.empty()) out += fmt::format("command: {}\n", printable(lock.command));
    out += fmt::format("acquired: {} ({})\n", format_time(lock.acquired_at), relative(lock.acquired_at, view.now));
    out += fmt::format("renewed: {} ({})\n", format_time(lock.renewed_at), relative(lock.renewed_at, view.now));
    out += fmt::format("expires: {} ({})\n", format_time(lock.expires_at), relative(lock.expires_at, view.now));
    out += fmt::format("ttl: {}\n", format_duration(lock.ttl));
    if (lock.hold_until != ServerTime{}) {
      out += fmt::format("minimum hold until: {} ({})\n", format_time(lock.hold_until),
                         relative(lock.hold_until, view.now));
    }
    if (lock.released_at) out += fmt::format("released: {}\n", format_time(*lock.released_at));
    if (lock.fence) out += fmt::format("fence: {}\n", *lock.fence);
  }
  if (!waiters.empty()) {
    out += fmt::format("\nwaiters: {}\n", waiters.size());
    for (const auto& waiter : waiters) {
      out += fmt::format("  {}. {}, waiting since {} ({})\n", waiter.position, printable(waiter.ticket.process),
                         format_time(waiter.ticket.since), relative(waiter.ticket.since, now));
    }
  }
  return out;
}

std::string status_json(const std::string& name, const std::vector<LockView>& locks,
                        const std::vector<QueuedWaiter>& waiters) {
  Json j;
  j["name"] = name;
  bool held = false;
  for (const auto& view : locks)
    held = held || is_live(view);
  j["state"] = held ? "held" : "free";
  j["locks"] = Json::array();
  for (const auto& view : locks)
    j["locks"].push_back(to_json(view));
  j["waiters"] = waiters_json(waiters, name);
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

static std::string locks_table(const std::vector<LockView>& locks);

std::string list_text(const std::vector<LockView>& locks, const std::vector<QueuedWaiter>& waiters, ServerTime now) {
  std::string out = locks.empty() ? "no locks held\n" : locks_table(locks);
  if (waiters.empty()) return out;
  std::size_t name_width = 11, waiter_width = 6;
  for (const auto& waiter : waiters) {
    name_width = std::max(name_width, printable(waiter.ticket.name).size());
    waiter_width = std::max(waiter_width, printable(waiter.ticket.process).size());
  }
  out +=
      fmt::format("\n{:<{}}  {:<3}  {:<{}}  {}\n", "WAITING FOR", name_width, "POS", "WAITER", waiter_width, "SINCE");
  for (const auto& waiter : waiters) {
    out += fmt::format("{:<{}}  {:<3}  {:<{}}  {} ({})\n", printable(waiter.ticket.name), name_width, waiter.position,
                       printable(waiter.ticket.process), waiter_width, format_time(waiter.ticket.since),
                       relative(waiter.ticket.since, now));
  }
  return out;
}

static std::string locks_table(const std::vector<LockView>& locks) {
  std::size_t name_width = 4, holder_width = 6;
  for (const auto& view : locks) {
    name_width = std::max(name_width, printable(view.lock.program).size());
    holder_width = std::max(holder_width, printable(view.lock.process).size());
  }
  std::string out = fmt::format("{:<{}}  {:<{}}  {:<24}  {:<12}  {}\n", "NAME", name_width, "HOLDER", holder_width,
                                "ACQUIRED", "EXPIRES", "ALIVE");
  for (const auto& view : locks) {
    const auto& lock = view.lock;
    out += fmt::format("{:<{}}  {:<{}}  {:<24}  {:<12}  {}\n", printable(lock.program), name_width,
                       printable(lock.process), holder_width, format_time(lock.acquired_at),
                       relative(lock.expires_at, view.now), alive_text(view.holder_alive));
  }
  return out;
}

std::string list_json(const std::vector<LockView>& locks, const std::vector<QueuedWaiter>& waiters) {
  Json j = Json::array();
  for (const auto& view : locks) {
    auto lock = to_json(view);
    lock["waiters"] = waiters_json(waiters, view.lock.name);
    j.push_back(std::move(lock));
  }
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

} // namespace mongolock
