#pragma once
// The workload generator: graph sets with a heavy-tailed cost spread (many
// small graphs drawn from a log-normal distribution, a few large ones), in a
// trial order that puts the large ones last, as a trial run often does (the
// big graphs of a model are often reached last, e.g. the full training step
// after the warm-up and evaluation graphs). Every graph is an HLO-like text
// file that fixes its own stand-in cost with `// standin-cost-ms: N` and, for
// the memory scenario, its peak memory with `// standin-peak-bytes: N`.
// Generation is deterministic: the same spec always gives the same bytes.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace bench {

namespace fs = std::filesystem;

struct Graph {
  std::string name;            // file name
  std::uint64_t cost_ms = 0;   // the stand-in's cost for it
  std::uint64_t peak_bytes = 0; // 0: no peak line (the compile touches no memory)
  std::uint64_t bytes = 0;     // size of the file
  bool large = false;
};

struct WorkloadSpec {
  std::string name;
  std::uint64_t seed = 1;
  int small_count = 0;
  double small_median_ms = 100;
  double small_sigma = 0.6;       // of the log-normal
  std::uint64_t small_min_ms = 20;
  std::uint64_t small_max_ms = 1000;
  std::vector<std::uint64_t> large_ms;
  // Graph size = cost × bytes_per_ms (at least min_bytes): the size a cold
  // cache's cost model sees tracks the real cost, as it does for real graphs.
  std::uint64_t bytes_per_ms = 1000;
  std::uint64_t min_bytes = 2048;
  // Memory (0 = none): small graphs' peaks are log-uniform in [min, max];
  // large graphs get large_peaks in order.
  std::uint64_t small_peak_min = 0;
  std::uint64_t small_peak_max = 0;
  std::vector<std::uint64_t> large_peaks;
};

struct Workload {
  WorkloadSpec spec;
  std::vector<Graph> graphs; // in trial order: the large ones last

  [[nodiscard]] double sum_seconds() const;
  [[nodiscard]] double longest_seconds() const;
  [[nodiscard]] std::uint64_t largest_peak() const;
  [[nodiscard]] nlohmann::json to_json() const;
};

[[nodiscard]] Workload generate(const WorkloadSpec& spec);
[[nodiscard]] std::string graph_text(const Workload& workload, const Graph& graph, std::size_t index);
// Writes every graph into `dir` and the trial order (one file name a line)
// into dir/trial-order.txt.
void write_graphs(const Workload& workload, const fs::path& dir);

// The lower bound on the wall time of compiling the set with N at once:
// max(sum of costs / N, longest cost).
[[nodiscard]] double schedule_bound(const Workload& workload, int n);

// The lower bound with N at once and a memory budget: the largest of
//   sum / N, the longest cost,
//   sum(cost × peak) / budget                       (memory-time area),
//   for every threshold t among the peaks: the costs of the graphs whose peak
//     is at least t, summed and divided by min(c_t, N), where c_t is how many
//     of them can run together at most (the most of their smallest peaks that
//     fit in the budget).
// `costs` gives each graph's cost in seconds (same order as the graphs).
// `parts` receives every term.
[[nodiscard]] double memory_bound(const Workload& workload, const std::vector<double>& costs, int n,
                                  std::uint64_t budget, nlohmann::json* parts = nullptr);

} // namespace bench
