#pragma once
// The end of a run: the summary printed for the user and the JSON report
// (--report FILE, NEURON_PARALLEL_COMPILE_DUMP_RESULTS) with the original
// tool's fields (compilation_summary, compilation_report, start_time,
// compilation_time) and ours (per-graph peak memory, exit, log path, key).

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <npc/util/result.hpp>

#include <npc/launcher/pool.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

struct RunFacts {
  std::string start_time;        // ISO 8601, UTC
  double wall_seconds = 0;       // the whole run
  double compile_wall_seconds = 0; // the compile phase
  int parallel = 0;              // compiles at once, as started
  std::string compiler_version;
  std::string trial_status;      // "" when no trial ran or it succeeded
  std::vector<std::string> refused;
};

struct Counts {
  std::size_t found = 0, cached = 0, compiled = 0, compiled_elsewhere = 0, failed = 0, retried = 0;
  double compile_seconds = 0; // summed over our attempts
};

[[nodiscard]] Counts count(const Pool& pool);
// Sum of compile times / (parallel × compile phase wall time); 0 if nothing ran.
[[nodiscard]] double parallel_efficiency(const Counts& counts, const RunFacts& facts);

// The JSON report, written to `path` (atomically) one graph at a time: with
// 10,000 graphs a document built in memory first would be tens of megabytes.
// The text is what nlohmann::json::dump(2) gives for the whole document.
[[nodiscard]] Status write_report(const Pool& pool, const RunFacts& facts, const fs::path& path);
// Lines for the user: totals, then each failure with its log's last lines.
[[nodiscard]] std::vector<std::string> summary_lines(const Pool& pool, const RunFacts& facts);

// NEURON_PARALLEL_COMPILE_DUMP_RESULTS: a path, or a true value for
// neuron_parallel_compile_results.json in `workdir`.
[[nodiscard]] std::optional<fs::path> dump_results_path(const fs::path& workdir);

} // namespace npc::launcher
