// The simulated world of one schedule: virtual time (LeaseClock's TimeSource), one in-memory server
// (MemoryStore, MongoDB's or FerretDB v1's write semantics), N clients running the real protocol code
// (Locker, LeaseBook) as step-driven state machines, server operations in flight, and chaos (kills,
// pauses, `break`, outages). One thread, one seeded random generator: a seed replays a schedule exactly.
#pragma once

#include <mongolock/clock.hpp>
#include <mongolock/lease.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/memory_store.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

namespace sim {

using mongolock::LocalTime;
using mongolock::Millis;
using mongolock::ServerTime;

// A planted bug the simulator must catch (tests/sim/CMakeLists.txt: one ctest case each).
enum class Plant {
  none,
  name_selector,  // releases and renewals select the lock by name only (no _id, no token)
  no_grace,       // takeovers ignore the takeover grace
  late_reply,     // the heartbeat counts a renewal reply that arrived after the renew deadline
  rollback,       // waiters set `waiters` on the holder's document (0.2.0): on FerretDB it can undo a renewal
  late_spawn,     // the job is started even when the first acquisition's renew deadline has passed
  no_hold,        // a release deletes the lock by _id + token within its --min-hold
  skip_queue,     // a waiter queues, then takes the lock whenever it is free, whoever waits ahead
  no_poll,        // waiters rely on wake-up events alone (a lock deleted without one is never noticed)
  partial,        // acquire_all is not all-or-none: it keeps the names taken before a busy one, and the job starts
  first_only,     // the heartbeat renews, and counts the lease by, the run's first lock only
  renew_by_name,  // renewals select the lock by name only (no _id, no token): a broken holder renews the next one's
  jump_queue,     // a --wait run (client 1's) takes a free lock without a ticket whoever waits (no queue check)
  long_expiry,    // an insert writes an expiry a TTL too far (a lease counted from the wrong moment)
  no_extend,      // the heartbeat's renewals do not move the guardian's deadline (Child::extend_deadline())
  hidden_proof,   // the same-host takeover treats hidden evidence as proof (hidepid, EPERM, an unseen cgroup)
  no_margin,      // the lease timing keeps no safety margin (renew deadline + kill grace = TTL)
  ignore_replace, // a run --replace holder never stops for a replacing run (Supervisor::check_replaced missing)
  plain_wake,  // a run stopped for a replacing run releases with its ordinary wake-up event (Locker::wake_as_replaced()
               // missing): a waiter that missed the replacing run's announcement takes the lock ahead of it
  late_record, // run --once-per records its success after the release (issue #19), not before it
  stale_renewal,  // 1 renewal in 5 is sent with a stale token: it matches nothing and the lease is lost for no reason
  ticket_filter,  // a queue ticket's renewal selects `expires_at > new expiry` (not > now): it never matches
  drift_margin,   // no safety margin (as no_margin) and no slow deaths: only a holder's slow clock, drifting within
                  // --grace, lets its job outlive its lease
  no_server_time, // renewals are sent without the server-time condition ($expr with $$NOW) on MongoDB too: a
                  // late copy of an abandoned renewal extends a lock that expired on the server (red team 4, F4)
  outstamp_any,   // an operator's `renew` retries above an outstamping renewal by holder alone (outstamped() without
                  // its "the filter names the acquisition" rule): a late `renew --process H` cuts H's next
                  // acquisition to its own TTL (red team 6, F1)
  pin_none,       // no failed renewal pins the lease (LockStore::writes_sent() never moves): a renewal of unknown
                  // outcome is treated as never sent (red team 6 F4's rule, pin only when nothing was sent, broken)
  unknown_transient, // a write of unknown outcome (MongoStore's fail_write()) is reported transient: a queued waiter
                     // pauses and tries again as if nothing had been written (red team 6, F5's rule broken)
};
[[nodiscard]] Plant parse_plant(const std::string& text); // throws std::invalid_argument
[[nodiscard]] const char* plant_name(Plant plant);

// xoshiro256** seeded by splitmix64: the same seed gives the same schedule on every platform.
class Rng {
public:
  explicit Rng(std::uint64_t seed);
  std::uint64_t next();
  int range(int lo, int hi); // uniform in [lo, hi]
  Millis millis(Millis lo, Millis hi);
  bool chance(double p);

private:
  std::uint64_t m_s[4];
};

// What one schedule looks like, drawn from its seed (World::World).
struct Config {
  mongolock::WriteSemantics semantics = mongolock::WriteSemantics::mongodb;
  int clients = 3;
  std::vector<std::string> names; // sorted
  std::map<std::string, int> slots;
  bool multi = false; // several names per run: 2-3 of `names` in 2 attempts of 3 (run A B -- CMD, acquire_all)
  bool fence = false;
  Millis min_hold{0}; // --min-hold of every acquisition (0: none)
  mongolock::LeaseTiming timing{};
  Millis grace{2000};
  Millis horizon{60'000}; // virtual time the schedule runs
  Millis max_rtt{20};     // a client's round trip; its clock estimate is off by at most half of it
  double p_fail = 0;      // a call fails before it reaches the server
  double p_lost = 0;      // a reply is lost after the write applied
  double p_delay = 0;     // a request is delayed (FerretDB: between its read and its write-back)
  double p_early = 0;     // a write's error comes back early while the request is on its way (it lands later)
  Millis chaos_every{0};  // mean time between chaos events (kill, pause, break, outage); 0: none
  double p_wait = 0;      // an attempt waits in the queue (run --wait: the real Waiter) instead of retrying
  bool push = true;       // waiters follow the wake-up events (else they poll: --no-push)
  Plant plant = Plant::none;
  // Same host (1 schedule in 4; --same-host: all): every client runs on one host (Host, host.hpp), a kill is
  // `pkill -9 mongolock` (mongolock and its guardian, not the host), and a lock whose holder is provably dead
  // is taken over at once by the real holder_verdict() on the host's evidence, which may be hidden.
  bool same_host = false;
  bool cgroups = false; // same host: every job runs in a cgroup of its own
  // A killed job takes up to this long to die after its SIGKILL (exit, reaping; 0: at once). The lease's
  // safety margin (lease_safety_margin()) is what covers it.
  Millis max_dying{0};
  // run --replace (1 schedule in 4 whose names have one slot each): an attempt is a replacing run this often.
  double p_replace = 0;
  // A replacing run's announcement (the k_replace_event after its join) refused by the server this often (every one,
  // in 1 replace schedule in 2), so that waiters behind miss it and only the replaced run's release tells them
  // (Locker::wake_as_replaced()).
  double p_announce_lost = 0;
  // A step of the server's clock (an NTP step; 1 schedule in 5): by `clock_step` (negative: back) at
  // `clock_step_at` after the start. Within --grace (and forward, within grace + the safety margin) every
  // invariant holds, each server-clock bound widened by the step; beyond it exclusion may break (the man
  // page's LIMITS): a violation then ends the schedule as expected, counted, not as a failure.
  Millis clock_step{0};
  Millis clock_step_at{0};
  [[nodiscard]] bool step_beyond_grace() const { return clock_step > grace; }
  // run --once-per (1 schedule in 4; all under Plant::late_record): every run is one, with this period (longer
  // than the horizon: every success counts). Jobs then fail (exit non-zero) this often: a failed run is run again.
  std::optional<Millis> once_per;
  double p_job_fails = 0;
  // Clock-rate drift (World::draw_drift; 1 schedule in 2): client i's LeaseClock runs at 1 + ppm[i - 1] / 10^6
  // of the world's (and the server's) rate (empty: every clock at rate 1). A client's estimate of the server's
  // clock is anchored on its own clock at its last read (every renewal), so it drifts from the truth by up to
  // max |ppm| x the horizon: drift_error. Within --grace (drift_error <= grace) every invariant holds, each
  // bound of a takeover's or an estimate's view of the server's clock widened by it (the holder's own lease is
  // covered by the safety margin, unwidened); beyond it a violation is the man page's limit (LIMITS), counted
  // as expected.
  std::vector<std::int64_t> ppm;
  Millis drift_error{0};
  // An operator's (or a script's) `mongolock renew`/`release` from outside the runs (1 schedule in 4; --operator
  // and Plant::outstamp_any: all): about this often, on a lock it reads on the server, by holder (--process), by
  // token or by _id, through the real Locker and a SimStore of its own (its requests delayed, duplicated, their
  // replies lost), from a generator of its own (World::draw_operator). 0: none.
  Millis operator_every{0};
  [[nodiscard]] bool drift_beyond_grace() const { return drift_error > grace; }
};

// One `mongolock renew`/`release` command of the operator (Client::operate()): what it names. A write of it
// (any copy, however late) may change only the acquisition it names by _id or token, or by holder a lock of that
// holder on the server then (World::operator_write()).
struct OperatorCommand {
  enum class Kind { renew, release } kind = Kind::renew;
  enum class By { holder, token, id } by = By::holder;
  std::string program;  // the lock (or slot) it acts on
  std::string named;    // the _id of the acquisition the operator read on the server before the command
  std::string selector; // the holder ("host:pid"), the token or the _id given
  LocalTime sent{};     // the command started (world time)
  Millis ttl{0};        // renew: the TTL it asks
};

// An invariant failed: unwinds the whole schedule (World::run catches it).
struct Violation : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The client was killed while in a call: unwinds its step (Client::step catches it). A std::exception, so
// that code that must not throw (WaitQueue::leave()) goes on; every later call of a dead client throws it
// again before it sends anything.
struct Killed : std::exception {
  [[nodiscard]] const char* what() const noexcept override { return "killed"; }
};

class Client;
class Host;

class World final {
public:
  // `edge`: only schedules at the edge of the accepted timings (draw_timing() in world.cpp); `multi`: only
  // schedules of several names per run.
  World(std::uint64_t seed, std::optional<mongolock::WriteSemantics> semantics, Plant plant, bool edge = false,
        bool multi = false, bool same_host = false, bool operators = false);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // Runs the schedule to its horizon. Returns "" when every invariant held, else the violation.
  std::string run();
  // A violation after a step of the server's clock beyond --grace fails the schedule too (--strict-steps: the
  // ctest that shows such steps do break exclusion, as the man page's LIMITS says).
  void strict_steps() { m_strict_steps = true; }
  // The same for clock-rate drift beyond --grace (--strict-drift: ctest sim.limits.drift).
  void strict_drift() { m_strict_drift = true; }

