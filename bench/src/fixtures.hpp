#pragma once
// Cache states the scenarios start from.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "harness.hpp"
#include "workload.hpp"

namespace bench {

// The version directory the stand-in compiler's entries go under.
inline constexpr const char* kStandinVersionDir = "neuronxcc-2.14.213.0+standin";

// Puts every graph of `graphs_dir` (in trial order) into the cache at
// <cache_dir>/neuron-compile-cache as a pending entry, exactly as a trial run
// does: neuron_cc_wrapper compile in NEURON_EXTRACT_GRAPHS_ONLY mode. The
// compiler-version memo the wrapper leaves in the cache comes along too.
void extract_into_cache(const Context& context, const Workload& workload, const fs::path& graphs_dir,
                        const fs::path& cache_dir, const fs::path& log);

// Makes every entry under the cache root pending again (removes the NEFF,
// the done marker, a failure log) and keeps its npc-entry.json history.
void make_pending_again(const fs::path& cache_dir);

// Counts entries with a done marker.
[[nodiscard]] std::size_t count_done(const fs::path& cache_dir);

// Writes `count` done entries straight into the layout (graph, flags, NEFF,
// done marker and an npc-entry.json with one successful attempt), entry i
// last used `age(i)` ago. Entry i's content depends only on (tag, i), so a
// missing entry can be written again identically. Returns the total bytes.
struct BulkSpec {
  std::string tag = "bulk";
  std::size_t count = 0;
  std::size_t first = 0;
  bool done = true;               // false: pending (graph and flags only)
  std::uint64_t graph_bytes = 600;
  std::uint64_t neff_bytes = 1024;
};
std::uint64_t write_bulk_entries(const fs::path& cache_dir, const BulkSpec& spec);
// The entry path of bulk entry i.
[[nodiscard]] fs::path bulk_entry_dir(const fs::path& cache_dir, const BulkSpec& spec, std::size_t i);
// Days since entry i's last use: spread from 31 to 400 (all past the
// default 30-day TTL, so the eviction pass is free to take them).
[[nodiscard]] double bulk_age_days(std::size_t i);

} // namespace bench
