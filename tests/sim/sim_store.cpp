#include "sim_store.hpp"
#include <mongolock/store/bson.hpp>

#include "bson_eval.hpp"
#include "client.hpp"

#include <mongolock/error.hpp>
#include <mongolock/store/commands.hpp>

#include <fmt/format.h>

namespace sim {

using mongolock::Error;
using mongolock::LockRecord;
using mongolock::LockSelector;
using mongolock::TicketRecord;

namespace {

// --- MongoStore's documents on the server's records ---------------------------------------------------
// Every write's filter and update is the one MongoStore sends (store/commands.hpp), built when the call is
// sent and evaluated on the stored records as BSON documents (bson_eval.hpp); every inserted document is
// MongoStore's, read back as MongoStore reads it. So a wrong operator or a missing condition in MongoStore's
// documents is a wrong write here too.

// An owned BSON document: the project's own RAII wrapper.
using Doc = mongolock::store::Bson;
using SharedDoc = std::shared_ptr<const Doc>;

// A document built by `build(bson_t*)`.
template <typename Build> SharedDoc make_doc(Build&& build) {
  auto doc = std::make_shared<Doc>();
  build(doc->get());
  return doc;
}

template <typename Record> bool record_matches(const SharedDoc& filter, const Record& record, const Server& server) {
  const Doc doc;
  mongolock::store::to_bson(record, doc.get());
  return matches(filter->get(), doc.get(), server);
}

// `lock` as MongoStore stores it and reads it back (its insert and its reads).
LockRecord stored(const LockRecord& lock) {
  const Doc doc;
  mongolock::store::to_bson(lock, doc.get());
  return mongolock::store::from_bson(doc.get());
}

void apply_to_lock(const SharedDoc& update, LockRecord& lock) {
  const Doc doc;
  const Doc out;
  mongolock::store::to_bson(lock, doc.get());
  apply_update(update->get(), doc.get(), out.get());
  lock = mongolock::store::from_bson(out.get());
}

void apply_to_ticket(const SharedDoc& update, TicketRecord& ticket) {
  const Doc doc;
  const Doc out;
  mongolock::store::to_bson(ticket, doc.get());
  apply_update(update->get(), doc.get(), out.get());
  ticket = mongolock::store::ticket_from_bson(out.get());
}

// The fields an update sets, as MemoryStore logs them ("expires_at,renewed_at,ttl_ms").
std::string set_fields(const SharedDoc& update) {
  std::string out;
  bson_iter_t it;
  bson_iter_t field;
  if (bson_iter_init_find(&it, update->get(), "$set") && bson_iter_recurse(&it, &field)) {
    while (bson_iter_next(&field))
      out += (out.empty() ? "" : ",") + std::string(bson_iter_key(&field));
  }
  return out;
}

std::string json(const bson_t* doc) {
  char* text = bson_as_relaxed_extended_json(doc, nullptr);
  std::string out = text;
  bson_free(text);
  return out;
}

template <typename Record> std::string record_json(const Record& record) {
  const Doc doc;
  mongolock::store::to_bson(record, doc.get());
  return json(doc.get());
}

// The oracle: LockStore's contract for each call (lock_store.hpp: which documents a LockSelector selects, what
// renew/mark_released/set_fence and the tickets' calls write), as MemoryStore implements it. MongoStore's
// filter and update are checked against it on every document the server evaluates them on: a filter that
// selects otherwise, or an update that writes otherwise, is a violation at once, even where the schedule's
// invariants would not notice (a renewal that never matches is only a lost lease).
template <typename Record> using Contract = std::function<bool(const Record&)>;
template <typename Record> using Change = std::function<void(Record&)>;

template <typename Record>
bool checked_match(const char* call, const SharedDoc& filter, const Record& record, const Contract<Record>& contract,
                   const Server& server = {}) {
  const bool selected = record_matches(filter, record, server);
  if (selected != contract(record)) {
    throw Violation(fmt::format("MongoStore's filter of {} {} {} the document {}, against LockStore's contract "
                                "(lock_store.hpp)",
                                call, json(filter->get()), selected ? "selects" : "does not select",
                                record_json(record)));
  }
  return selected;
}

template <typename Record>
void check_written(const char* call, const SharedDoc& update, const Record& written, const Record& expected) {
  const Doc a;
  const Doc b;
  mongolock::store::to_bson(written, a.get());
  mongolock::store::to_bson(expected, b.get());
  if (!bson_equal(a.get(), b.get())) {
    throw Violation(fmt::format("MongoStore's update of {} {} wrote {}, LockStore's contract (lock_store.hpp) {}", call,
                                json(update->get()), json(a.get()), json(b.get())));
  }
}

// The server's update of a lock document by MongoStore's filter and update, checked against the contract.
std::int64_t update_lock(mongolock::MemoryStore& server, const char* call, const SharedDoc& filter,
                         const SharedDoc& update, const Contract<LockRecord>& contract,
                         const Change<LockRecord>& change, const Server& evaluated_on = {}) {
  return server.update_where(
      [&](const LockRecord& lock) { return checked_match(call, filter, lock, contract, evaluated_on); },
      set_fields(update),
      [&](LockRecord& lock) {
        auto expected = lock;
        change(expected);
        apply_to_lock(update, lock);
        check_written(call, update, lock, expected);
      });
}

Contract<LockRecord> selects(const LockSelector& which) {
  return [which](const LockRecord& lock) { return mongolock::selects(which, lock); };
}

constexpr Millis k_operation_timeout{3000}; // a call without CallLimits (acquire, release): the URI's timeouts
constexpr Millis k_connect_timeout{500};    // how long a call to an unreachable server takes to fail
constexpr Millis k_max_delay{1500};         // a delayed request, at most (mostly)
constexpr Millis k_long_delay{6000};        // a request delayed long, or one that lands after an early error

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
    : m_world(world), m_client(client), m_clock(world.server_now(), Millis(0), client.local_now()) {
  redraw_clock();
}

// A new estimate of the server's clock, as from a hello: off by at most half the round trip (the
// bounds ServerClock states: at() -/+ round_trip / 2 + 1 ms), anchored on this client's clock (which may drift
// from the server's: Config::ppm).
void SimStore::redraw_clock() {
  const auto rtt = m_client.rng().millis(Millis(0), m_world.config().max_rtt);
  const auto error = m_client.rng().millis(-rtt / 2, rtt / 2);
  m_clock = mongolock::ServerClock(m_world.server_now() - rtt / 2 + error, rtt, m_client.local_now());
}

void SimStore::reconnect(std::optional<mongolock::CallLimits> limits) {
  if (!limits) {
    m_call_deadline.reset();
    m_server_bound.reset();
    return;
  }
  m_call_deadline = m_client.local_now() + limits->total; // counted on this client's clock
  m_server_bound = limits->server;
  if (limits->reread_clock) redraw_clock(); // every renewal re-reads the server's clock (hello)
}

void SimStore::wait_until(LocalTime t) {
  m_client.m_wait_end = t;
  m_world.run_until(t);
  while (m_world.now() < m_client.paused_until())
    m_world.run_until(m_client.paused_until()); // stopped: the reply waits in the socket
  // Held up by calls nested in this one (the scheduler), also past the end of a pause.
  if (m_world.now() > std::max(t, m_client.paused_until())) m_client.overran();
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

// When a request reaches the server, and its faults: two independent faults of a write, the request delayed
// on its way (it arrives after other clients' writes) and, on FerretDB v1, a delay between its read and its
// write-back (others write meanwhile); and an error that comes back early while the write is on its way.
SimStore::Arrival SimStore::draw_arrival(Write kind, LocalTime start, LocalTime limit) {
  auto& rng = m_client.rng();
  const auto& config = m_world.config();
  const auto p = rates();
  const auto rtt = m_clock.round_trip();
  const bool update = kind != Write::read;
  // A delayed request: mostly up to 1.5 s, 1 in 4 up to several seconds (past a pin's clearing time:
  // LeaseBook's server bound + 1 s).
  const auto transport =
      update && rng.chance(p.delay) ? rng.millis(Millis(10), rng.chance(0.25) ? k_long_delay : k_max_delay) : Millis(0);
  Arrival a;
  a.between = config.semantics == mongolock::WriteSemantics::ferretdb_v1 &&
              (kind == Write::forced_delay || (update && rng.chance(p.delay)));
  a.delay = !a.between                    ? Millis(0)
            : kind == Write::forced_delay ? rng.millis(Millis(10), config.timing.ttl)
                                          : rng.millis(Millis(10), k_max_delay);
  a.arrives = start + rng.millis(Millis(0), rtt / 2) + transport;
  // An error that comes back early (a connection reset, a failover's "not primary") while the request is
  // still on its way or queued at the server: it lands later, up to several seconds after the error.
  if (update && rng.chance(p.early)) {
    a.early = std::min(limit, start + rng.millis(Millis(0), rtt / 2 + Millis(1)));
    a.arrives = std::max(a.arrives, *a.early + rng.millis(Millis(1), k_long_delay));
  }
  if (transport > Millis(0) || a.between || a.early) m_client.fault(a.arrives + a.delay);
  return a;
}

SimStore::Rates SimStore::rates() const {
  const auto& c = m_world.config();
  if (!m_client.is_operator()) return {c.p_fail, c.p_lost, c.p_delay, c.p_early, 0};
  return {c.p_fail, std::max(c.p_lost, 0.1), std::max(c.p_delay, 0.3), std::max(c.p_early, 0.1), 0.2};
}

LockRecord SimStore::overwritten(const LockRecord& read) const {
  auto current = m_world.server().find(read.program);
  return current && current->id == read.id ? *current : read;
}

std::optional<OperatorCommand> SimStore::command() const {
  return m_client.is_operator() ? std::optional(m_client.command()) : std::nullopt;
}

// A network error as MongoStore reports it (store/impl.hpp): fail()'s transient one, or fail_write()'s "outcome
// unknown" (transient only under Plant::unknown_transient).
Error SimStore::network_error(const char* what, std::string_view text, Fails fails) const {
  if (fails == Fails::transient) return Error(mongolock::k_exit_unavailable, fmt::format("{}: {}", what, text), true);
  return Error(mongolock::k_exit_unavailable, fmt::format("{}: {}: outcome unknown", what, text),
               m_world.config().plant == Plant::unknown_transient);
}

// A failover's error answer, as MongoStore makes it of the driver's error (store::transient_failure() decides
// whether it is transient: Impl::fail()); its text names it (k_failover_answer) for the client's invariant.
Error SimStore::election_answer(const char* what) {
  constexpr std::uint32_t codes[] = {91, 189, 10107, 11602, 13435, 13436};
  bson_error_t error{};
  error.domain = MONGOC_ERROR_SERVER;
  error.code = codes[m_client.rng().range(0, static_cast<int>(std::size(codes)) - 1)];
  return Error(mongolock::k_exit_unavailable, fmt::format("{}: {} {})", what, k_failover_answer, error.code),
               mongolock::store::transient_failure(error));
}

// The operator's write sent twice (a retried write's copy, a script's second run): the copy lands up to several
// seconds after the first, unanswered.
template <typename T> void SimStore::duplicate(const char* what, const std::function<T()>& op, LocalTime arrives) {
  World& world = m_world;
  m_world.at(arrives + m_client.rng().millis(Millis(1), k_long_delay), [&world, copy = op, what] {
    world.note(fmt::format("  server: a copy of the operator's {}", what));
    (void)copy();
  });
}

template <typename T> T SimStore::call(const char* what, std::function<T()> op, Write kind, Fails fails) {
  if (m_client.dead()) throw Killed{}; // a dead process sends nothing
  auto& rng = m_client.rng();
  const auto p = rates();
  const Busy busy(m_client.m_busy);
  const auto start = m_world.now();
  const auto limit = m_call_deadline ? m_client.world_at(*m_call_deadline) : start + k_operation_timeout;
  const auto rtt = m_clock.round_trip();
  const auto network = [&](std::string_view text) { return network_error(what, text, fails); };
  if (m_world.outage()) {
    m_client.fault(m_world.outage_end());
    if (m_world.election()) {
      wait_until(std::min(limit, start + rtt));
      throw election_answer(what);
    }
    wait_until(std::min(limit, start + k_connect_timeout));
    throw network("server unreachable (server selection failed)");
  }
  if (rng.chance(p.fail)) {
    m_client.fault(start + rtt / 2);
    wait_until(start + rtt / 2);
    throw network("failed before it reached the server");
  }
  if (kind != Write::read && m_world.config().plant != Plant::pin_none) ++m_writes_sent;
  const auto arrival = draw_arrival(kind, start, limit);
  const auto arrives = arrival.arrives;
  const auto early = arrival.early;
  const bool between = arrival.between;
  const auto delay = arrival.delay;
  struct Outcome {
    std::optional<T> value;
    bool aborted = false;
  };
  auto outcome = std::make_shared<Outcome>();
  const auto bound = m_server_bound;
  World& world = m_world;
  if (p.duplicate > 0 && kind != Write::read && rng.chance(p.duplicate)) duplicate<T>(what, op, arrives);
  m_world.at(arrives, [&world, op = std::move(op), outcome, between, delay, bound] {
    if (between) {
      world.server().between = [&world, delay, bound] {
        const auto read_at = world.now();
        world.run_until(world.now() + (bound ? std::min(delay, *bound) : delay));
        // maxTimeMS: no write-back once the bound has passed since the read, also when the scheduler ran
        // other clients' nested calls meanwhile and came back later than planned (it overran by seconds:
        // seeds 2573 and 6582 of --semantics ferretdb, a renewal written 4-5 s past its maxTimeMS).
        if (bound && (delay > *bound || world.now() - read_at > *bound)) throw Aborted{};
      };
    }
    try {
      outcome->value = op();
    } catch (const Aborted&) {
      outcome->aborted = true;
    }
    world.server().between = nullptr;
  });
  if (early) {
    wait_until(*early);
    throw network("connection reset (the request is still on its way)");
  }
  if (arrives > limit) {
    wait_until(limit);
    throw network("timed out (the request is still on its way)");
  }
  wait_until(arrives);
  if (outcome->aborted) {
    wait_until(m_world.now() + rtt / 2);
    throw unavailable(fmt::format("{}: operation exceeded time limit", what));
  }
  if (rng.chance(p.lost)) {
    m_client.fault(limit);
    wait_until(limit);
    throw network("reply lost (the write applied)");
  }
  const auto reply = m_world.now() + rng.millis(Millis(0), rtt / 2);
  if (reply > limit) {
    wait_until(limit);
    throw network("timed out (the write applied)");
  }
  wait_until(reply);
  if (m_world.now() > limit) throw network("timed out (the reply came too late)");
  return std::move(*outcome->value);
}

bool SimStore::insert(LockRecord& lock) {
  if (lock.id.empty()) lock.id = fmt::format("{:08x}{:016x}", m_client.id(), ++m_next_id); // client-side, as a driver
  auto copy = lock;
  if (m_world.config().plant == Plant::long_expiry) copy.expires_at += m_world.config().timing.ttl;
  copy = stored(copy);
  m_client.m_in_hand.insert(lock.id);
  const bool grant_check = m_client.m_waiter != nullptr;
  const auto waiting_since = m_client.m_waiting_since;
  const bool confirmed = call<bool>(
      "insert",
      [this, copy, grant_check, waiting_since]() mutable {
        const bool inserted = m_world.server().insert(copy);
        m_world.note(fmt::format("  server: insert {} ({}) by c{}: {}", copy.program, copy.id, m_client.id(),
                                 inserted ? "inserted" : "duplicate key"));
        if (inserted && !copy.ticket.empty()) m_world.queue_grant(copy);
        if (inserted && copy.ticket.empty() && grant_check) m_world.ticketless_grant(copy, waiting_since);
        return inserted;
      },
      Write::read, Fails::unknown);
  if (confirmed) m_client.m_confirmed.insert(lock.id);
  return confirmed;
}

std::int64_t SimStore::remove(const LockSelector& which) { return remove_returning(which) ? 1 : 0; }

std::optional<LockRecord> SimStore::remove_returning(const LockSelector& which) {
  const auto selector = sent(which);
  const auto filter = make_doc([&](bson_t* out) { mongolock::store::append_selector(out, selector); });
  return call<std::optional<LockRecord>>(
      "findAndModify (remove)",
      [this, selector, filter, command = command()] {
        auto removed = m_world.server().remove_where(
            [&](const LockRecord& lock) { return checked_match("delete", filter, lock, selects(selector)); });
        if (removed && command) m_world.operator_write(*command, *removed, std::nullopt);
        if (removed) {
          m_world.note(fmt::format("  server: delete {} ({}) by c{}{}", removed->program, removed->id, m_client.id(),
                                   selector.expired_by ? " (takeover)" : ""));
          if (selector.expired_by) m_world.purged(*removed);
        }
        return removed;
      },
      Write::update, Fails::unknown);
}

// A renewal as MongoStore sends it: with the server-time condition while this client's store has it
// (store::ServerTimeCondition; never under Plant::no_server_time); the simulated FerretDB v1 refuses it on the
// document it reaches, and the renewal is sent once more without it, as MongoStore does.
std::int64_t SimStore::renew(const LockSelector& which, ServerTime expires_at, ServerTime renewed_at, Millis ttl,
                             bool mark_waiters) {
  auto selector = sent(which);
  if (m_world.config().plant == Plant::renew_by_name) {
    selector.id.reset();
    selector.token.reset();
  }
  // The planted bug: a renewal built from a stale copy of the lock (the token of an earlier acquisition).
  if (m_world.config().plant == Plant::stale_renewal && selector.token && m_client.rng().chance(0.2)) {
    selector.token = *selector.token + "-stale";
  }
  const auto sent_at = m_client.local_now();
  const Renewal renewal{selector, expires_at, renewed_at, ttl, mark_waiters};
  const auto round_trip = std::max(m_clock.round_trip(), Millis(10)); // as MongoStore: time for a resend
  const bool time_for_resend = !m_call_deadline || *m_call_deadline - m_client.local_now() >= 2 * round_trip;
  const bool with_condition = m_server_time.sent(time_for_resend);
  auto matched = send_renewal(renewal, with_condition);
  if (matched && *matched > 0 && with_condition) m_server_time.accepted(); // evaluated: as MongoStore
  if (!matched) {
    bson_error_t refusal{};
    bson_set_error(&refusal, MONGOC_ERROR_SERVER, 238, "The operator $gt is not implemented yet");
    if (m_server_time.resend_without(refusal)) {
      matched = send_renewal(renewal, false);
      if (matched) (void)m_server_time.lacking();
    }
    if (!matched) throw unavailable("findAndModify (renew): refused (238 NotImplemented)");
  }
  const auto deadline = which.id ? m_client.lease_deadline_of(*which.id) : std::nullopt;
  if (*matched > 0 && deadline && m_client.local_now() >= *deadline) {
    m_world.count("late replies");
    // The planted bug: the heartbeat's reading of the reply's arrival is the send time (it counts the late reply).
    if (m_world.config().plant == Plant::late_reply) m_world.lie_once(sent_at);
  }
  return *matched;
}

void SimStore::probe_server_time(const LockSelector& which) {
  if (m_server_time.decided() || m_world.config().plant == Plant::no_server_time) return;
  const auto selector = sent(which);
  auto read = probe_find(selector, true);
  if (read && *read) m_server_time.accepted(); // evaluated: as MongoStore
  if (!read) {
    bson_error_t refusal{};
    bson_set_error(&refusal, MONGOC_ERROR_SERVER, 238, "The operator $gt is not implemented yet");
    if (m_server_time.resend_without(refusal)) {
      read = probe_find(selector, false);
      if (read && *read) (void)m_server_time.lacking();
    }
    if (!read) throw unavailable("find (server-time probe): refused (238 NotImplemented)");
  }
}

// The probe's read: the renewal's filter (renew_filter()) evaluated on the document of the selector's program,
// checked against renew's contract as a renewal's filter is; nothing is written.
std::optional<bool> SimStore::probe_find(const LockSelector& selector, bool server_time) {
  const auto filter = make_doc([&](bson_t* out) { mongolock::store::renew_filter(selector, out, server_time); });
  return call<std::optional<bool>>(
      "find (server-time probe)",
      [this, selector, filter, server_time]() -> std::optional<bool> {
        auto live = selector;
        live.not_released = true;
        const bool mongodb = server_time && m_world.config().semantics == mongolock::WriteSemantics::mongodb;
        const auto now = m_world.server_now();
        const auto contract = [live, mongodb, now](const LockRecord& lock) {
          return mongolock::selects(live, lock) && (!mongodb || lock.expires_at > now);
        };
        const Server server{mongolock::store::to_bson_date(now),
                            m_world.config().semantics == mongolock::WriteSemantics::ferretdb_v1};
        const auto lock = m_world.server().find(selector.program);
        try {
          const bool read = lock && checked_match("probe", filter, *lock, Contract<LockRecord>(contract), server);
          m_world.note(fmt::format("  server: server-time probe of {} by c{}{}: {}", selector.program, m_client.id(),
                                   server_time ? "" : " (without the condition)", read ? "read" : "nothing"));
          return read;
        } catch (const Refused&) {
          m_world.count("server-time probes refused (FerretDB v1)");
          m_world.note(fmt::format("  server: server-time probe of {} by c{}: refused ($expr)", selector.program,
                                   m_client.id()));
          return std::nullopt;
        }
      },
      Write::read);
}

// One findAndModify of a renewal; nullopt when the server refused its server-time condition. The planted bug
// no_server_time leaves the condition out of the filter when the store sends it (the contract still has it).
std::optional<std::int64_t> SimStore::send_renewal(const Renewal& r, bool server_time) {
  const bool in_filter = server_time && m_world.config().plant != Plant::no_server_time;
  const auto filter = make_doc([&](bson_t* out) { mongolock::store::renew_filter(r.selector, out, in_filter); });
  const auto update = make_doc(
      [&](bson_t* out) { mongolock::store::renew_update(r.expires_at, r.renewed_at, r.ttl, r.mark_waiters, out); });
  return call<std::optional<std::int64_t>>(
      "findAndModify (renew)",
      [this, r, filter, update, server_time, command = command()]() -> std::optional<std::int64_t> {
        auto live = r.selector; // LockStore::renew: never a released document
        live.not_released = true;
        // ...nor, on MongoDB, one expired on the server's clock when the condition is sent: the contract the
        // filter is checked against.
        const bool mongodb = server_time && m_world.config().semantics == mongolock::WriteSemantics::mongodb;
        const auto now = m_world.server_now();
        const auto contract = [live, mongodb, now](const LockRecord& lock) {
          return mongolock::selects(live, lock) && (!mongodb || lock.expires_at > now);
        };
        const Server server{mongolock::store::to_bson_date(now),
                            m_world.config().semantics == mongolock::WriteSemantics::ferretdb_v1};
        try {
          const auto n = update_lock(
              m_world.server(), "renew", filter, update, contract,
              [&](LockRecord& lock) {
                const auto before = overwritten(lock);
                lock.expires_at = r.expires_at;
                lock.renewed_at = r.renewed_at;
                lock.ttl = r.ttl;
                lock.waiters = lock.waiters || r.mark_waiters;
                if (command) m_world.operator_write(*command, before, lock);
              },
              server);
          m_world.note(fmt::format("  server: renewal of {} by c{}: matched {}", r.selector.program, m_client.id(), n));
          return n;
        } catch (const Refused&) {
          m_world.count("renewals refused for their server-time condition (FerretDB v1)");
          m_world.note(
              fmt::format("  server: renewal of {} by c{}: refused ($expr)", r.selector.program, m_client.id()));
          return std::nullopt;
        }
      },
      Write::update, Fails::unknown);
}

std::int64_t SimStore::mark_released(const LockSelector& which, ServerTime released_at, ServerTime expires_at) {
  const auto selector = sent(which);
  const auto filter = make_doc([&](bson_t* out) { mongolock::store::append_selector(out, selector); });
  const auto update = make_doc([&](bson_t* out) { mongolock::store::release_update(released_at, expires_at, out); });
  return call<std::int64_t>(
      "update (released)",
      [this, selector, filter, update, released_at, expires_at, command = command()] {
        return update_lock(m_world.server(), "mark_released", filter, update, selects(selector), [&](LockRecord& lock) {
          const auto before = overwritten(lock);
          lock.released_at = released_at;
          lock.expires_at = expires_at;
          if (command) m_world.operator_write(*command, before, lock);
        });
      },
      Write::update, Fails::unknown);
}

std::int64_t SimStore::set_fence(const LockSelector& which, std::int64_t fence) {
  const auto selector = sent(which);
  const auto filter = make_doc([&](bson_t* out) { mongolock::store::append_selector(out, selector); });
  const auto update = make_doc([&](bson_t* out) { mongolock::store::fence_update(fence, out); });
  return call<std::int64_t>(
      "update (fence)",
      [this, selector, filter, update, fence] {
        return update_lock(m_world.server(), "set_fence", filter, update, selects(selector),
                           [&](LockRecord& lock) { lock.fence = fence; });
      },
      Write::update, Fails::unknown);
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
  return call<std::int64_t>(
      "next fence", [this, n] { return m_world.server().next_fence(n); }, Write::read);
}

std::optional<LockRecord> SimStore::find(std::string_view program) {
  const std::string p(program);
  return call<std::optional<LockRecord>>(
      "find",
      [this, p, command = command()] {
        auto found = m_world.server().find(p);
        if (found && command) m_world.operator_read(*command, *found);
        return found;
      },
      Write::read);
}

std::vector<LockRecord> SimStore::list(std::optional<std::string_view> name) {
  const std::optional<std::string> n = name ? std::optional<std::string>(std::string(*name)) : std::nullopt;
  return call<std::vector<LockRecord>>(
      "find (list)",
      [this, n] { return m_world.server().list(n ? std::optional<std::string_view>(*n) : std::nullopt); }, Write::read);
}

// The queue and the events, as server operations in flight like the rest.
std::int64_t SimStore::highest_ticket() {
  return call<std::int64_t>(
      "find (highest ticket)", [this] { return m_world.server().highest_ticket(); }, Write::read);
}

bool SimStore::insert_ticket(mongolock::TicketRecord& ticket) {
  auto copy = ticket;
  {
    const Doc doc; // MongoStore's document, read back as MongoStore reads it (the server assigns the _id here)
    mongolock::store::to_bson(copy, doc.get());
    copy = mongolock::store::ticket_from_bson(doc.get());
  }
  auto id = std::make_shared<std::string>();
  const bool inserted = call<bool>(
      "insert (ticket)",
      [this, copy, id]() mutable {
        const bool ok = m_world.server().insert_ticket(copy);
        *id = copy.id;
        m_world.note(fmt::format("  server: ticket {} seq {} of c{}: {}", copy.name, copy.seq, m_client.id(),
                                 ok ? "inserted " + copy.id : std::string("duplicate key")));
        return ok;
      },
      Write::read, Fails::unknown);
  ticket.id = *id;
  // A second ticket of a name in one wait: the first lapsed or was lost (WaitQueue::keep_alive() rejoins); not
  // after a duplicate key in this step: the join takes the next seq for every name (schedule 246 of --multi: a
  // waiter of 'b' and 'c' whose 'c' seq 1 another waiter had just taken inserted 'b' again with seq 2).
  if (!inserted) m_client.m_join_collided = true;
  if (inserted && !m_client.m_joined.insert(copy.name).second && !m_client.m_join_collided) {
    m_world.ticket_rejoined(m_client, copy.name);
  }
  return inserted;
}

std::int64_t SimStore::renew_ticket(std::string_view id, ServerTime now, ServerTime expires_at) {
  // The planted bug: the renewal's filter gets the new expiry where the time now belongs (it never matches).
  if (m_world.config().plant == Plant::ticket_filter) now = expires_at;
  const auto filter = make_doc([&](bson_t* out) { mongolock::store::ticket_renew_filter(id, now, out); });
  const auto update = make_doc([&](bson_t* out) { mongolock::store::ticket_renew_update(expires_at, out); });
  const Contract<TicketRecord> contract = [i = std::string(id), now](const TicketRecord& t) {
    return t.id == i && t.expires_at > now;
  };
  return call<std::int64_t>(
      "update (ticket)",
      [this, filter, update, contract, expires_at] {
        return m_world.server().update_ticket_where(
            [&](const TicketRecord& t) { return checked_match("renew_ticket", filter, t, contract); },
            [&](TicketRecord& t) {
              auto expected = t;
              expected.expires_at = expires_at;
              apply_to_ticket(update, t);
              check_written("renew_ticket", update, t, expected);
            });
      },
      Write::update);
}

std::int64_t SimStore::remove_ticket(std::string_view id, std::optional<ServerTime> expired_at_or_before) {
  const auto filter =
      make_doc([&](bson_t* out) { mongolock::store::ticket_remove_filter(id, expired_at_or_before, out); });
  const Contract<TicketRecord> contract = [i = std::string(id), expired_at_or_before](const TicketRecord& t) {
    return t.id == i && (!expired_at_or_before || t.expires_at <= *expired_at_or_before);
  };
  return call<std::int64_t>(
      "delete (ticket)",
      [this, filter, contract] {
        return m_world.server().remove_ticket_where(
            [&](const TicketRecord& t) { return checked_match("remove_ticket", filter, t, contract); });
      },
      Write::update);
}

std::vector<mongolock::TicketRecord> SimStore::tickets(const std::vector<std::string>& names) {
  const auto filter = make_doc([&](bson_t* out) { mongolock::store::tickets_filter(names, out); });
  return call<std::vector<mongolock::TicketRecord>>(
      "find (tickets)",
      [this, filter, names] {
        auto all = m_world.server().tickets({}); // in line order, as MongoStore's sort
        const Contract<TicketRecord> contract = [&](const TicketRecord& t) {
          return names.empty() || std::find(names.begin(), names.end(), t.name) != names.end();
        };
        std::erase_if(all, [&](const TicketRecord& t) { return !checked_match("tickets", filter, t, contract); });
        return all;
      },
      Write::read);
}

void SimStore::append_event(std::string_view name, std::string_view ticket) {
  const std::string n(name);
  const std::string t(ticket);
  // A waiting replacing run's announcement refused (Config::p_announce_lost): Waiter::announce_replace() goes on.
  // (Not a waiter's back in its old place after an outage, whose loss no release can make good: by design.)
  if (t == mongolock::k_replace_event && m_client.replacing_waiter() && m_world.announcement_lost()) {
    m_world.note(fmt::format("  server: event {} '{}' by c{} refused (announcement lost)", n, t, m_client.id()));
    throw Error(mongolock::k_exit_unavailable, "insert (event): refused", false);
  }
  (void)call<bool>(
      "insert (event)",
      [this, n, t] {
        m_world.server().append_event(n, t);
        if (t == mongolock::k_replace_event) m_world.replace_announced(n);
        m_world.note(fmt::format("  server: event {} '{}' by c{}", n, t, m_client.id()));
        m_world.event_appended();
        return true;
      },
      Write::read);
}

void SimStore::insert_runs(std::vector<mongolock::RunRecord>& records) {
  auto ids = std::make_shared<std::vector<std::string>>();
  (void)call<bool>(
      "insert (runs)",
      [this, copy = records, ids]() mutable {
        m_world.server().insert_runs(copy);
        for (const auto& r : copy) {
          ids->push_back(r.id);
          m_world.note(fmt::format("  server: run of {} by c{}: {}", r.name, m_client.id(), r.outcome));
        }
        return true;
      },
      Write::update, Fails::unknown);
  for (std::size_t i = 0; i < records.size() && i < ids->size(); ++i)
    records[i].id = (*ids)[i];
}

std::vector<mongolock::RunRecord> SimStore::runs(std::optional<std::string_view> name, std::optional<ServerTime> since,
                                                 std::int64_t limit) {
  const std::optional<std::string> n = name ? std::optional<std::string>(std::string(*name)) : std::nullopt;
  return call<std::vector<mongolock::RunRecord>>(
      "find (runs)",
      [this, n, since, limit] {
        return m_world.server().runs(n ? std::optional<std::string_view>(*n) : std::nullopt, since, limit);
      },
      Write::read);
}

// A tailable awaitData cursor on virtual time: a wait returns the next event of the names as soon as the
// server has it, or nothing after `await` (earlier inside another client's call, whose reply it must not
// hold up). A killed or stopped client's wait ends as its calls do.
class SimFeed final : public mongolock::EventFeed {
public:
  SimFeed(World& world, Client& client, std::unique_ptr<mongolock::EventFeed> server_side, Millis await)
      : m_world(world), m_client(client), m_feed(std::move(server_side)), m_await(await) {}

  std::optional<mongolock::WakeEvent> wait(const std::vector<std::string>& names) override {
    if (m_client.dead()) throw Killed{};
    if (m_world.outage()) throw Error(mongolock::k_exit_unavailable, "getMore: server unreachable", true);
    std::optional<mongolock::WakeEvent> event = m_feed->wait(names);
    if (event) return event;
    const auto until = m_world.now() + m_await;
    if (m_world.call_limit() < until) {
      // Inside another client's call: waiting here would hold its reply. The getMore is parked instead:
      // the client's next step comes with the next event appended, or at the end of the await.
      m_client.park(until);
      return std::nullopt;
    }
    const Busy busy(m_client.m_busy);
    m_client.m_wait_end = until;
    m_world.run_until(until, [&] {
      if (m_client.dead() || m_world.outage()) return true;
      event = m_feed->wait(names);
      return event.has_value();
    });
    while (m_world.now() < m_client.paused_until())
      m_world.run_until(m_client.paused_until());
    if (m_world.now() > std::max(until, m_client.paused_until())) m_client.overran(); // as in wait_until()
    if (m_client.dead()) throw Killed{};
    if (!event && m_world.outage()) throw Error(mongolock::k_exit_unavailable, "getMore: server unreachable", true);
    return event;
  }

private:
  World& m_world;
  Client& m_client;
  std::unique_ptr<mongolock::EventFeed> m_feed;
  Millis m_await;
};

std::unique_ptr<mongolock::EventFeed> SimStore::follow_events(Millis await) {
  auto feed = std::make_shared<std::unique_ptr<mongolock::EventFeed>>();
  (void)call<bool>(
      "find (tailable)",
      [this, feed, await] {
        *feed = m_world.server().follow_events(await);
        return true;
      },
      Write::read);
  return std::make_unique<SimFeed>(m_world, m_client, std::move(*feed), await);
}

} // namespace sim