  // --- time and scheduling -----------------------------------------------------------------------
  // The world's time (virtual; the server's clock runs at its rate). The simulator's own times (wake-ups,
  // server operations, pauses, job ends) are on it; the real code's (LeaseClock::now(): deadlines, the
  // Waiter's pauses, the guardian's) are on the client's own clock (local_time(); Client::world_at()).
  [[nodiscard]] LocalTime now() const noexcept { return m_now; }
  // Client `id`'s LeaseClock at world time `t` (Config::ppm: rate 1 + ppm / 10^6, both k_start at the start;
  // rounded down to the nanosecond). LocalTime::max() stays max.
  [[nodiscard]] LocalTime local_time(int id, LocalTime t) const;
  // The earliest world time at which client `id`'s LeaseClock reads `local` or later (the inverse of
  // local_time(), rounded up: a wake-up converted by it finds the real code's deadline reached).
  [[nodiscard]] LocalTime world_time(int id, LocalTime local) const;
  // Whose clock LeaseClock::now() reads while a guard lives: client `id`'s (0: the world's, for server
  // operations, chaos and the invariants). run_until() sets it around every event; guards nest.
  class ClockOf {
  public:
    ClockOf(World& world, int id) : m_world(world), m_previous(world.m_context) { world.m_context = id; }
    ~ClockOf() { m_world.m_context = m_previous; }
    ClockOf(const ClockOf&) = delete;
    ClockOf& operator=(const ClockOf&) = delete;

