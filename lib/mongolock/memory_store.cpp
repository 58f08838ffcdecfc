#include <mongolock/error.hpp>
#include <mongolock/memory_store.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace mongolock {

namespace {

// An EventFeed over the store's event list: reads what was appended since it was made (from the newest
// on, as MongoStore's cursor does: it consumes the older of the two newest as its first batch), never
// waits. Throws Error (69) once the store broke its feeds (MemoryStore::break_feeds()).
class MemoryFeed final : public EventFeed {
public:
  MemoryFeed(const std::vector<WakeEvent>& events, std::size_t from, const int& generation)
      : m_events(events), m_next(from), m_generation(generation), m_made_in(generation) {}
  std::optional<WakeEvent> wait(const std::vector<std::string>& names) override {
    if (m_generation != m_made_in) throw unavailable_error("the in-memory store closed the tailable cursor");
    while (m_next < m_events.size()) {
      const auto& event = m_events[m_next++];
      if (std::find(names.begin(), names.end(), event.name) != names.end()) return event;
    }
    return std::nullopt;
  }

private:
  const std::vector<WakeEvent>& m_events;
  std::size_t m_next;
  const int& m_generation;
  int m_made_in;
};

ServerTime server_now(Millis skew) {
  return std::chrono::time_point_cast<Millis>(std::chrono::system_clock::now()) + skew;
}

} // namespace

bool selects(const LockSelector& which, const LockRecord& lock) {
  return lock.program == which.program && (!which.id || lock.id == *which.id) &&
         (!which.token || lock.token == *which.token) && (!which.process || lock.process == *which.process) &&
         (!which.place || place_matches(lock, *which.place)) &&
         (!which.expires_after || lock.expires_at > *which.expires_after) &&
         (!which.hold_ends_by || lock.hold_until <= *which.hold_ends_by) &&
         (!which.expired_by || lock.expires_at <= *which.expired_by) &&
         (!which.renewed_before || lock.renewed_at < *which.renewed_before) &&
         (!which.run_ttl_at_most || lock.run_ttl <= *which.run_ttl_at_most) &&
         (!which.not_released || !lock.released_at);
}

MemoryStore::MemoryStore(WriteSemantics semantics, Millis skew)
    : m_semantics(semantics), m_clock(server_now(skew), Millis(0), LeaseClock::now()) {}

MemoryStore::MemoryStore(WriteSemantics semantics, const ServerClock& clock) : m_semantics(semantics), m_clock(clock) {}

std::string MemoryStore::new_id() { return fmt::format("{:024x}", m_next_id++); }

void MemoryStore::run_between() {
  if (!between) return;
  const auto hook = std::move(between);
  between = nullptr;
  hook();
}

bool MemoryStore::insert(LockRecord& lock) {
  if (m_locks.count(lock.program) != 0) return false; // E11000 on program_1
  if (lock.id.empty()) lock.id = new_id();
  m_locks.emplace(lock.program, lock);
  m_writes.push_back({"insert", lock.program, ""});
  return true;
}

std::int64_t MemoryStore::update(const LockSelector& which, const std::string& fields,
                                 const std::function<void(LockRecord&)>& change) {
  return update_where([&](const LockRecord& lock) { return selects(which, lock); }, fields, change);
}

std::int64_t MemoryStore::update_where(const LockMatch& match, const std::string& fields, const LockChange& change) {
  const auto it = std::find_if(m_locks.begin(), m_locks.end(), [&](const auto& entry) { return match(entry.second); });
  if (it == m_locks.end()) return 0;
  m_writes.push_back({"update", it->first, fields});
  if (m_semantics == WriteSemantics::mongodb) {
    change(it->second);
    run_between();
    return 1;
  }
  // FerretDB v1: read, (others write), change the copy, write the whole copy back by _id.
  auto copy = it->second;
  run_between();
  change(copy);
  const auto now_there = m_locks.find(copy.program);
  if (now_there != m_locks.end() && now_there->second.id == copy.id) now_there->second = copy;
  return 1;
}

std::int64_t MemoryStore::remove(const LockSelector& which) { return remove_returning(which) ? 1 : 0; }

std::optional<LockRecord> MemoryStore::remove_returning(const LockSelector& which) {
  if (before_remove) {
    const auto hook = std::move(before_remove);
    before_remove = nullptr;
    hook();
  }
  return remove_where([&](const LockRecord& lock) { return selects(which, lock); });
}

