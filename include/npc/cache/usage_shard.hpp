#pragma once
// The text of one file of the usage counters (usage_stats.hpp): what it
// counts, per program, and when the counters were last zeroed.
//
//   {"programs":{"neuron_cc_wrapper":{"hits":3,"hits_without_time":0,"misses":1,
//     "failed":0,"compile_seconds":12.5,"saved_seconds":37.5}},"zeroed_unix":1790000000}
//
// The file lives in a shared directory, so its text is read strictly, and
// text that is not a shard's is torn, whatever tore it: a write a crash cut
// short, garbage, a value of the wrong type, or a value out of the range any
// count of ours can reach (a negative count, 1e30 misses, a compile time of
// millions of years, a reset before 1970 or after 2100). A torn shard counts
// nothing; the reader says why. Out-of-range values are refused here rather
// than clamped where they are shown: a count converted from out of range is
// undefined behaviour, and a shard that holds one holds nothing to believe.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <npc/util/result.hpp>

namespace npc::cache {

// No count of ours reaches 2^53 (a million hits a second for 285 years),
// and below it every JSON reader that holds numbers as doubles (jq,
// JavaScript) reads a count exactly. Sums stop there too (saturate).
inline constexpr std::uint64_t kMaxUsageCount = std::uint64_t{1} << 53;
// Seconds of compiling (or saved) past 1e13, 317,000 years, are none of
// ours, and stay far below where shown as hours and minutes they would
// overflow a 64-bit integer (9.2e18). Sums stop there too.
inline constexpr double kMaxUsageSeconds = 1e13;
// When the counters were zeroed, in seconds since 1970: not past 2100
// (4102444800), long before a system_clock time point (nanoseconds since
// 1970 in 64 bits) overflows in 2262.
inline constexpr std::int64_t kMaxZeroedUnix = 4'102'444'800;

struct UsageCounts {
  std::uint64_t hits = 0;              // served from the cache, nothing compiled
  std::uint64_t hits_without_time = 0; // of which the entry had no compile time recorded
  std::uint64_t misses = 0;            // compiled
  std::uint64_t failed = 0;            // the compile failed, or a cached failure was given
  double compile_seconds = 0;          // spent compiling (the misses and the failures)
  double saved_seconds = 0;            // what the hits' compiles took when they ran

  // Adds, each counter stopping at its largest value (kMaxUsageCount,
  // kMaxUsageSeconds), so that a sum is always in range.
  UsageCounts& operator+=(const UsageCounts& other);
  [[nodiscard]] bool empty() const { return hits == 0 && misses == 0 && failed == 0; }
};

struct UsageShard {
  std::map<std::string, UsageCounts, std::less<>> by_program;
  std::int64_t zeroed_unix = 0; // 0: never zeroed
};

// A shard's text; empty text (a shard just created) counts nothing. Fails,
// saying why, when the text is torn (see above).
[[nodiscard]] Result<UsageShard> parse_usage_shard(std::string_view text);
[[nodiscard]] std::string serialize_usage_shard(const UsageShard& shard);

} // namespace npc::cache
