#include "sim_store.hpp"

#include "client.hpp"

#include <mongolock/error.hpp>

#include <fmt/format.h>

namespace sim {

using mongolock::Error;
using mongolock::LockRecord;
using mongolock::LockSelector;

namespace {

constexpr Millis k_operation_timeout{3000}; // a call without CallLimits (acquire, release): the URI's timeouts
constexpr Millis k_connect_timeout{500};    // how long a call to an unreachable server takes to fail
constexpr Millis k_max_delay{1500};         // a delayed request, at most

// The server aborted a command past its maxTimeMS (CallLimits::server) instead of writing.
struct Aborted {};

Error unavailable(const std::string& what) { return Error(mongolock::k_exit_unavailable, what); }

// Marks the client as inside a call (no step of its own meanwhile) for the guard's lifetime.
class Busy {
public:
  explicit Busy(bool& flag) : m_flag(flag) { m_flag = true; }
  ~Busy() { m_flag = false; }
  Busy(const Busy&) = delete;
  Busy& operator=(const Busy&) = delete;

private:
  bool& m_flag;
};

} // namespace

SimStore::SimStore(World& world, Client& client)
    : m_world(world), m_client(client), m_clock(world.server_now(), Millis(0), world.now()) {
  redraw_clock();
}

// A new estimate of the server's clock, as from a hello: off by at most half the round trip (the
// bounds ServerClock states: at() -/+ round_trip / 2 + 1 ms).
void SimStore::redraw_clock() {
  const auto rtt = m_world.rng().millis(Millis(0), m_world.config().max_rtt);
  const auto error = m_world.rng().millis(-rtt / 2, rtt / 2);
  m_clock = mongolock::ServerClock(m_world.server_now() - rtt / 2 + error, rtt, m_world.now());
}

void SimStore::reconnect(std::optional<mongolock::CallLimits> limits) {
  if (!limits) {
    m_call_deadline.reset();
    m_server_bound.reset();
    return;
  }
  m_call_deadline = m_world.now() + limits->total;
  m_server_bound = limits->server;
  redraw_clock(); // every renewal re-reads the server's clock (hello)
}

void SimStore::wait_until(LocalTime t) {
  m_world.run_until(t);
  while (m_world.now() < m_client.paused_until())
    m_world.run_until(m_client.paused_until()); // stopped: the reply waits in the socket
  if (m_client.dead()) throw Killed{};
}

LockSelector SimStore::sent(const LockSelector& which) const {
  auto out = which;
  if (m_world.config().plant == Plant::name_selector && !which.expired_by) {
    out.id.reset();
    out.token.reset();
  }
  return out;
}

template <typename T> T SimStore::call(const char* what, std::function<T()> op, Write kind) {
  auto& rng = m_world.rng();
  const auto& config = m_world.config();
  const Busy busy(m_client.m_busy);
  const auto start = m_world.now();
  const auto limit = m_call_deadline.value_or(start + k_operation_timeout);
  const auto rtt = m_clock.round_trip();
  if (m_world.outage()) {
    wait_until(std::min(limit, start + k_connect_timeout));
    throw unavailable(fmt::format("{}: server unreachable", what));
  }
  if (rng.chance(config.p_fail)) {
    wait_until(start + rtt / 2);
    throw unavailable(fmt::format("{}: failed before it reached the server", what));
  }
  // Two independent faults of a write: the request delayed on its way (it arrives after other clients'
  // writes), and, on FerretDB v1, a delay between its read and its write-back (others write meanwhile).
  const bool update = kind != Write::read;
  const auto transport = update && rng.chance(config.p_delay) ? rng.millis(Millis(10), k_max_delay) : Millis(0);
  const bool between = config.semantics == mongolock::WriteSemantics::ferretdb_v1 &&
                       (kind == Write::forced_delay || (update && rng.chance(config.p_delay)));
  const auto delay = !between                      ? Millis(0)
                     : kind == Write::forced_delay ? rng.millis(Millis(10), config.timing.ttl)
                                                   : rng.millis(Millis(10), k_max_delay);
  const auto arrives = start + rng.millis(Millis(0), rtt / 2) + transport;
  struct Outcome {
    std::optional<T> value;
    bool aborted = false;
  };
  auto outcome = std::make_shared<Outcome>();
  const auto bound = m_server_bound;
  World& world = m_world;
  m_world.at(arrives, [&world, op = std::move(op), outcome, between, delay, bound] {
    if (between) {
      world.server().between = [&world, delay, bound] {
        world.run_until(world.now() + (bound ? std::min(delay, *bound) : delay));
        if (bound && delay > *bound) throw Aborted{};
      };
    }
    try {
      outcome->value = op();
    } catch (const Aborted&) {
      outcome->aborted = true;
    }
    world.server().between = nullptr;
  });
  if (arrives > limit) {
    wait_until(limit);
    throw unavailable(fmt::format("{}: timed out (the request is still on its way)", what));
  }
  wait_until(arrives);
  if (outcome->aborted) {
    wait_until(m_world.now() + rtt / 2);
    throw unavailable(fmt::format("{}: operation exceeded time limit", what));
  }
  if (rng.chance(config.p_lost)) {
    wait_until(limit);
    throw unavailable(fmt::format("{}: reply lost (the write applied)", what));
  }
  const auto reply = m_world.now() + rng.millis(Millis(0), rtt / 2);
  if (reply > limit) {
    wait_until(limit);
    throw unavailable(fmt::format("{}: timed out (the write applied)", what));
  }
  wait_until(reply);
  if (m_world.now() > limit) throw unavailable(fmt::format("{}: timed out (the reply came too late)", what));
  return std::move(*outcome->value);
}

bool SimStore::insert(LockRecord& lock) {
  if (lock.id.empty()) lock.id = fmt::format("{:08x}{:016x}", m_client.id(), ++m_next_id); // client-side, as a driver
  auto copy = lock;
  return call<bool>(
      "insert",
      [this, copy]() mutable {
        const bool inserted = m_world.server().insert(copy);
        m_world.note(fmt::format("  server: insert {} ({}) by c{}: {}", copy.program, copy.id, m_client.id(),
                                 inserted ? "inserted" : "duplicate key"));
        return inserted;
      },
      Write::read);
}

std::int64_t SimStore::remove(const LockSelector& which) { return remove_returning(which) ? 1 : 0; }

std::optional<LockRecord> SimStore::remove_returning(const LockSelector& which) {
  const auto selector = sent(which);
  return call<std::optional<LockRecord>>(
      "findAndModify (remove)",
      [this, selector] {
        auto removed = m_world.server().remove_returning(selector);
        if (removed) {
          m_world.note(fmt::format("  server: delete {} ({}) by c{}{}", removed->program, removed->id, m_client.id(),
                                   selector.expired_by ? " (takeover)" : ""));
          if (selector.expired_by) m_world.purged(*removed);
        }
        return removed;
      },
      Write::update);
}

std::int64_t SimStore::renew(const LockSelector& which, ServerTime expires_at, ServerTime renewed_at, Millis ttl,
                             bool mark_waiters) {
  const auto selector = sent(which);
  return call<std::int64_t>(
      "findAndModify (renew)",
      [this, selector, expires_at, renewed_at, ttl, mark_waiters] {
        const auto n = m_world.server().renew(selector, expires_at, renewed_at, ttl, mark_waiters);
        m_world.note(fmt::format("  server: renewal of {} by c{}: matched {}", selector.program, m_client.id(), n));
        return n;
      },
      Write::update);
}

std::int64_t SimStore::mark_released(const LockSelector& which, ServerTime released_at, ServerTime expires_at) {
  const auto selector = sent(which);
  return call<std::int64_t>(
      "update (released)",
      [this, selector, released_at, expires_at] {
        return m_world.server().mark_released(selector, released_at, expires_at);
      },
      Write::update);
}

std::int64_t SimStore::set_fence(const LockSelector& which, std::int64_t fence) {
  const auto selector = sent(which);
  return call<std::int64_t>(
      "update (fence)", [this, selector, fence] { return m_world.server().set_fence(selector, fence); }, Write::update);
}

void SimStore::mark_waiters(const LockSelector& which) {
  (void)call<std::int64_t>(
      "update (waiters)",
      [this, which] {
        const auto n = m_world.server().mark_waiters(which);
        m_world.note(fmt::format("  server: c{} set waiters on {}: matched {}", m_client.id(), which.program, n));
        return n;
      },
      Write::forced_delay);
}

std::int64_t SimStore::next_fence(std::string_view name) {
  const std::string n(name);
  return call<std::int64_t>("next fence", [this, n] { return m_world.server().next_fence(n); }, Write::read);
}

std::optional<LockRecord> SimStore::find(std::string_view program) {
  const std::string p(program);
  return call<std::optional<LockRecord>>("find", [this, p] { return m_world.server().find(p); }, Write::read);
}

std::vector<LockRecord> SimStore::list(std::optional<std::string_view> name) {
  const std::optional<std::string> n = name ? std::optional<std::string>(std::string(*name)) : std::nullopt;
  return call<std::vector<LockRecord>>(
      "find (list)",
      [this, n] { return m_world.server().list(n ? std::optional<std::string_view>(*n) : std::nullopt); }, Write::read);
}

// The queue and the events: not simulated yet (waiters come with the Waiter state machine); direct.
std::int64_t SimStore::highest_ticket() { return m_world.server().highest_ticket(); }
bool SimStore::insert_ticket(mongolock::TicketRecord& ticket) { return m_world.server().insert_ticket(ticket); }
std::int64_t SimStore::renew_ticket(std::string_view id, ServerTime now, ServerTime expires_at) {
  return m_world.server().renew_ticket(id, now, expires_at);
}
std::int64_t SimStore::remove_ticket(std::string_view id, std::optional<ServerTime> expired_at_or_before) {
  return m_world.server().remove_ticket(id, expired_at_or_before);
}
std::vector<mongolock::TicketRecord> SimStore::tickets(const std::vector<std::string>& names) {
  return m_world.server().tickets(names);
}
void SimStore::append_event(std::string_view name, std::string_view ticket) {
  m_world.server().append_event(name, ticket);
}
std::unique_ptr<mongolock::EventFeed> SimStore::follow_events(Millis await) {
  return m_world.server().follow_events(await);
}

} // namespace sim
