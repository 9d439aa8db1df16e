#pragma once
// The run's first phase (run.cpp): its working files, and the graphs it is
// to compile: those the trial of the training command names, in
// extraction mode, or, for --command compile, every pending one.

#include <filesystem>
#include <optional>
#include <string>

#include <npc/cache/store.hpp>
#include <npc/launcher/collect.hpp>
#include <npc/launcher/graph_source.hpp>
#include <npc/launcher/options.hpp>
#include <npc/launcher/report.hpp>
#include <npc/launcher/run_trace.hpp>
#include <npc/util/fs.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

struct RunFiles {
  fs::path workdir;
  fs::path path_log;
  fs::path trial_log;
  fs::path log_dir;
  util::UniqueFd alive; // held for the run's life: its files are not another run's to remove (old_runs.hpp)
};

// The original's names, per launcher pid, in --parallel_compile_workdir
// (by default /tmp/$USER/parallel_compile_workdir), made and checked
// writable; older runs' files removed (old_runs.hpp).
[[nodiscard]] RunFiles prepare_workdir(const Options& options);

// The trial phase: runs the training command in extraction mode and
// collects the graphs it named. An exit status when the run ends here.
// `collect_start` is when the trial ended.
[[nodiscard]] std::optional<int> collect_from_trial(const Options& options, const RunFiles& files,
                                                    GraphSource& source, Collector& collector, RunFacts& facts,
                                                    bool compile_despite_trial_failure, RunTrace* trace,
                                                    double& collect_start);

// --command compile: every graph of the version not done yet (with
// `with_failed`, the failed too).
void collect_pending(const cache::Cache& cache, const std::string& version, GraphSource& source,
                     Collector& collector, bool with_failed);

} // namespace npc::launcher
