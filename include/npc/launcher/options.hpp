#pragma once
// The launcher's command line:
//   neuron_parallel_compile [options] [--] COMMAND [ARGS...]
// Our options end at the first word that is not one of them (or at "--");
// nothing of the user's command is ever read as ours.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <npc/cluster/slurm_step.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

enum class Mode {
  collect_and_compile, // run the trial in extraction mode, then compile (default)
  collect,             // only run the trial and collect the graphs
  compile,             // compile every pending entry of the current compiler version
  check,               // run the trial, compile nothing: is every graph it produced compiled? (warm_check.hpp)
  clean,               // remove every entry of the current compiler version, and the workdir
  clear_locks,         // remove lock files nobody holds
  clear_neffs,         // drop compiled results, keep the graphs pending
  scan,                // report states (failed counted as done)
  scan_with_failed,    // report states, failed apart
  analyze              // the original's graph analysis: not available (exit 2)
};

struct Options {
  Mode mode = Mode::collect_and_compile;
  std::optional<int> num_parallel;
  int node_id = 0;
  int world_size = 1;
  std::optional<fs::path> workdir;
  std::optional<std::string> log_level;
  std::optional<fs::path> report;
  std::optional<fs::path> trace; // --trace, else $NEURON_PARALLEL_COMPILE_TRACE
  int max_retries = 0;
  std::optional<std::chrono::milliseconds> compile_timeout;
  std::optional<std::uint64_t> memory_per_compile; // nullopt: learned ("auto")
  std::optional<std::uint64_t> memory_budget;      // nullopt: MemAvailable
  std::optional<std::string> compiler;
  bool dry_run = false;
  bool static_schedule = false; // contiguous shares of the sorted entries, stealing from 8 before
  std::optional<std::chrono::seconds> lock_timeout; // stale-lock age (storage::kDefaultStaleLockAge)
  std::vector<std::string> command; // the user's command, untouched
  // The task of a Slurm step this launcher is (srun), if any. Without
  // --node_id and --world_size, the step's tasks split the graphs by their
  // leases on the roll (share_from_step; cluster/step_roll.hpp), or, with
  // --static_schedule, node_id and world_size are the task's.
  std::optional<cluster::StepTask> step;
  bool share_from_step = false;
};

// Parses argv. Throws UsageError on a bad option or value; --help and
// --version print and throw Error(ExitCode::success).
[[nodiscard]] Options parse_options(int argc, char** argv);

[[nodiscard]] bool mode_runs_trial(Mode mode);
// Whether `mode` compiles graphs (and so has a report to write, and splits
// its graphs with other launchers).
[[nodiscard]] bool mode_compiles(Mode mode);
// The --command word of `mode` ("scan-with-failed").
[[nodiscard]] std::string mode_name(Mode mode);

} // namespace npc::launcher
