#pragma once
// What the reliability suites share: seeded randomness that is printed, the
// short and long forms (NPC_LONG=1), synthetic graphs with known NEFFs, an
// oracle that reads the cache directly (not through the product's code), and
// killing process groups at random points.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace npc::reltest {

namespace fs = std::filesystem;
using npc::test::file_sha256;
using npc::test::RunResult;

// ---- Short and long forms ------------------------------------------------

// True when NPC_LONG is 1/true/yes/on: the documented long run.
[[nodiscard]] bool long_mode();
// `short_count` normally, `long_count` under NPC_LONG=1.
[[nodiscard]] int scaled(int short_count, int long_count);

// A seed for this test: NPC_SEED when set, else fresh. Printed, so that any
// failure can be replayed with NPC_SEED=<seed>.
[[nodiscard]] std::uint64_t test_seed();

// ---- Figures -------------------------------------------------------------

// Adds to the counts the suites publish (docs/reliability.md): appended as
// one JSON line per test to $NPC_RELIABILITY_FIGURES, or to
// <build>/reliability-figures.jsonl, and printed.
void record_figures(const std::map<std::string, std::uint64_t>& figures);

// ---- Graphs with known results --------------------------------------------

struct Graph {
  fs::path path;
  std::string sha256;      // of the graph bytes
  std::string neff_sha256; // of the NEFF the stand-in makes of it (no flags)
  std::uint64_t neff_bytes = 0;
};

// `count` distinct HLO-like graphs of about `bytes` bytes each in `dir`,
// named <tag>-<i>.hlo. Their NEFFs are computed once by running the stand-in
// compiler directly (not counted in any invocation log).
[[nodiscard]] std::vector<Graph> make_graphs(const fs::path& dir, const std::string& tag, int count,
                                             std::size_t bytes, std::mt19937_64& rng);

// The stand-in's NEFF for `graph` with exactly these extra flag words (the
// wrapper adds --target=<t> when the flags name no target; the suites set
// NEURON_PLATFORM_TARGET_OVERRIDE=trn1).
[[nodiscard]] std::string reference_neff_sha(const fs::path& graph, const fs::path& workdir);

// ---- The oracle ---------------------------------------------------------

struct CacheCheck {
  std::size_t entries = 0, done = 0, pending = 0, failed = 0, incomplete = 0;
  std::size_t lock_files = 0, held_locks = 0, temp_files = 0, trash = 0;
  std::vector<std::string> problems; // empty: consistent
  [[nodiscard]] std::string describe() const;
};

// Reads every entry under `root` directly. A problem is: a done entry whose
// NEFF is missing, differs from its npc-entry.json record (sha256, bytes), or
// (when `expected` knows the graph) differs from the NEFF the graph must give;
// a done entry without its graph or flags (half deleted). With
// `expect_no_holders`, a lock still held is a problem too (nothing runs).
// `expected` maps graph sha256 to NEFF sha256.
[[nodiscard]] CacheCheck check_cache(const fs::path& root,
                                     const std::map<std::string, std::string>& expected = {},
                                     bool expect_no_holders = true);

[[nodiscard]] std::map<std::string, std::string> expected_map(const std::vector<Graph>& graphs);


// ---- Processes ------------------------------------------------------------

// The process table and the reaping of orphans come from the support
// library (process.hpp).
using npc::test::alive;
using npc::test::become_subreaper;
using npc::test::children_of;
using npc::test::cmdline_of;
using npc::test::descendants_of;
using npc::test::kill_all_descendants;

struct Started {
  pid_t pid = -1; // also its process group
  fs::path output;
};

// Starts a program in its own process group, output to `output`.
[[nodiscard]] Started start(const std::vector<std::string>& argv, const npc::test::RunOptions& options,
                            const fs::path& output);

struct Ended {
  bool killed = false; // our SIGKILL landed while it ran
  bool signaled = false;
  int signal = 0;
  int exit_code = -1;
  std::string output;
};

// Waits `delay`, then SIGKILLs the process group (if it still runs) and
// reaps the leader.
[[nodiscard]] Ended kill_after(const Started& started, std::chrono::microseconds delay);
// Waits for it to end by itself (SIGKILL after `timeout`).
[[nodiscard]] Ended wait_for(const Started& started, std::chrono::milliseconds timeout);

} // namespace npc::reltest
