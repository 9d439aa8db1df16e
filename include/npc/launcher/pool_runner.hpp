#pragma once
// Drives a Pool: one event loop starts what the pool picks, waits for
// attempts to end and for signals together, looks again at graphs held by
// others, and keeps the progress display. What it waits on is a
// WorkerRunner (as ninja's CommandRunner): the real one runs
// `neuron_cc_wrapper compile-entry` processes, waits on them and on signals
// together (signalfd), reads how each attempt ended from the worker's
// report, and on SIGINT, SIGTERM or SIGHUP ends every worker's process group
// within 2 s; tests drive the same loop with a fake runner and a fake clock.

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <npc/cache/store.hpp>
#include <npc/cluster/cluster.hpp>
#include <npc/launcher/pool.hpp>
#include <npc/launcher/progress.hpp>
#include <npc/launcher/run_trace.hpp>
#include <npc/util/result.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

struct RunnerConfig {
  fs::path wrapper;  // neuron_cc_wrapper, whose compile-entry each worker runs
  fs::path compiler;
  std::optional<std::chrono::milliseconds> compile_timeout;
  fs::path log_dir;  // one log per attempt
  bool retry_cached_failures = false;
  std::chrono::seconds stale_lock_age{6 * 3600}; // passed to the workers as --lock-timeout
  // What names the cache to a worker (cache::Tiers::worker_arguments):
  // with a shared store, a worker whose lock the launcher did not take
  // compiles under the shared lock and pushes there.
  std::vector<std::string> cache_arguments;
  // The launchers this one shares its cache's graphs with (cluster.hpp).
  // Null: alone.
  std::shared_ptr<npc::cluster::Cluster> cluster;
  // Where the run's timeline goes (--trace); null: nowhere.
  RunTrace* trace = nullptr;
  // The run of launchers this one is part of (the tasks of a Slurm step:
  // "slurm step 4711.0") and who it is in it ("task 1/4 vm"): a graph
  // failed for good by one of them is failed for all (the workers'
  // EntryOutcome::failed_in_run). Empty: a launcher on its own.
  std::string run{};
  std::string run_by{};
};

struct PoolRunResult {
  int interrupted_by = 0;
  double wall_seconds = 0;
};

// After passing on an interrupt, how long workers have before SIGKILL.
inline constexpr auto kWorkerInterruptGrace = std::chrono::milliseconds(1500);
// The status line is refreshed this often while compiles run.
inline constexpr int kProgressTickMs = 1000;
// Looks at a shared cache (Cluster::look) stop for this tick once they have
// taken this long: a request is about 20 ms on S3, and the loop must get
// back to reaping workers and to signals. What is left due is looked at
// in the next ticks, the longest due first.
inline constexpr auto kHeldLookBudgetPerTick = std::chrono::milliseconds(250);

// One attempt to start: a compile of the item's entry.
struct AttemptSpec {
  std::size_t item = 0;
  fs::path entry_dir;
  fs::path log;         // the attempt's output
  fs::path result_file; // the worker's report (compile/worker_report.hpp)
  bool retry = false;   // compile a cached failure again
  bool shared_lock_held = false; // the launcher holds its shared lock and brought its graph (HeldEntryLook::take_lock)
  bool last_attempt = false;     // no retry follows a failure (Pool::last_attempt)
};

struct AttemptEnded {
  std::size_t item = 0;
  AttemptEnd end = AttemptEnd::failed;
  AttemptInfo info;
};

// What the event loop waits on.
class WorkerRunner {
public:
  virtual ~WorkerRunner() = default;
  // Seconds on a monotonic clock.
  [[nodiscard]] virtual double now() = 0;
  // Starts an attempt; an error (a one-line reason) when it cannot start.
  [[nodiscard]] virtual Status start(const AttemptSpec& attempt) = 0;
  struct Events {
    std::vector<AttemptEnded> ended;
    int interrupt = 0; // SIGINT, SIGTERM or SIGHUP received; 0: none
  };
  // Waits up to `timeout` for attempts to end or an interrupt; returns at
  // once with what happened meanwhile.
  [[nodiscard]] virtual Events wait(std::chrono::milliseconds timeout) = 0;
  // After an interrupt: passes `signal` on to every running attempt and
  // returns once none runs (killing what outlives kWorkerInterruptGrace).
  virtual void stop_all(int signal) = 0;
  [[nodiscard]] virtual std::size_t running() const = 0;
};

// The real runner: a neuron_cc_wrapper compile-entry process per attempt.
// Blocks the signals it watches for as long as it lives; `config` must
// outlive it.
[[nodiscard]] std::unique_ptr<WorkerRunner> make_process_runner(const RunnerConfig& config);

[[nodiscard]] PoolRunResult run_pool(Pool& pool, const cache::Cache& cache, const RunnerConfig& config,
                                     ProgressDisplay& progress, WorkerRunner& runner);
// With the real runner.
[[nodiscard]] PoolRunResult run_pool(Pool& pool, const cache::Cache& cache, const RunnerConfig& config,
                                     ProgressDisplay& progress);

} // namespace npc::launcher
