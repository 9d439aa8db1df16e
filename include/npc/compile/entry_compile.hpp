#pragma once
// Compiles one cache entry in place: the graph and compile_flags.json already
// in the entry go to the compiler; the result is published into the entry.
// This is what `neuron_cc_wrapper compile-entry DIR` runs for the launcher's
// workers, and what a just-in-time miss runs after storing the graph.

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <cstdint>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/usage_stats.hpp>
#include <npc/cache/store.hpp>
#include <npc/compile/driver.hpp>

namespace npc::compile {

// How long a caller waits for another process's compile of the same entry.
// Large graphs take hours to compile; waiting less would only start a second
// wait later.
inline constexpr auto kDefaultLockWait = std::chrono::hours(6);

struct EntryCompileOptions {
  fs::path compiler;
  std::optional<std::chrono::milliseconds> timeout;
  std::chrono::milliseconds lock_wait = kDefaultLockWait; // zero: do not wait
  bool retry_failed = false;
  // NEURON_CC_FLAGS --compile_workdir=DIR: compile in a fresh directory under
  // DIR instead of inside the entry (the NEFF is then copied into the entry
  // before it is published by rename).
  std::optional<fs::path> compile_workdir;
  // NEURON_CC_FLAGS --dump=DIR: keep each compile's working directory (the
  // compiler's artifacts and log) as DIR/<MODULE_...>/.
  std::optional<fs::path> dump_dir;
  // Run with the entry's lock still held once it is done (compiled now, or
  // found done): what must read the result before an eviction may remove
  // it, like the wrapper's copy to --output. It throws to fail the compile.
  std::function<void(const cache::Entry&)> while_done_and_locked;
  // Set by a caller that holds the graph's bytes (the wrapper's compile):
  // stores them into an entry found under its lock without its graph. That
  // is another process's store half done (its compile_flags.json written,
  // the graph not yet) into an entry an eviction just removed and it made
  // again; without this, such an entry is an error to remove.
  std::function<void(const cache::Entry&)> store_missing_graph;
  // The masquerade's (masquerade.hpp): changes the compile's command line
  // before it runs (the caller's words, its output in the work folder).
  std::function<void(CompileJob&)> adjust_job;
  // False: a failed compile leaves the entry pending, nothing cached, so that
  // the cache never makes a later compile fail (the masquerade's).
  bool cache_failures = true;
  // The run of launchers this compile is part of (the tasks of a Slurm
  // step): its attempt is recorded as made in that run by `by`, the last of
  // that launcher's attempts when `last_attempt` (no retry follows a
  // failure); and a graph already failed for good in the run is not
  // compiled again, even with retry_failed (EntryOutcome::failed_in_run).
  struct RunMark {
    std::string run; // "slurm step 4711.0"
    std::string by;  // "task 1/4 vm"
    bool last_attempt = false;
  };
  std::optional<RunMark> run{};
  // Whose words the entry's compile_flags.json holds, recorded with each
  // attempt (npc-entry.json), so that `neuron_cache explain` compares the
  // entry with the command line that keys it: the masquerade's are the
  // compiler's own command line.
  cache::FlagsOrigin flags_from = cache::FlagsOrigin::neuron_cc_flags;
};

enum class EntryOutcome {
  compiled,       // we compiled it and published the NEFF
  already_done,   // done (maybe by another process while we waited)
  cached_failure, // a failed result is cached and retry was not asked for
  failed,         // we compiled it and the compiler failed (result cached)
  interrupted,    // a signal stopped the compile; the entry is left pending
  killed,         // SIGKILL from outside, most often the out-of-memory killer:
                  // the attempt is recorded, the entry left pending, not cached
  timed_out,      // our --timeout ended it: recorded and left pending like a kill
  locked_elsewhere, // lock_wait was zero and another process holds the lock
  removed,        // the entry's directory was gone before or while it compiled
                  // (neuron_cache rm, --command clean): nothing to publish into
  no_space,       // a filesystem ran out of space (ENOSPC, EDQUOT) during the
                  // compile or its publishing: an environment fault, so the
                  // attempt is recorded and the entry left pending, never
                  // cached as a failure; attempt.exit names the full place
  failed_in_run   // another launcher of this run (EntryCompileOptions::run)
                  // failed or timed out on it with no retry to follow: not
                  // compiled again; attempt is that launcher's, its exit
                  // saying who and how
};
[[nodiscard]] std::string_view to_string(EntryOutcome outcome);
[[nodiscard]] std::optional<EntryOutcome> parse_entry_outcome(std::string_view text);

struct EntryCompileResult {
  EntryOutcome outcome = EntryOutcome::failed;
  std::optional<CompileRun> run;
  cache::AttemptRecord attempt;
  fs::path log_path; // model.log of a failure, npc-killed.log of a kill or of no_space
};

// What a compile of the entry at `entry_dir` adds to the cache's counters
// (cache/usage_stats.hpp): a miss and its time when it compiled, a hit when
// another process's result was there once the lock was ours, a failure.
[[nodiscard]] cache::UsageCounts usage_of(const EntryCompileResult& result, const fs::path& entry_dir);

// Throws npc::Error when the entry cannot be compiled at all (no graph,
// corrupt compile_flags.json, lock wait timed out, compiler not startable).
[[nodiscard]] EntryCompileResult compile_entry(const cache::Cache& cache, const fs::path& entry_dir,
                                               const EntryCompileOptions& options);

// Where a compile ran out of space: the path whose filesystem is full, and
// what was free there when it was looked at.
struct SpaceFault {
  fs::path where;
  std::optional<std::uint64_t> free_bytes;
};
// A filesystem with less than this free cannot hold a compile's output (a
// NEFF is megabytes): a compile that failed with its output or cache on such
// a filesystem is taken to have failed for want of space, even when the
// compiler could not say so (its log was on the full filesystem too).
inline constexpr std::uint64_t kNearlyFullBytes = 64 * 1024;
// Whether `said` (a log, an error) reports ENOSPC or EDQUOT, or one of
// `places` is on a nearly full filesystem; the first such place.
[[nodiscard]] std::optional<SpaceFault> find_space_fault(const std::vector<fs::path>& places,
                                                         std::string_view said);
// "No space left on device: the filesystem of <where> is full (N bytes
// free); free space there and run again ...", one line.
[[nodiscard]] std::string describe_space_fault(const SpaceFault& fault);

// "<entry>: compiler exit code 70; log <path>" followed by the log's last
// lines, for the user.
[[nodiscard]] std::string describe_failure(const fs::path& entry_dir, const std::string& how,
                                           const fs::path& log_path, std::size_t tail_lines = 20);

} // namespace npc::compile
