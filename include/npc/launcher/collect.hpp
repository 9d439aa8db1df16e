#pragma once
// Collecting the graphs a trial run dumped. They come from "Extracting
// graphs (...)" lines in the trial's output, from the cache-path log, and
// (for --command compile) from a scan of pending entries; merged,
// de-duplicated, and each checked: a path must name a graph in an entry
// directory <root>/neuronxcc-<our version>/MODULE_<key>/ of a known cache
// root, with no symlink on the way. Anything else is refused and reported,
// never compiled or deleted.
//
// Known roots are the launcher's own and those the framework names: the
// cache-path log of current torch-neuronx holds the root URL it used (the
// training script often sets its own --cache_dir inside Python), older
// releases and our compile entry write graph paths there, whose roots count
// too. Each graph is compiled in the entry where the framework put it.

#include <filesystem>
#include <map>
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
  // A root the framework used; false (and refused) when it is not a local
  // absolute path.
  bool add_root(const std::string& url, const std::string& source);
  // One line of the cache-path log: a root URL, or a graph path (older
  // releases), whose root is learned before the graph is taken.
  void add_path_log_line(const std::string& line);
  // The roots known so far (canonical), the launcher's own first.
  [[nodiscard]] const std::vector<fs::path>& roots() const { return roots_; }
  void add_entry_dir(const fs::path& entry_dir);
  // Every pending entry of our compiler version under the known roots whose
  // graph was written at or after `since`: the graphs a trial extracted, for
  // when its extraction lines could not be read. Returns how many were new.
  std::size_t add_pending_written_since(fs::file_time_type since);

  [[nodiscard]] const std::vector<fs::path>& entries() const { return entries_; }
  // Hands the entries over and forgets them: with 10,000 graphs, a second
  // copy of every path is megabytes.
  [[nodiscard]] std::vector<fs::path> take_entries();
  [[nodiscard]] const std::vector<std::string>& refused() const { return refused_; }
  // Refuses a graph the trial named, saying why (for the checks made before
  // a graph reaches the collector: an S3 graph's, shared_graphs.hpp). The
  // first refusal of each source and reason is a warning; the rest are only
  // counted (a cache-path log full of garbage is one warning, not hundreds),
  // until say_repeated_refusals().
  void refuse(const std::string& text, const std::string& source, const std::string& why);
  // One warning per source and reason refused more than once: how many more.
  void say_repeated_refusals();

private:
  [[nodiscard]] bool known_root(const fs::path& root) const;

  std::vector<fs::path> roots_;
  std::string version_;
  std::vector<fs::path> entries_;
  std::unordered_set<std::string> seen_; // strings: a path object is several times larger
  std::vector<std::string> refused_;
  std::unordered_set<std::string> refused_texts_;
  std::map<std::pair<std::string, std::string>, std::size_t> refusals_; // (source, why) -> how many
};

// The lines of a cache-path log; empty when it does not exist. Current
// torch-neuronx writes one root URL, the whole file: when the whole file
// (less one final newline) names a directory, it is that one line, even if
// the path holds a newline. Otherwise (graph paths of older releases, our
// compile entry's) each line is one.
[[nodiscard]] std::vector<std::string> read_path_log(const fs::path& path);

} // namespace npc::launcher
