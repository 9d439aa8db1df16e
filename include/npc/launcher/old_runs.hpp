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

#include <npc/util/fs.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

// Runs whose files are kept besides those of live processes: enough to
// compare a failed run with the one before and after it.
inline constexpr std::size_t kKeptRuns = 5;

// A run is alive while it holds a shared flock on its compile_logs_pid<N>/
// folder, which mark_run_alive takes and the returned descriptor keeps (for
// the run's life). A pid alone cannot tell: launchers in other PID
// namespaces (containers, the hosts of a cluster test) share a workdir, and
// their pids mean nothing here, or another process's; a flock is the
// file's, seen alike from every namespace of the host. Not inherited by
// the run's children (close-on-exec). An invalid descriptor when the lock
// cannot be taken: the run is then judged by its pid, as an older
// release's is.
[[nodiscard]] util::UniqueFd mark_run_alive(const fs::path& log_dir);

// Removes the files of every run but the `keep` most recent ones (by the
// newest time of their files) and those alive: whose log folder's flock is
// held (mark_run_alive), or, for a run that holds none (an older release's),
// whose pid runs on this host. Returns what it removed; what cannot be
// removed is left, without a word: these are logs.
std::vector<fs::path> remove_old_runs(const fs::path& workdir, std::size_t keep = kKeptRuns);

} // namespace npc::launcher
