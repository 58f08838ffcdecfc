// The one unique-insert allocator (fencing tokens, queue tickets): a value taken by a concurrent
// allocation is skipped, and a store where every attempt loses gives up with exit 69.
#include <doctest/doctest.h>

#include <mongolock/unique_seq.hpp>

#include <set>

using namespace mongolock;

TEST_CASE("allocate_unique: the next value after those a concurrent allocation took") {
  std::set<std::int64_t> taken{1, 2}; // two concurrent allocations won 1 and 2 after our reads
  std::int64_t highest = 0;           // what our read sees: stale by the two above at first
  int reads = 0;
  const auto next = [&] {
    ++reads;
    return (reads == 1 ? highest : *taken.rbegin()) + 1;
  };
  const auto insert = [&](std::int64_t v) { return taken.insert(v).second; };
  CHECK(allocate_unique(next, insert, "allocate a token") == 3);
  CHECK(reads == 2);
  CHECK(taken.count(3) == 1);
}

TEST_CASE("allocate_unique: every attempt lost is an error (69) that names what") {
  int attempts = 0;
  const auto next = [&] { return std::int64_t{7}; };
  const auto insert = [&](std::int64_t) {
    ++attempts;
    return false;
  };
  try {
    (void)allocate_unique(next, insert, "join the queue of 'job'", 5);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.exit_code() == k_exit_unavailable);
    CHECK(std::string(e.what()) == "could not join the queue of 'job': 5 concurrent allocations won");
  }
  CHECK(attempts == 5);
}