  private:
    World& m_world;
    int m_previous;
  };
  // Plant::late_reply: the next LeaseClock::now() (the heartbeat's reading of when a renewal's reply arrived)
  // reads `t` (a time on the reading client's clock).
  void lie_once(LocalTime t) { m_lie = t; }
  // The server's own clock now (the truth the invariants use).
  [[nodiscard]] ServerTime server_now() const { return m_truth.at(m_now); }
  [[nodiscard]] ServerTime server_at(LocalTime t) const { return m_truth.at(t); }
  // Runs every due event (other clients' steps, server operations, chaos) until `until`, then sets the
  // time to `until`. Called from inside a client's call: that client (busy) takes no step meanwhile.
  // With `stop`: returns as soon as it is true after an event (a cursor's getMore that has an event).
  void run_until(LocalTime until, const std::function<bool()>& stop = {});
  // The earliest time a run_until() in progress must return at: a call waiting inside another client's
  // call must not hold that call's reply past it (a tailable cursor's await ends early then).
  [[nodiscard]] LocalTime call_limit() const;
  // A wake-up event was appended: clients whose getMore is parked step now.
  void event_appended();
  // A server-side operation applied at `at`, whoever waits for it (the client may have given up).
  void at(LocalTime when, std::function<void()> op);

  [[nodiscard]] Rng& rng() { return m_rng; }
  [[nodiscard]] const Config& config() const { return m_config; }
  [[nodiscard]] mongolock::MemoryStore& server() { return m_server; }
  [[nodiscard]] bool outage() const { return m_now < m_outage_until; }
  // The outage now is a failover: the server answers every call at once with an error of a primary stepping down
  // or being elected (NotWritablePrimary and the other codes of store::server_in_transition()), applying nothing,
  // instead of not answering at all.
  [[nodiscard]] bool election() const { return outage() && m_election; }
  // The shared host of a same-host schedule (Config::same_host); nullptr otherwise.
  [[nodiscard]] Host* host() { return m_host.get(); }
  [[nodiscard]] const Client& client(int id) const { return *m_clients.at(static_cast<std::size_t>(id - 1)); }
  // The schedule is over (the destructor kills every client: nothing is drawn or judged any more).
  [[nodiscard]] bool ended() const { return m_ended; }
  [[nodiscard]] LocalTime outage_end() const { return m_outage_until; }

