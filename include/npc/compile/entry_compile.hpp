#pragma once
// Compiles one cache entry in place: the graph and compile_flags.json already
// in the entry go to the compiler; the result is published into the entry.
// This is what `neuron_cc_wrapper compile-entry DIR` runs for the launcher's
// workers, and what a just-in-time miss runs after storing the graph.

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <npc/cache/entry_meta.hpp>
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
  locked_elsewhere // lock_wait was zero and another process holds the lock
};
[[nodiscard]] std::string_view to_string(EntryOutcome outcome);
[[nodiscard]] std::optional<EntryOutcome> parse_entry_outcome(std::string_view text);

struct EntryCompileResult {
  EntryOutcome outcome = EntryOutcome::failed;
  std::optional<CompileRun> run;
  cache::AttemptRecord attempt;
  fs::path log_path; // model.log of a failure, npc-killed.log of a kill
};

// Throws npc::Error when the entry cannot be compiled at all (no graph,
// corrupt compile_flags.json, lock wait timed out, compiler not startable).
[[nodiscard]] EntryCompileResult compile_entry(const cache::Cache& cache, const fs::path& entry_dir,
                                               const EntryCompileOptions& options);

// "<entry>: compiler exit code 70; log <path>" followed by the log's last
// lines, for the user.
[[nodiscard]] std::string describe_failure(const fs::path& entry_dir, const std::string& how,
                                           const fs::path& log_path, std::size_t tail_lines = 20);

} // namespace npc::compile
