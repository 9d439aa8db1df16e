#include <npc/cache/same_graph.hpp>

#include <algorithm>

#include <npc/cache/layout.hpp>
#include <npc/util/sha256.hpp>

namespace npc::cache {

SameGraphIndex::SameGraphIndex(std::vector<EntryInfo> entries) {
  for (auto& e : entries)
    if (e.has_graph) by_size_.emplace(e.graph_bytes, std::move(e));
}

const std::string& SameGraphIndex::sha256_of(const EntryInfo& entry) {
  auto [it, inserted] = sha256_.try_emplace(entry.dir);
  if (inserted) {
    auto digest = util::sha256_file(entry.dir / kGraphFile);
    // The listing's size is checked again: a graph replaced since is another graph.
    if (digest && digest->size == entry.graph_bytes) it->second = digest->sha256;
  }
  return it->second;
}

std::optional<std::vector<EntryInfo>> SameGraphIndex::find(const fs::path& graph) {
  std::error_code ec;
  auto size = fs::file_size(graph, ec);
  if (ec) return std::nullopt;
  // Hashing the graph is what costs: skipped when no entry has its size.
  if (!by_size_.contains(size)) return std::vector<EntryInfo>{};
  auto digest = util::sha256_file(graph);
  if (!digest) return std::nullopt;
  return find(digest->size, digest->sha256);
}

std::vector<EntryInfo> SameGraphIndex::find(std::uint64_t size, const std::string& sha256) {
  std::vector<EntryInfo> found;
  auto [first, last] = by_size_.equal_range(size);
  for (auto it = first; it != last; ++it)
    if (sha256_of(it->second) == sha256) found.push_back(it->second);
  std::sort(found.begin(), found.end(), [](const EntryInfo& a, const EntryInfo& b) { return a.key < b.key; });
  return found;
}

} // namespace npc::cache