std::optional<LockRecord> MemoryStore::remove_where(const LockMatch& match) {
  const auto it = std::find_if(m_locks.begin(), m_locks.end(), [&](const auto& entry) { return match(entry.second); });
  if (it == m_locks.end()) return std::nullopt;
  m_writes.push_back({"delete", it->first, ""});
  auto removed = it->second;
  if (m_semantics == WriteSemantics::mongodb) {
    m_locks.erase(it);
    run_between();
    return removed;
  }
  run_between(); // FerretDB v1: deleted by _id afterwards, without checking the filter again
  const auto now_there = m_locks.find(removed.program);
  if (now_there != m_locks.end() && now_there->second.id == removed.id) m_locks.erase(now_there);
  return removed;
}

std::int64_t MemoryStore::renew(const LockSelector& which, ServerTime expires_at, ServerTime renewed_at, Millis ttl,
                                bool mark_waiters) {
  if (before_renew) {
    const auto hook = std::move(before_renew);
    before_renew = nullptr;
    hook();
  }
  auto live = which; // never a released document (LockStore::renew), as MongoStore
  live.not_released = true;
  // MongoDB: never a document expired on the server's clock (the server-time condition, renew_filter());
  // FerretDB v1 lacks it (MongoStore sends the renewal without it there).
  const auto now = m_clock.now();
  return update_where([&](const LockRecord& lock) { return selects(live, lock) && unexpired_on_server(lock, now); },
                      mark_waiters ? "expires_at,renewed_at,ttl_ms,waiters" : "expires_at,renewed_at,ttl_ms",
                      [&](LockRecord& lock) {
                        lock.expires_at = expires_at;
                        lock.renewed_at = renewed_at;
                        lock.ttl = ttl;
                        lock.waiters = lock.waiters || mark_waiters;
                      });
}

bool MemoryStore::unexpired_on_server(const LockRecord& lock, ServerTime now) const {
  return m_semantics != WriteSemantics::mongodb || lock.expires_at > now;
}

std::int64_t MemoryStore::mark_released(const LockSelector& which, ServerTime released_at, ServerTime expires_at) {
  return update(which, "released_at,expires_at", [&](LockRecord& lock) {
    lock.released_at = released_at;
    lock.expires_at = expires_at;
  });
}

std::int64_t MemoryStore::set_fence(const LockSelector& which, std::int64_t fence) {
  return update(which, "fence", [&](LockRecord& lock) { lock.fence = fence; });
}

std::int64_t MemoryStore::mark_waiters(const LockSelector& which) {
  return update(which, "waiters", [](LockRecord& lock) { lock.waiters = true; });
}

std::int64_t MemoryStore::next_fence(std::string_view name) {
  auto& used = m_fences[std::string(name)];
  const auto next = used.empty() ? 1 : *std::max_element(used.begin(), used.end()) + 1;
  used.push_back(next);
  return next;
}

std::optional<LockRecord> MemoryStore::find(std::string_view program) {
  const auto it = m_locks.find(std::string(program));
  if (it == m_locks.end()) return std::nullopt;
  return it->second;
}

std::vector<LockRecord> MemoryStore::list(std::optional<std::string_view> name) {
  std::vector<LockRecord> out;
  for (const auto& [program, lock] : m_locks) {
    if (!name || lock.name == *name) out.push_back(lock);
  }
  return out;
}

std::int64_t MemoryStore::highest_ticket() {
  std::int64_t highest = 0;
  for (const auto& ticket : m_tickets)
    highest = std::max(highest, ticket.seq);
  return highest;
}

bool MemoryStore::insert_ticket(TicketRecord& ticket) {
  const auto taken = std::any_of(m_tickets.begin(), m_tickets.end(),
                                 [&](const TicketRecord& t) { return t.name == ticket.name && t.seq == ticket.seq; });
  if (taken) return false; // E11000 on name_1_seq_1
  ticket.id = new_id();
  m_tickets.push_back(ticket);
  return true;
}

std::int64_t MemoryStore::renew_ticket(std::string_view id, ServerTime now, ServerTime expires_at) {
  return update_ticket_where([&](const TicketRecord& t) { return t.id == id && t.expires_at > now; },
                             [&](TicketRecord& t) { t.expires_at = expires_at; });
}

