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
#include <npc/launcher/pool.hpp>
#include <npc/launcher/progress.hpp>
#include <npc/launcher/run_trace.hpp>
#include <npc/util/result.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

// A look at a deferred graph in the cache other hosts share, where a lock
// this host cannot see may hold it (cache::SharedTier::look for a shared tier): what
// the shared cache holds for the entry `entry_dir` now. Found::held_elsewhere
// when another host holds it, alive.
class HeldEntryLook {
public:
  virtual ~HeldEntryLook() = default;
  [[nodiscard]] virtual Pool::Found look(const fs::path& entry_dir) = 0;
  // Looks at each of `entry_dirs` until `out_of_time()`: nullopt for those not
  // looked at (looked at later). A shared tier lists many at once.
  [[nodiscard]] virtual std::vector<std::optional<Pool::Found>> look_all(const std::vector<fs::path>& entry_dirs,
                                                                         const std::function<bool()>& out_of_time) {
    std::vector<std::optional<Pool::Found>> found(entry_dirs.size());
    for (std::size_t i = 0; i < entry_dirs.size() && !out_of_time(); ++i) found[i] = look(entry_dirs[i]);
    return found;
  }
  // Whether a result found done was downloaded into this host's directory.
  [[nodiscard]] virtual bool downloads() const { return true; }
  // When the lease of the lock a look found on the graph of `entry_dir`
  // ends unless its holder renews it, as last read; nullopt when not known
  // (a lock not read, presumed held for being new).
  [[nodiscard]] virtual std::optional<std::chrono::system_clock::time_point>
  lease_ends(const fs::path& entry_dir) const {
    (void)entry_dir;
    return std::nullopt;
  }

  // The shared lock of a graph about to be compiled, taken by the launcher
  // itself just before its worker starts (and renewed meanwhile), with the
  // graph brought into this host's directory: hosts walking the same graphs
  // at once then lose a race for one with a request or two, not a worker's
  // start, and the worker compiles in the directory alone (started without
  // --shared-cache). left_to_worker: not taken here (the worker takes it,
  // brings the graph and uploads the result, as without this). done: the
  // graph's result was there once the lock was taken (another host compiled
  // it since the last look), and the lock let go.
  // failed: another launcher of this run (set_run) failed it for good, as
  // the shared entry's record says (TakeEnded::how: who and how), and the
  // lock was let go.
  enum class Take { taken, held, done, left_to_worker, failed };
  [[nodiscard]] virtual Take take_lock(const fs::path& entry_dir) {
    (void)entry_dir;
    return Take::left_to_worker;
  }
  // take_lock without holding up the event loop, which reaps workers and
  // starts the next: begin_take starts taking the lock of item `item`'s
  // entry, and takes_ended returns the takes ended since the last call
  // (their graph's lock taken, or not). While a take runs, wake_fd (when
  // not -1) turns readable once one has ended. By default the take is
  // take_lock, at once, in begin_take.
  struct TakeEnded {
    std::size_t item = 0;
    Take take = Take::left_to_worker;
    std::string how{}; // Take::failed: "timed out after 3s in task 1/4 vm (slurm step 4711.0)"
  };
  // The run of launchers this one is part of (RunnerConfig::run): a graph
  // whose shared record says it failed for good in it is not taken.
  void set_run(std::string run) { run_ = std::move(run); }
  [[nodiscard]] const std::string& run() const { return run_; }
  virtual void begin_take(std::size_t item, const fs::path& entry_dir) {
    takes_ended_.push_back({item, take_lock(entry_dir)});
  }
  [[nodiscard]] virtual std::vector<TakeEnded> takes_ended() { return std::exchange(takes_ended_, {}); }
  [[nodiscard]] virtual int wake_fd() const { return -1; }
  // The worker of a graph take_lock took has ended: its result, if any, goes
  // to the shared cache and the lock is released (on threads of their own:
  // this returns at once).
  virtual void attempt_ended(const fs::path& entry_dir) { (void)entry_dir; }
  // Returns once what attempt_ended and begin_take started has ended; a
  // lock a take took that no worker got is released.
  virtual void finish() {}

private:
  std::vector<TakeEnded> takes_ended_; // the default begin_take's
  std::string run_;
};

// The launchers that split a shared cache's graphs among themselves, as
// the run goes (launcher_roll.hpp): the pool's shares follow what it shows.
class RollLook {
public:
  virtual ~RollLook() = default;
  [[nodiscard]] virtual const std::string& self() const = 0;
  // The names on the roll, sorted, when a look is due and finds them
  // changed; nothing otherwise.
  [[nodiscard]] virtual std::optional<std::vector<std::string>> changed(double now) = 0;
};

struct RunnerConfig {
  fs::path wrapper;  // neuron_cc_wrapper, whose compile-entry each worker runs
  fs::path compiler;
  std::optional<std::chrono::milliseconds> compile_timeout;
  fs::path log_dir;  // one log per attempt
  bool retry_cached_failures = false;
  std::chrono::seconds stale_lock_age{6 * 3600}; // passed to the workers as --lock-timeout
  // The shared tier's URL (s3://bucket/prefix) when the entries are its
  // mirror's: the workers compile under the shared lock and push there.
  std::optional<std::string> shared_cache_url;
  // How a deferred graph is looked at where other hosts hold it, instead of
  // a worker started to look. Null: every revisit looks at the entry only.
  std::shared_ptr<HeldEntryLook> held_look;
  // Where the run's timeline goes (--trace); null: nowhere.
  RunTrace* trace = nullptr;
  // The launchers splitting the graphs; null: the shares stay as made.
  std::shared_ptr<RollLook> roll;
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
// Looks at a shared cache (HeldEntryLook) stop for this tick once they have
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
