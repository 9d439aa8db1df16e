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
#include <npc/launcher/remote_look.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

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
  // With remote_cache: how a deferred graph's remote entry is looked at
  // (remote_look.hpp), instead of a worker started to look. Null: every
  // revisit looks at the mirror only.
  std::shared_ptr<RemoteEntryLook> remote_look;
};

struct PoolRunResult {
  int interrupted_by = 0;
  double wall_seconds = 0;
};

// After passing on an interrupt, how long workers have before SIGKILL.
inline constexpr auto kWorkerInterruptGrace = std::chrono::milliseconds(1500);
// The status line is refreshed this often while compiles run.
inline constexpr int kProgressTickMs = 1000;
// Looks at a remote (remote_look.hpp) stop for this tick once they have
// taken this long: a request is about 20 ms on S3, and the loop must get
// back to reaping workers and to signals. What is left due is looked at
// in the next ticks, the longest due first.
inline constexpr auto kRemoteLookBudgetPerTick = std::chrono::milliseconds(250);

[[nodiscard]] PoolRunResult run_pool(Pool& pool, const cache::Cache& cache,
                                     const RunnerConfig& config, ProgressDisplay& progress);

} // namespace npc::launcher
