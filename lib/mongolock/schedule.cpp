#include <mongolock/schedule.hpp>

#include <cstdint>
#include <string>

namespace mongolock {

namespace {

// FNV-1a, 64 bits (Fowler, Noll, Vo): stable across versions and platforms, unlike std::hash.
void fnv1a(std::uint64_t& hash, std::string_view bytes) {
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
}

} // namespace

Millis splay_offset(std::string_view host, const std::vector<std::string>& names, Millis splay) {
  if (splay <= Millis(0)) return Millis(0);
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  fnv1a(hash, host);
  for (const auto& name : names) {
    fnv1a(hash, std::string_view("\0", 1));
    fnv1a(hash, name);
  }
  // A final mix (splitmix64's), so that hosts whose names differ only at the end spread too.
  hash ^= hash >> 30;
  hash *= 0xbf58476d1ce4e5b9ULL;
  hash ^= hash >> 27;
  hash *= 0x94d049bb133111ebULL;
  hash ^= hash >> 31;
  return Millis(static_cast<Millis::rep>(hash % static_cast<std::uint64_t>(splay.count())));
}

} // namespace mongolock
