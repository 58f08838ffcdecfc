#include <mongolock/schedule.hpp>

#include <doctest/doctest.h>

#include <array>
#include <set>
#include <string>

using namespace mongolock;

TEST_CASE("splay_offset: in [0, splay), the same for the same host and names") {
  const std::vector<std::string> names{"nightly-report"};
  const auto offset = splay_offset("web1", names, Millis(60'000));
  CHECK(offset >= Millis(0));
  CHECK(offset < Millis(60'000));
  CHECK(splay_offset("web1", names, Millis(60'000)) == offset);
  CHECK(splay_offset("web1", names, Millis(0)) == Millis(0));
  CHECK(splay_offset("web1", names, Millis(1)) == Millis(0));
}

TEST_CASE("splay_offset: hosts and names spread") {
  // 1000 hosts web0..web999 over a 10 s splay in 10 buckets of 1 s: every bucket gets 50 to 150 of them
  // (a uniform spread gives 100 each; a hash that ignored the host would put all in one bucket).
  std::array<int, 10> buckets{};
  for (int i = 0; i < 1000; ++i) {
    const auto offset = splay_offset("web" + std::to_string(i), {"backup"}, Millis(10'000));
    ++buckets[static_cast<std::size_t>(offset.count() / 1000)];
  }
  for (const int count : buckets) {
    CHECK(count >= 50);
    CHECK(count <= 150);
  }
  // The name counts, and so does where one name ends and the next begins.
  std::set<Millis::rep> seen;
  for (const auto& names : std::vector<std::vector<std::string>>{{"a"}, {"b"}, {"ab"}, {"a", "b"}, {"ab", ""}})
    seen.insert(splay_offset("web1", names, Millis(3'600'000)).count());
  CHECK(seen.size() == 5);
}
