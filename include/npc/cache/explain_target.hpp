#pragma once
// `neuron_cache explain` (explain.hpp) on a cache in a directory or in any
// other storage (store.hpp): the graph a TARGET names, and the cache's
// entries to compare it with, as local files. A directory's are read in
// place. A storage's are downloaded into a scratch folder: its listing gives
// each entry's graph size, so only the entries whose graph has the size of
// the one explained are downloaded (graph, flags, and the record that says
// whose words the flags are). One listing, plus three GETs per entry of
// that size: a few requests, whatever the size of the cache.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <npc/cache/explain.hpp>
#include <npc/cache/store.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

// A graph to explain, as a local file.
struct TargetGraph {
  fs::path file;    // to read: the target, a file in the cache's directory, or a download
  std::string name; // as users know it: its path, or its URL in a storage
};

// The graph TARGET names: a graph file itself, an entry directory holding
// one, a key "neuronxcc-<v>/MODULE_<g>+<f>" of `cache` (in a storage, also
// the URL of the entry or of its graph), or a module name "MODULE_<g>+<f>"
// as `neuron_cache ls` prints it (the first compiler version holding it). A
// storage's graph is downloaded into `scratch`. nullopt when TARGET names
// none of these; throws EnvironmentError when the storage cannot be read.
[[nodiscard]] std::optional<TargetGraph> find_target_graph(const Cache& cache, std::string_view target,
                                                           const fs::path& scratch);

// explain_graph over `cache`'s entries; each match's dir is where users find
// the entry (its path, or its URL). Throws EnvironmentError when the storage
// cannot be read.
[[nodiscard]] Result<Explanation> explain_in_cache(const Cache& cache, const fs::path& graph,
                                                   const CurrentSettings& current, const fs::path& scratch);

} // namespace npc::cache
