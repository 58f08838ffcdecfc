#include <mongolock/error.hpp>
#include <mongolock/orphan.hpp>

#include <doctest/doctest.h>

using namespace mongolock;

TEST_CASE("orphan request: round trip, any bytes in the fields") {
  OrphanRequest request;
  request.store.uri = "mongodb://u:p,:@h1:1,h2:2/?tls=true&x=1:2,3";
  request.store.database = "db";
  request.store.collection = "locks";
  request.store.connect_timeout = Millis(1234);
  request.store.operation_timeout = Millis(5678);
  request.holder_pid = 4242;
  request.holder_start = 987654;
  LockRecord a;
  a.program = "a,b:c";
  a.id = "0123456789abcdef01234567";
  a.token = "00112233445566778899aabbccddeeff";
  LockRecord b = a;
  b.program = std::string("x\0y", 3);
  request.locks = {a, b};
  const auto back = decode_orphan_request(encode_orphan_request(request));
  CHECK(back.store.uri == request.store.uri);
  CHECK(back.store.database == "db");
  CHECK(back.store.collection == "locks");
  CHECK(back.store.connect_timeout == Millis(1234));
  CHECK(back.store.operation_timeout == Millis(5678));
  CHECK(back.holder_pid == 4242);
  CHECK(back.holder_start == 987654);
  REQUIRE(back.locks.size() == 2);
  CHECK(back.locks[0].program == "a,b:c");
  CHECK(back.locks[1].program == std::string("x\0y", 3));
  CHECK(back.locks[1].id == a.id);
  CHECK(back.locks[1].token == a.token);
}

TEST_CASE("orphan request: the run's history records survive the round trip (issue 26 item 12)") {
  OrphanRequest request;
  request.store.uri = "mongodb://h/";
  request.holder_pid = 1;
  LockRecord lock;
  lock.program = "job";
  lock.id = "0123456789abcdef01234567";
  lock.token = "00112233445566778899aabbccddeeff";
  request.locks = {lock};
  RunRecord run;
  run.id = "89abcdef0123456789abcdef";
  run.name = "job";
  run.process = "vm:1";
  run.pid_ns = "pid:[4026532301]"; // history tells containers' "vm:1" apart by it (issue 26 item 7)
  run.host = "vm";
  run.user = "root";
  run.command = {"sh", "-c", std::string("a,b:\0c", 7), ""};
  run.started_at = ServerTime(Millis(1764000000123));
  run.waited = Millis(250);
  run.lock = lock.id;
  run.fence = 42;
  run.outcome = "lease-lost";
  run.exit_code = 76;
  RunRecord other = run;
  other.name = "other";
  other.command.clear();
  other.started_at.reset();
  other.fence.reset();
  request.runs = {run, other};
  const auto back = decode_orphan_request(encode_orphan_request(request));
  REQUIRE(back.locks.size() == 1);
  CHECK(back.locks[0].token == lock.token);
  REQUIRE(back.runs.size() == 2);
  CHECK(back.runs[0].id == run.id);
  CHECK(back.runs[0].process == "vm:1");
  CHECK(back.runs[0].pid_ns == "pid:[4026532301]");
  CHECK(back.runs[0].command == run.command);
  CHECK(back.runs[0].started_at == run.started_at);
  CHECK(back.runs[0].waited == Millis(250));
  CHECK(back.runs[0].lock == lock.id);
  CHECK(back.runs[0].fence == 42);
  CHECK(back.runs[0].outcome == "lease-lost");
  CHECK(back.runs[0].exit_code == 76);
  CHECK(back.runs[1].name == "other");
  CHECK(back.runs[1].command.empty());
  CHECK_FALSE(back.runs[1].started_at);
  CHECK_FALSE(back.runs[1].fence);
  // Trailing fields, or a count beyond the text, are refused.
  CHECK_THROWS_AS((void)decode_orphan_request(encode_orphan_request(request) + "1:x,"), Error);
  auto text = encode_orphan_request(OrphanRequest{});
  text = text.substr(0, text.size() - 4) + "5:99999,1:0,";
  CHECK_THROWS_AS((void)decode_orphan_request(text), Error);
}

TEST_CASE("orphan request: runs that would not fit in 64 KiB are cut, never the locks") {
  OrphanRequest request;
  request.store.uri = "mongodb://h/";
  RunRecord run;
  run.name = "job";
  run.command = {"prog", std::string(512, 'a')};
  request.runs.assign(200, run); // 200 names x 512-byte argument: over 64 KiB
  LockRecord lock;
  lock.program = "job";
  request.locks.assign(200, lock);
  auto text = encode_orphan_request(request);
  CHECK(text.size() <= 64 * 1024);
  auto back = decode_orphan_request(text);
  CHECK(back.locks.size() == 200);
  REQUIRE(back.runs.size() == 200);
  CHECK(back.runs[0].command == std::vector<std::string>{"prog"});
  request.runs.assign(2000, run); // even cut, too many: left out
  back = decode_orphan_request(encode_orphan_request(request));
  CHECK(back.locks.size() == 200);
  CHECK(back.runs.empty());
}

TEST_CASE("orphan request: malformed text is refused with 64") {
  for (const auto* text :
       {"", "5:abc,", "3:abc", "x:abc,", "3:abc,2:db,5:locks,2:10,2:10,1:-,1:1,", "99999999999999999999:a,"}) {
    CAPTURE(text);
    try {
      (void)decode_orphan_request(text);
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.exit_code() == 64);
    }
  }
}
