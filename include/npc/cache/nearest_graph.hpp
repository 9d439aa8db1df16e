#pragma once
// For a graph the pre-compile's trial never produced (`neuron_cache misses`,
// not_in_trial): the trial's graph nearest it, and what differs between
// them in words a user acts on. "Nearest" weighs, in this order, how many
// parameters the entry computation takes, their element types and ranks,
// their dimensions, the results alike, then the instruction count: the
// usual causes (a smaller last batch, an evaluation step, another
// precision) each change one of these.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <npc/cache/graph_summary.hpp>
#include <npc/cache/key.hpp>
#include <npc/storage/storage.hpp>

namespace npc::cache {

// The most of a graph read to summarize it.
inline constexpr std::uint64_t kMaxSummarizedGraphBytes = 1ull << 30;

struct GraphComparison {
  // "parameter 0 is f32[3,512] here, f32[8,512] there", "61 instructions here, 57 there"
  std::vector<std::string> differences;
  // The likely cause, as a question: "a smaller last batch?"; empty when none fits.
  std::string hint;
};

// How far apart two graphs are (0: the same signature and size).
[[nodiscard]] double graph_distance(const GraphSummary& here, const GraphSummary& there);
// What differs between `here` and `there`, and the likely cause.
[[nodiscard]] GraphComparison compare_graphs(const GraphSummary& here, const GraphSummary& there);

// A verdict as one line: "nearest the trial's MODULE_...: parameter 0 is
// f32[3,512] here, f32[8,512] there: a smaller last batch?" (`whose`: "the
// trial's"); "its graph cannot be decoded: ..."; empty with no nearest.
[[nodiscard]] std::string describe_nearest(const std::optional<CacheKey>& trial_key, const GraphComparison& comparison,
                                           const std::string& undecodable, std::string_view whose = "the trial's");

// The trial's graphs of a pre-compile, read from a cache's storage the first
// time one is compared (each once), and the nearest of them to a graph.
class NearestTrialGraph {
public:
  NearestTrialGraph(const storage::Storage& storage, std::vector<CacheKey> trial_keys);

  struct Verdict {
    std::optional<CacheKey> trial_key; // the nearest; none when no trial graph can be read
    GraphComparison comparison;
    std::string undecodable;           // why this graph could not be read or decoded; empty when it was
  };
  [[nodiscard]] Verdict judge(const CacheKey& key);

private:
  [[nodiscard]] Result<GraphSummary> summarize(const CacheKey& key) const;
  void load_trial();

  const storage::Storage& storage_;
  std::vector<CacheKey> trial_keys_;
  bool loaded_ = false;
  std::vector<std::pair<CacheKey, GraphSummary>> trial_;
};

} // namespace npc::cache
