#pragma once
// Where the launcher's graphs come from, as one face for the run's phases
// (run.cpp): the cache directory itself, or a cache named by URL (S3)
// through its local mirror (shared_graphs.hpp), where each graph is brought
// before it is collected. The phases never ask which: they hand this the
// names the trial gave, ask it for the pending graphs, which graphs another
// host holds, and how to look at one.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <npc/cache/store.hpp>
#include <npc/cache/tiers.hpp>
#include <npc/launcher/collect.hpp>
#include <npc/launcher/pool_runner.hpp>
#include <npc/cluster/shared_graphs.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

// A graph as the trial named it, and where it said so ("the trial's output").
struct NamedGraph {
  std::string text;
  std::string source;
};

class GraphSource {
public:
  // `tiers`: the launcher's cache (cache/tiers.hpp). A cache named by URL
  // is opened and tried here, with one request (Storage::probe):
  // missing or refused credentials, a bucket that does not exist and an
  // endpoint that does not answer are found before the training command
  // runs. Throws EnvironmentError, saying which, when it cannot be used.
  GraphSource(const cache::Tiers& tiers, const std::string& compiler_version);

  // Whether a line of the cache-path log names a graph to bring (a URL, for
  // a cache named by one) rather than a root for the collector.
  [[nodiscard]] bool brings(const std::string& line) const;
  // Each named graph into `collector`, in order: a path as it is, a URL
  // brought first (all at once) or refused by name.
  void collect(Collector& collector, const std::vector<NamedGraph>& named);
  // --command compile: the pending graphs of the shared cache, as entries
  // of the directory (which the caller then lists); a graph only pending
  // there is brought by its compile (graph_bytes_later).
  void collect_shared_pending(Collector& collector, bool with_failed);
  // The graph size of an entry that collect_shared_pending left in the
  // shared cache, its compile to bring it; nothing for any other entry.
  [[nodiscard]] std::optional<std::uint64_t> graph_bytes_later(const fs::path& entry_dir) const;
  // What was downloaded and uploaded while collecting, logged.
  void log_transfers() const;

  // Who holds the pending graph at `entry_dir` elsewhere, in force, as it was
  // brought; nothing for any other graph.
  [[nodiscard]] std::optional<std::string> held_elsewhere(const fs::path& entry_dir) const;
  // The pool's look at such a graph, or nullptr when no graph can be held
  // elsewhere in a way the directory does not show. `download`: whether a
  // result another host compiled comes into the directory when found.
  [[nodiscard]] std::shared_ptr<cluster::HeldEntryLook> held_look(bool retry_failed, cache::DownloadResult download) const;
  // Whether the cache is named by URL (S3): every host that uses it sees it.
  [[nodiscard]] bool named_by_url() const { return tiers_.shared(); }
  // A connection of its own to the storage every host of the cache sees
  // (the shared tier, else the directory), for what the launchers of a
  // cluster leave for each other there.
  [[nodiscard]] std::shared_ptr<storage::Storage> open_common_storage() const;

private:
  const cache::Tiers& tiers_;
  std::optional<cluster::SharedGraphs> shared_;
};

} // namespace npc::launcher
