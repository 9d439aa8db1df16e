#pragma once
// The scenarios. Each runs its contenders side by side (alternating, see
// harness.hpp) and returns its figures; main.cpp puts them into the report.

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "harness.hpp"
#include "workload.hpp"

namespace bench {

// 1. Schedule quality: sleep mode with N = 8 and busy-CPU mode with N = cores.
Scenario run_schedule_sleep(const Context& context);
Scenario run_schedule_busy(const Context& context);
// 2. Memory-aware scheduling under the stand-in's simulated OOM killer.
Scenario run_memory(const Context& context);
// 3. Warm start: the training script when every graph is cached, and the
//    time to the first training step, cold against pre-compiled.
Scenario run_warm(const Context& context);
// 4. Launcher overhead over an all-cached trial.
Scenario run_overhead(const Context& context);
// 5. The cache at 100 and 100,000 entries.
Scenario run_cache_scale(const Context& context);
// The same on a disk file system ($NPC_BENCH_DISK_SCRATCH, $TMPDIR, /var/tmp or /tmp).
Scenario run_cache_scale_disk(const Context& context);
// 6. Key hashing speed on a 1 GiB graph.
Scenario run_hashing(const Context& context);
// 7. The launcher's own peak memory with 10,000 graphs.
Scenario run_launcher_memory(const Context& context);
// 8. Many NEFFs to S3 and back: ours against rclone copy, on one s3rver.
Scenario run_s3_transfer(const Context& context);
// 9. Before and after one cache over storage: an older revision's programs
//    against ours on hits, the launcher on S3 and bundles to and from S3.
Scenario run_before_after(const Context& context);
// 10. A cluster as one pool: 16 simulated hosts × 8 workers on one cache (a
//     directory, and S3 on a RADOS Gateway), against per-node caches and the
//     original's lockstep order on a shared cache.
Scenario run_cluster(const Context& context);
// 10b. 6 simulated hosts × 2 over 48 graphs of 2 to 6 s, on a directory and
//      on S3, each against the oracle's split on the same cache.
Scenario run_cluster_short(const Context& context);
// 11. A frontend that runs neuronx-cc itself (standin_torchneuron), through
//     the masquerade directory (warm and cold) or straight to the compiler.
Scenario run_masquerade(const Context& context);
// 12. What the cache's usage counters add to a hit, and --trace to a run.
Scenario run_observe(const Context& context);
// 13. neuron_cache misses on 20,000 entries against find | wc -l.
Scenario run_misses(const Context& context);

// Contenders shared by scenarios 1 and 2.

// `xargs -P n` over the graph files in trial order, each compiled straight
// with the compiler, NEFFs written to out_dir. Record: wall_seconds, exit,
// neffs (how many NEFFs exist afterwards).
json run_xargs(const Context& context, const Environment& env, const fs::path& graphs_dir, const fs::path& out_dir,
               int n, const fs::path& log);
[[nodiscard]] std::string xargs_command(const fs::path& graphs_dir, const fs::path& out_dir, int n);

// neuron_parallel_compile --command compile over a cache of pending entries.
// Record: wall_seconds, exit, compiled, failed, retried, parallel,
// compilation_time (the report's), launcher_peak_rss_bytes.
json run_ours_compile(const Context& context, const Environment& env, const fs::path& run_dir,
                      const std::vector<std::string>& extra_args);

// One compile after another through the compile entry, as a training run
// compiles just in time, into a fresh cache. Record: wall_seconds, compiled.
json run_serial_jit(const Context& context, const Environment& env, const Workload& workload,
                    const fs::path& graphs_dir, const fs::path& out_dir, const fs::path& log);

// The compiler's own time beyond its configured cost (its start, reading and
// hashing the graph, writing the NEFF), which no scheduler can avoid:
// measured by running the stand-in directly, solo, on copies of the smallest
// and the largest graph whose cost line says 0, and fitted as a + b × bytes.
struct CompilerOverhead {
  double fixed_seconds = 0;
  double seconds_per_byte = 0;
  double small_seconds = 0, large_seconds = 0;
  std::uint64_t small_bytes = 0, large_bytes = 0;
  [[nodiscard]] double at(std::uint64_t bytes) const {
    return std::max(0.0, fixed_seconds + seconds_per_byte * static_cast<double>(bytes));
  }
  // A graph's cost as the compiler itself takes it: configured + its own.
  [[nodiscard]] double cost(const Graph& g) const { return static_cast<double>(g.cost_ms) / 1000.0 + at(g.bytes); }
};
[[nodiscard]] CompilerOverhead measure_compiler_overhead(const Context& context, const Workload& workload,
                                                         const fs::path& graphs_dir, const fs::path& dir,
                                                         const Environment& env);

// Lines in a file (0 when it does not exist).
[[nodiscard]] std::size_t count_lines(const fs::path& path);
// Files in a directory whose names end with `suffix`.
[[nodiscard]] std::size_t count_files(const fs::path& dir, const std::string& suffix);

} // namespace bench
