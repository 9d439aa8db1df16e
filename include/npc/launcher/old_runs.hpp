#pragma once
// The workdir keeps each run's files under its pid's tag
// (trial_run_pid<N>_log.txt, cache_path_pid<N>_log.txt, compile_logs_pid<N>/).
// The original removed the whole workdir at every start, losing the logs of
// the run before; we keep the last few runs' files instead, so the logs of a
// failure are still there to read after the next run, and the workdir does
// not grow without end.

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace npc::launcher {

namespace fs = std::filesystem;

// Runs whose files are kept besides those of live processes: enough to
// compare a failed run with the one before and after it.
inline constexpr std::size_t kKeptRuns = 5;

// Removes the files of every run but the `keep` most recent ones (by the
// newest time of their files) and those whose pid runs on this host (a
// launcher sharing the workdir right now). Returns what it removed; what
// cannot be removed is left, without a word: these are logs.
std::vector<fs::path> remove_old_runs(const fs::path& workdir, std::size_t keep = kKeptRuns);

} // namespace npc::launcher
