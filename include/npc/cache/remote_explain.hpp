#pragma once
// `neuron_cache explain` (explain.hpp) on a remote cache (s3://bucket/prefix,
// store.hpp): the remote's listing gives each entry's graph
// size, so only the entries whose graph has the size of the one explained
// are downloaded (graph and flags, into a scratch folder) and compared as a
// local cache's would be. One listing, plus two GETs per entry of the same
// size: a few requests, whatever the size of the cache.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <npc/cache/explain.hpp>
#include <npc/cache/store.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

// A graph of the remote, downloaded.
struct RemoteGraph {
  fs::path file;   // the download
  std::string url; // the graph as users name it: s3://bucket/prefix/neuronxcc-V/MODULE_.../model.hlo_module.pb
};

// The graph TARGET names in the remote, downloaded into `scratch`: an entry
// key (neuronxcc-<v>/MODULE_<g>+<f>), or the URL of an entry or of its
// graph. nullopt when TARGET names none of these or the remote has no such
// graph; throws EnvironmentError when the remote cannot be read.
[[nodiscard]] std::optional<RemoteGraph> remote_target_graph(const Cache& remote, std::string_view target,
                                                             const fs::path& scratch);

// As explain_graph over the remote's entries; each match's dir is its URL.
// Throws EnvironmentError when the remote cannot be read.
[[nodiscard]] Result<Explanation> explain_remote_graph(const Cache& remote, const fs::path& graph,
                                                       const CurrentSettings& current, const fs::path& scratch);

} // namespace npc::cache
