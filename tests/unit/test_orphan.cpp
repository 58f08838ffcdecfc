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