  // --- what the invariants need --------------------------------------------------------------------
  void note(std::string line); // the trace (last ~50 lines, printed on a failure; all with keep_trace())
  void keep_trace() { m_keep_trace = true; }
  [[nodiscard]] std::string trace() const;
  // Called by a client that starts its job under `lock`: its fencing token (names with one slot) must be
  // higher than every token a job of the name started with before.
  void job_started(const mongolock::LockRecord& lock);
  // Client `client`'s attempt, begun at `started`, found every slot of `name` held (liveness check).
  void attempt_held(const Client& client, const std::string& name, LocalTime started);
  // A purge of `removed` (selected by expired_by) took place now.
  void purged(const mongolock::LockRecord& removed);
  // `lock`'s holder released it while its lease was valid, with `outcome` (--min-hold): a deletion must not
  // come before its hold_until (server clock); a lock kept for its hold must not be taken before it.
  void released(const mongolock::LockRecord& lock, const mongolock::ReleaseOutcome& outcome);
  // `lock` was acquired now: not within the minimum hold of a lock of its slot released before.
  void acquired(const mongolock::LockRecord& lock);
  // `lock`, taken from the queue (LockRecord::ticket), was inserted on the server just now: no ticket of
  // its name ahead of the taker's may be live, unless it lapsed once (expired on the server's clock: its
  // waiter was stopped or slow and joins again at the back), was used (a lock was taken with it: the
  // release's wake-up event names it) or holds a far waiter's long lease (skipped as dead after
  // WaitQueue::stale_after()).
  void queue_grant(const mongolock::LockRecord& lock);
  // A replacing run's announcement (WakeEvent k_replace_event) of `name` was appended on the server now.
  void replace_announced(const std::string& name) { m_replace_events[name] = server_now(); }
  // Whether the announcement sent now is refused (Config::p_announce_lost; its own generator, so that the other
  // draws stay as they were).
  [[nodiscard]] bool announcement_lost() {
    return m_config.p_announce_lost > 0 && m_announce_rng.chance(m_config.p_announce_lost);
  }
  // A run stopped for a replacing run (run --replace) sends the release of its lock of `name` now: its wake-up
  // event is a k_replace_event (Locker::wake_as_replaced()), so no waiter passes a replacing run that joined
  // before, announced or not (session 10's CI: the waiter, woken by the release, went first).
  void replaced_release(const std::string& name) { m_replaced_releases[name] = server_now(); }
  // `lock`, taken without a ticket by a --wait run whose wait began at `waiting_since` (it found nobody
  // waiting), was inserted just now: no ticket of its name that joined before then (on the server's clock,
  // less a round trip) may still be live, unless it lapsed once or was used, or holds a far waiter's lease.
  void ticketless_grant(const mongolock::LockRecord& lock, LocalTime waiting_since);
  [[nodiscard]] bool broken(const std::string& id) const { return m_broken.count(id) != 0; }
  // Broken (`break --force`) at or after `t`: its holder is exempt from the invariants until a renewal sent
  // after the break is confirmed (which must not happen: that renewal finds the lock gone).
  [[nodiscard]] bool broken_since(const std::string& id, LocalTime t) const {
    const auto it = m_broken.find(id);
    return it != m_broken.end() && it->second >= t;
  }
  // Same host: `contender`'s acquisition asks whether `lock`'s holder is provably dead (AcquireRequest::holder_dead,
  // `taking_over` as there): the real holder_verdict() on the host's evidence (HostProbe). A "dead" while its
  // mongolock, guardian, job or a part of the job still runs is a violation (raised at the next check: not
  // through the Locker's call).
  bool judge_holder(const Client& contender, const mongolock::LockRecord& lock, bool taking_over);
  // run --once-per: `client`'s run on `locks` had its job succeed and its `ok` records confirmed by the server
  // while the lease held. At most one such run per name and period unless a run failed: a violation when every
  // name of the run already had one (by another run), neither run's lock broken (`break --force`).
  void once_succeeded(const Client& client, const std::vector<mongolock::LockRecord>& locks);
  // --- liveness: nothing is lost for no reason -------------------------------------------------------
  // A fault touched every client (an outage, a step of the server's clock) until `until`.
  void global_fault(LocalTime until) { m_global_fault = std::max(m_global_fault, until); }
  // The latest a fault that touches `client` had an effect (its own calls' faults, pauses, starvation, or a
  // global fault).
  [[nodiscard]] LocalTime last_fault(const Client& client) const;
  // `client`, alive, lost its lease on `locks`, which counted from `base` (local time): a violation unless a
  // fault touched it since `base` or one of the locks was broken.
  void lease_lost(const Client& client, const std::vector<mongolock::LockRecord>& locks, LocalTime base,
                  const std::string& why);
  // `client`, waiting in the queue, joins the queue of `name` again (its ticket lapsed or was lost): a violation
  // unless a fault touched it within the longest ticket lease (far_ticket_lease) + answer limit + 1 s.
  void ticket_rejoined(const Client& client, const std::string& name);
  // `client`, queued (run --wait), gave up its wait with `left` of it to go on an error that a failover answered
  // (World::election()): a violation (man: a queued waiter waits on through a failover's errors; red team 9, F2).
  void waiter_gave_up_in_election(const Client& client, const std::string& error, Millis left);
  // A write of the operator's `command` applied to `before` (`after`: the document written; nullopt: deleted). A
  // violation when the command does not name it (by _id, token or holder). A release, or a renewal that shortens
  // the acquisition the operator named, is deliberate (as `break --force`): its holder is exempt until a renewal
  // sent after it is confirmed. A shortening of another acquisition (by holder: a later one of the same holder) is
  // not: the coverage invariants judge it (red team 6, F1). A renewal restarts an orphan's clock (its expiry
  // counts from the command).
  void operator_write(const OperatorCommand& command, const mongolock::LockRecord& before,
                      const std::optional<mongolock::LockRecord>& after);
  // A find of the operator's `command` read `lock` on the server (its reply may be lost). A release may delete
  // the acquisition the operator named or one its own find read (Locker::release by holder finds, then deletes
  // by _id: an acquisition that held the name when the command looked); deleting any other (by holder: a later
  // acquisition of the same holder, reached by a copy that landed late) is a violation (World::operator_write).
  void operator_read(const OperatorCommand& command, const mongolock::LockRecord& lock) {
    m_operator_reads.emplace(command.sent, command.named, lock.id);
  }
  void count(const char* what) { ++m_counts[what]; }
  [[nodiscard]] const std::map<std::string, long>& counts() const { return m_counts; }

private:
  static Config draw_config(Rng& rng, std::optional<mongolock::WriteSemantics> semantics, Plant plant, bool edge,
                            bool multi);
  // The additions of issue 28 (same host, slow deaths), from a generator of their own so that the schedules
  // drawn before them stay as they were.
  static void draw_more(std::uint64_t seed, Config& c, bool same_host);
  // Clock-rate drift (Config::ppm), from a generator of its own too.
  static void draw_drift(std::uint64_t seed, Config& c);
  // The operator (Config::operator_every), from a generator of its own too.
  static void draw_operator(std::uint64_t seed, Config& c, bool operators);
  // LeaseClock's time source: the current context's clock (ClockOf), or the lie of Plant::late_reply.
  class Clocks final : public mongolock::TimeSource {
  public:
    explicit Clocks(World& world) : m_world(world) {}
    [[nodiscard]] LocalTime now() noexcept override;

