#pragma once
// The end of a run: the summary printed for the user; our JSON report
// (--report FILE) with the original tool's fields (compilation_summary,
// compilation_report, start_time, compilation_time) and ours (per-graph peak
// memory, exit, log path, key); and the original tool's own results files
// and summary lines (NEURON_PARALLEL_COMPILE_DUMP_RESULTS), byte for byte in
// its schema, for the scripts that read them.

#include <filesystem>
#include <optional>
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
  int interrupted_by = 0;        // the signal that stopped the run; 0: none
};

struct Counts {
  std::size_t found = 0, cached = 0, compiled = 0, compiled_elsewhere = 0, failed = 0, retried = 0,
              locked_elsewhere = 0, removed_elsewhere = 0;
  double compile_seconds = 0; // summed over our attempts
};

[[nodiscard]] Counts count(const Pool& pool);
// Sum of compile times / (parallel × compile phase wall time); 0 if nothing ran.
[[nodiscard]] double parallel_efficiency(const Counts& counts, const RunFacts& facts);

// The JSON report, written to `path` (atomically) one graph at a time: with
// 10,000 graphs a document built in memory first would be tens of megabytes.
// The text is what nlohmann::json::dump(2) gives for the whole document.
[[nodiscard]] Status write_report(const Pool& pool, const RunFacts& facts, const fs::path& path);
// The few slowest graphs this run compiled, each with its compile time (its
// attempts summed) and that time's share of the compile phase's wall time:
// one graph near 100% is the run's critical path, which more parallelism
// cannot shorten. Nothing when fewer than two graphs were compiled.
inline constexpr std::size_t kSlowestShown = 5;
[[nodiscard]] std::vector<std::string> slowest_lines(const Pool& pool, const RunFacts& facts);
// Lines for the user: totals, the slowest compiles, then each failure with
// its log's last lines.
[[nodiscard]] std::vector<std::string> summary_lines(const Pool& pool, const RunFacts& facts);

// DEPRECATED: the old reading of NEURON_PARALLEL_COMPILE_DUMP_RESULTS (a
// path, or a true value for neuron_parallel_compile_results.json in
// `workdir`, for write_report). Kept only until run.cpp moves to
// dump_results_requested() + write_original_results(); then remove it.
[[nodiscard]] std::optional<fs::path> dump_results_path(const fs::path& workdir);

// --- The original tool's results (NEURON_PARALLEL_COMPILE_DUMP_RESULTS) ---
// Each graph's status there: true when it is compiled (by us, already at the
// start, or by another process meanwhile), false when it failed. A graph
// still locked by another process at the end (ItemState::deferred) has no
// outcome yet: it is left out of the counts and of compilation_report.

// True when NEURON_PARALLEL_COMPILE_DUMP_RESULTS is set to a non-empty value
// (any, even "0" or "false"): the original tests the variable's Python
// truthiness, so an empty value asks for nothing.
[[nodiscard]] bool dump_results_requested();

struct OriginalResults {
  fs::path results; // <directory>/neuron_parallel_compile_results_<time>.json
  fs::path total;   // <directory>/total_neuron_parallel_compile_results_<time>.json
};

// Writes both files atomically into `directory` (the original writes them
// into the current directory). <time> is `now_epoch_seconds` printed as
// Python prints a float (1732350000.123456, 1732350000.0); each node of a
// cluster writes its own. The text is Python's json.dumps(..., indent=4):
//   {"compilation_summary": {"true": <ok>, "false": <failed>},   (a 0 count absent)
//    "compilation_report": {"<entry>/model.hlo_module.pb":
//        {"status": true|false, "retry": <retries>, "compile_time": <seconds>}, ...},
//    "start_time": <start_epoch_seconds>, "compilation_time": <compilation_seconds>}
// and {"total_neuron_parallel_compile_time": <total_seconds>}, with no final
// newline, non-ASCII escaped as \uXXXX. Graphs are listed sorted by path.
// A launcher that is a task of a Slurm step puts its `tag` (node and task,
// StepTask::file_tag) before the time: the step's tasks may end within the
// same microsecond and share one directory.
[[nodiscard]] Result<OriginalResults> write_original_results(const Pool& pool, double start_epoch_seconds,
                                                             double compilation_seconds, double total_seconds,
                                                             const fs::path& directory,
                                                             double now_epoch_seconds,
                                                             const std::string& tag = "");

// The original's closing lines: "Total graphs: N" (every graph found, also
// those left to another process, which are neither of the next two),
// "Total successful compilations: N", "Total failed compilations: N".
[[nodiscard]] std::vector<std::string> original_summary_lines(const Pool& pool);

// `value` as Python's repr(float) prints it: shortest round trip, ".0" on
// whole numbers, exponent form below 1e-4 and from 1e16 (1e+16, 1.5e-05).
[[nodiscard]] std::string python_float_text(double value);

} // namespace npc::launcher
