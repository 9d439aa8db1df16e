#pragma once
// How much the cache saved: hits, misses, failures, time spent compiling and
// compile time saved, counted per program that uses the cache
// (neuron_cc_wrapper as torch-neuronx starts it, neuronx-cc through the
// masquerade, neuron_parallel_compile), as ccache keeps its counters:
// under <root>/.npc/stats/, in kStatsShards small files (their text:
// usage_shard.hpp). A process adds to
// one of them (chosen by its pid, so that concurrent processes seldom
// meet) under flock(2) on that file: read, add, write back in place. No
// update is lost however many processes count at once; `neuron_cache stats`
// sums the files, `neuron_cache stats --zero` empties them.
//
// Counting never fails what counts: a cache the process cannot write (a
// read-only one) serves and compiles as before, uncounted.
//
// Time saved by a hit is what the entry's compile took when it was compiled
// (its record, npc-entry.json); an entry compiled by another tool has no such
// record and saves an unknown time, counted as hits_without_time.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <npc/cache/usage_shard.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

inline constexpr std::string_view kStatsDir = "stats"; // under the cache's private directory
inline constexpr int kStatsShards = 16;

// The programs, as the counters name them.
inline constexpr std::string_view kWrapperProgram = "neuron_cc_wrapper";
inline constexpr std::string_view kMasqueradeProgram = "neuronx-cc (masquerade)";
inline constexpr std::string_view kLauncherProgram = "neuron_parallel_compile";

struct UsageStats {
  std::map<std::string, UsageCounts, std::less<>> by_program;
  std::optional<util::WallTime> zeroed_at; // the last --zero, if any
  [[nodiscard]] UsageCounts total() const;
};

// Adds `delta` to the counters of `program` in the cache whose private
// directory is `private_dir`. An error says why nothing was counted.
[[nodiscard]] Status record_usage(const fs::path& private_dir, std::string_view program, const UsageCounts& delta);
// The counters summed over the shards; empty when none was ever written.
[[nodiscard]] Result<UsageStats> read_usage(const fs::path& private_dir);
// Empties every counter, remembering `now` as when.
[[nodiscard]] Status zero_usage(const fs::path& private_dir, util::WallTime now);

// A hit on the done entry at `entry_dir`, with the time its compile took
// (nullopt: not recorded).
[[nodiscard]] UsageCounts hit_of(const fs::path& entry_dir);

} // namespace npc::cache
