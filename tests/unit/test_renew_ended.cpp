// Locker::renew(const LockSelector&...)'s last check (red team 7, F2; Locker::refuse_if_ended): a renewal whose
// written expiry is not after the server's time when it is answered (ServerClock::latest) reached the server
// after the lease had ended. At the boundary, on a fixed TimeSource: an expiry equal to the server's latest time
// now is ended (a tie is late, as the heartbeat's renew deadline); one 1 ms after it is renewed. Written for the
// mutant locker.cpp `expires > now` -> `>=` (docs/testing.md, "Mutation testing", session 7).
#include <doctest/doctest.h>

#include <mongolock/clock.hpp>
#include <mongolock/error.hpp>
#include <mongolock/exit_codes.hpp>
#include <mongolock/locker.hpp>
#include <mongolock/memory_store.hpp>

#include <string>

using namespace mongolock;
using namespace std::chrono_literals;

namespace {

struct Fixed final : TimeSource {
  LocalTime t{std::chrono::seconds(1000)};
  LocalTime now() noexcept override { return t; }
};

// The lock "job" taken by "a:1" for 30 s, then `renew --token` for `ttl` whose call the server's clock crosses:
// while it is on its way the server's clock moves on by `ttl` + `shift`. Returns the renewal's expiry, or the
// error it threw.
struct Outcome {
  std::optional<ServerTime> expires;
  std::optional<ServerTime> written; // what the renewal wrote (the expiry it would report)
  std::optional<int> exit_code;
  std::string message;
};

Outcome renew_crossed(WriteSemantics semantics, Millis ttl, Millis shift) {
  Fixed fixed;
  struct Restore {
    TimeSource* previous;
    ~Restore() { set_time_source(previous); }
  } restore{set_time_source(&fixed)};
  const Log quiet(Verbosity::quiet);
  MemoryStore store(semantics);
  Locker holder(store, quiet);
  AcquireRequest request;
  request.name = "job";
  request.process = "a:1";
  request.ttl = 30s;
  request.takeover_grace = 2s;
  const auto lock = holder.try_acquire(request);
  REQUIRE(lock);
  fixed.t += 500ms; // the renewal's stamp is after the acquisition's
  const auto server = store.clock().at(fixed.t);
  store.set_clock(ServerClock(server, 0ms, fixed.t)); // an exact estimate: latest() = at() + 1 ms
  store.between = [&] { store.set_clock(ServerClock(server + ttl + shift, 0ms, fixed.t)); };
  Locker other(store, quiet);
  Outcome out;
  try {
    out.expires = other.renew(LockSelector{.program = "job", .token = lock->token}, ttl);
  } catch (const Error& e) {
    out.exit_code = e.exit_code();
    out.message = e.what();
  }
  out.written = store.documents().at("job").expires_at;
  return out;
}

} // namespace

TEST_CASE("renew --token answered when its expiry is exactly the server's latest time now: ended (a tie is late)") {
  for (const auto semantics : {WriteSemantics::mongodb, WriteSemantics::ferretdb_v1}) {
    CAPTURE(semantics == WriteSemantics::mongodb);
    // The expiry written is latest(send) + ttl = at(send) + 1 ms + ttl; the server's clock moved on by ttl, so its
    // latest() reads at(send) + ttl + 1 ms: the same millisecond.
    const auto tie = renew_crossed(semantics, 3s, 0ms);
    CHECK_FALSE(tie.expires);
    CHECK(tie.exit_code == k_exit_token_gone);
    CHECK(tie.message.find("after the lease had ended") != std::string::npos);
    // One millisecond earlier on the server: the expiry is still ahead of it, the renewal counts.
    const auto ahead = renew_crossed(semantics, 3s, -1ms);
    REQUIRE(ahead.expires);
    CHECK(ahead.expires == ahead.written);
    CHECK_FALSE(ahead.exit_code);
  }
}
