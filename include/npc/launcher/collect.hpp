#pragma once
// Collecting the graphs a trial run dumped. They come from the cache-path
// log, from "Extracting graphs (...)" lines in the trial's output, and (for
// --command compile) from a scan of pending entries; merged, de-duplicated,
// and each checked: a path must name a graph inside the cache root, in an
// entry of the compiler version we compile with. Anything else is refused and
// reported, never compiled or deleted.

#include <filesystem>
#include <string>
#include <unordered_set>
#include <vector>

namespace npc::launcher {

namespace fs = std::filesystem;

class Collector {
public:
  Collector(const fs::path& cache_root, std::string compiler_version);

  // A graph path (…/neuronxcc-<v>/MODULE_<g>+<f>/model.hlo_module.pb).
  void add_graph_path(const std::string& path, const std::string& source);
  void add_entry_dir(const fs::path& entry_dir);

  [[nodiscard]] const std::vector<fs::path>& entries() const { return entries_; }
  // Hands the entries over and forgets them: with 10,000 graphs, a second
  // copy of every path is megabytes.
  [[nodiscard]] std::vector<fs::path> take_entries();
  [[nodiscard]] const std::vector<std::string>& refused() const { return refused_; }

private:
  fs::path root_;
  std::string version_;
  std::vector<fs::path> entries_;
  std::unordered_set<std::string> seen_; // strings: a path object is several times larger
  std::vector<std::string> refused_;
};

// The lines of a cache-path log; empty when it does not exist.
[[nodiscard]] std::vector<std::string> read_path_log(const fs::path& path);

} // namespace npc::launcher
