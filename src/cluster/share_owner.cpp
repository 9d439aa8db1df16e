#include <npc/cluster/share_owner.hpp>

#include <cstdint>

#include <npc/util/random.hpp>

namespace npc::cluster {

namespace {

// FNV-1a, then spread: the same 64 bits for the same bytes in every process
// and build, which std::hash does not promise.
std::uint64_t stable_hash(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return util::mix64(h);
}

} // namespace

std::size_t share_owner(std::string_view key, const std::vector<std::string>& members) {
  const std::uint64_t graph = stable_hash(key);
  std::size_t best = 0;
  std::uint64_t best_rank = 0;
  for (std::size_t m = 0; m < members.size(); ++m) {
    const std::uint64_t rank = util::mix64(graph ^ stable_hash(members[m]));
    if (m == 0 || rank > best_rank) {
      best = m;
      best_rank = rank;
    }
  }
  return best;
}

} // namespace npc::cluster