  private:
    World& m_world;
  };
  void check_escapes(std::map<std::string, int>& jobs);
  void check_replaced();
  void chaos();
  void check_invariants();
  void check_waiters();
  void check_orphans();
  void check_client(const Client& client, std::map<std::string, int>& jobs, std::map<std::string, int>& believers);
  void check_lock(const Client& client, const mongolock::LockRecord& lock, bool job, bool believes);
  [[nodiscard]] std::string fmt_time(LocalTime t) const;

  Rng m_rng;
  Rng m_announce_rng; // announcement_lost()
  Config m_config;
  LocalTime m_start;
  LocalTime m_now;
  std::optional<LocalTime> m_lie; // Plant::late_reply: what the next LeaseClock::now() reads
  Clocks m_clocks{*this};
  int m_context = 0;              // whose clock LeaseClock::now() reads (ClockOf): a client's id, 0 for the world's
  mongolock::ServerClock m_truth; // the server's own clock on virtual time
  mongolock::MemoryStore m_server;
  mongolock::TimeSource* m_previous_source = nullptr;
  std::unique_ptr<Host> m_host; // same host only
  std::vector<std::unique_ptr<Client>> m_clients;
  std::set<std::string> m_instant; // _id of locks taken over at once by a same-host takeover
  std::set<pid_t> m_expected;      // runs whose escaped part overlapped a holder that took its lock by expiry
  // Server-clock bounds widen by this much (slack()): the step of the server's clock (either way) plus the drift a
  // client's estimate can have gathered by now (at most --grace: beyond it, violations are LIMITS).
  [[nodiscard]] Millis slack() const;
  Millis m_step_slack{0}; // the step alone: the bounds of a holder's own lease (its margin covers the drift)
  bool m_stepped = false;
  bool m_strict_steps = false;
  bool m_strict_drift = false;
  void step_clock();
  std::string m_pending;                      // a violation found inside a call, raised at the next check
  std::map<int, LocalTime> m_replacing_since; // per replaceable holder: a newer replacing run has waited since
  bool m_ended = false;
  LocalTime m_global_fault{};
  // run --once-per: per name, the _id of the lock of each run that recorded a confirmed success, and when.
  std::map<std::string, std::vector<std::pair<std::string, LocalTime>>> m_successes; // name -> (_id, recorded at)
  struct Op {
    LocalTime when;
    std::uint64_t seq;
    std::function<void()> run;
  };
  std::vector<Op> m_ops;
  std::uint64_t m_op_seq = 0;
  LocalTime m_chaos_at = LocalTime::max();
  LocalTime m_outage_until{};
  bool m_election = false;                   // the latest outage is a failover's (election())
  std::map<std::string, LocalTime> m_broken; // _id of lock documents removed by `break`: when
  std::map<std::string, std::int64_t> m_last_fence;
  struct Hold {
    std::string id;
    ServerTime until;
  };
  std::map<std::string, Hold> m_holds; // per program: a lock released into its minimum hold
  std::set<std::string> m_lapsed;      // _id of queue tickets that were expired on the server's clock once,
                                       // that a lock was taken with (LockRecord::ticket: the waiter left), or
                                       // that kept a far lease unrenewed for renewal_overdue() (dead)
  struct TicketSeen {
    ServerTime expires_at; // the ticket's expiry when first seen with it
    ServerTime at;         // then (server clock)
  };
  std::map<std::string, TicketSeen> m_ticket_seen;    // per ticket _id
  std::vector<LocalTime> m_untils;                    // the run_until() calls in progress, outermost first
  std::map<std::string, LocalTime> m_free_since;      // per name: no lock document on the server since
  std::map<std::string, ServerTime> m_replace_events; // per name: the last replacing run's announcement (server clock)
  std::map<std::string, ServerTime>
      m_replaced_releases;                         // per name: the last replaced run's release, sent (server clock)
  std::map<std::string, LocalTime> m_orphan_since; // _id of lock documents no live client holds: since
  std::set<std::tuple<LocalTime, std::string, std::string>> m_operator_reads; // operator_read(): (sent, named, _id)
  std::deque<std::string> m_trace;
  std::map<std::string, long> m_counts;
  long m_steps = 0;
  bool m_keep_trace = false;
};

} // namespace sim