std::int64_t MemoryStore::update_ticket_where(const TicketMatch& match, const TicketChange& change) {
  const auto it = std::find_if(m_tickets.begin(), m_tickets.end(), match);
  if (it == m_tickets.end()) return 0;
  if (m_semantics == WriteSemantics::mongodb) {
    change(*it);
    run_between();
    return 1;
  }
  // FerretDB v1: read, (others write), change the copy, write the whole copy back by _id.
  auto copy = *it;
  run_between();
  change(copy);
  const auto now_there =
      std::find_if(m_tickets.begin(), m_tickets.end(), [&](const TicketRecord& t) { return t.id == copy.id; });
  if (now_there != m_tickets.end()) *now_there = copy;
  return 1;
}

std::int64_t MemoryStore::remove_ticket(std::string_view id, std::optional<ServerTime> expired_at_or_before) {
  return remove_ticket_where([&](const TicketRecord& t) {
    return t.id == id && (!expired_at_or_before || t.expires_at <= *expired_at_or_before);
  });
}

std::int64_t MemoryStore::remove_ticket_where(const TicketMatch& match) {
  const auto it = std::find_if(m_tickets.begin(), m_tickets.end(), match);
  if (it == m_tickets.end()) return 0;
  if (m_semantics == WriteSemantics::mongodb) {
    m_tickets.erase(it);
    run_between();
    return 1;
  }
  const std::string found = it->id;
  run_between(); // FerretDB v1: deleted by _id afterwards, without checking the filter again
  const auto now_there =
      std::find_if(m_tickets.begin(), m_tickets.end(), [&](const TicketRecord& t) { return t.id == found; });
  if (now_there != m_tickets.end()) m_tickets.erase(now_there);
  return 1;
}

std::vector<TicketRecord> MemoryStore::tickets(const std::vector<std::string>& names) {
  m_tickets_limits = m_limits;
  std::vector<TicketRecord> out;
  for (const auto& ticket : m_tickets) {
    if (names.empty() || std::find(names.begin(), names.end(), ticket.name) != names.end()) out.push_back(ticket);
  }
  std::sort(out.begin(), out.end(), [](const TicketRecord& a, const TicketRecord& b) {
    return a.seq != b.seq ? a.seq < b.seq : a.name < b.name;
  });
  return out;
}

void MemoryStore::append_event(std::string_view name, std::string_view ticket) {
  m_events.push_back(WakeEvent{std::string(name), std::string(ticket)});
}

std::unique_ptr<EventFeed> MemoryStore::follow_events(Millis) {
  if (m_failing_follows > 0) {
    --m_failing_follows;
    throw unavailable_error("creation of the capped collection of wake-up events failed: database is locked");
  }
  return std::make_unique<MemoryFeed>(m_events, m_events.size() >= 2 ? m_events.size() - 1 : m_events.size(),
                                      m_feed_generation);
}

void MemoryStore::insert_runs(std::vector<RunRecord>& records) {
  for (auto& record : records) {
    record.id = new_id();
    m_runs.push_back(record);
  }
}

std::vector<RunRecord> MemoryStore::runs(std::optional<std::string_view> name, std::optional<ServerTime> since,
                                         std::int64_t limit) {
  std::vector<RunRecord> out;
  for (const auto& run : m_runs) {
    if ((!name || run.name == *name) && (!since || run.ended_at >= *since)) out.push_back(run);
  }
  std::sort(out.begin(), out.end(), [](const RunRecord& a, const RunRecord& b) {
    return a.ended_at != b.ended_at ? a.ended_at > b.ended_at : a.id > b.id;
  });
  if (static_cast<std::int64_t>(out.size()) > limit) out.resize(static_cast<std::size_t>(limit));
  return out;
}

std::int64_t MemoryStore::purge_runs(std::string_view name, std::int64_t keep, ServerTime ended_before,
                                     ServerTime now) {
  const auto before = m_runs.size();
  const auto kept = [&](const RunRecord& r) { return r.keep_until && *r.keep_until > now; };
  std::erase_if(m_runs, [&](const RunRecord& r) { return r.ended_at < ended_before && !kept(r); });
  auto mine = runs(name, std::nullopt, static_cast<std::int64_t>(m_runs.size()) + 1);
  if (static_cast<std::int64_t>(mine.size()) > keep) {
    for (auto it = mine.begin() + keep; it != mine.end(); ++it) {
      const auto id = it->id;
      std::erase_if(m_runs, [&](const RunRecord& r) { return r.id == id && !kept(r); });
    }
  }
  return static_cast<std::int64_t>(before - m_runs.size());
}

} // namespace mongolock
