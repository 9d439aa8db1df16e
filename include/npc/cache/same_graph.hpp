#pragma once
// Finding the entries that hold a given graph, byte for byte. A graph key
// cannot tell: the framework's graph hash is not ours (torch-xla hashes its
// own IR), so the same graph sits under different names. Sizes are compared
// first, from the listing; only entries of the same size are hashed, each at
// most once.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <npc/cache/entry.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

class SameGraphIndex {
public:
  // Entries without a graph are left out.
  explicit SameGraphIndex(std::vector<EntryInfo> entries);

  // The entries whose model.hlo_module.pb has exactly the bytes of `graph`,
  // in key order; nullopt when `graph` cannot be read. An entry whose graph
  // cannot be read now is no match.
  [[nodiscard]] std::optional<std::vector<EntryInfo>> find(const fs::path& graph);
  // The same for a graph already hashed.
  [[nodiscard]] std::vector<EntryInfo> find(std::uint64_t size, const std::string& sha256);

private:
  [[nodiscard]] const std::string& sha256_of(const EntryInfo& entry);

  std::multimap<std::uint64_t, EntryInfo> by_size_;
  std::map<fs::path, std::string> sha256_; // "" for a graph that cannot be read
};

} // namespace npc::cache
