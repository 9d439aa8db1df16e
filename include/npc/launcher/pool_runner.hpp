#pragma once
// Drives a Pool with real worker processes: one event loop waits on the
// workers and on signals together (signalfd), starts what the pool picks,
// reads how each attempt ended from the entry's own record, and on SIGINT,
// SIGTERM or SIGHUP ends every worker's process group within 2 s.

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <npc/cache/store.hpp>
#include <npc/launcher/pool.hpp>
#include <npc/launcher/progress.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

// A look at a deferred graph in the cache other hosts share, where a lock
// this host cannot see may hold it (remote_look.hpp for an S3 cache): what
// the shared cache holds for the entry `entry_dir` now. Found::held_elsewhere
// when another host holds it, alive.
class HeldEntryLook {
public:
  virtual ~HeldEntryLook() = default;
  [[nodiscard]] virtual Pool::Found look(const fs::path& entry_dir) = 0;
};

struct RunnerConfig {
  fs::path wrapper;  // neuron_cc_wrapper, whose compile-entry each worker runs
  fs::path compiler;
  std::optional<std::chrono::milliseconds> compile_timeout;
  fs::path log_dir;  // one log per attempt
  bool retry_cached_failures = false;
  std::chrono::seconds stale_lock_age{6 * 3600}; // passed to the workers as --lock-timeout
  // s3://bucket/prefix when the entries are a remote cache's mirror: the
  // workers compile under the remote lock and push the result there.
  std::optional<std::string> remote_cache;
  // How a deferred graph is looked at where other hosts hold it, instead of
  // a worker started to look. Null: every revisit looks at the entry only.
  std::shared_ptr<HeldEntryLook> held_look;
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

[[nodiscard]] PoolRunResult run_pool(Pool& pool, const cache::Cache& cache,
                                     const RunnerConfig& config, ProgressDisplay& progress);

} // namespace npc::launcher
