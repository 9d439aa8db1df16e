#pragma once
// What a pre-compile leaves in its cache, so that a later look can tell
// which graphs were compiled after it and why (misses.hpp, `neuron_cache
// misses`): one record per launcher run that compiled, in
// .npc/precompiles/ of the cache every host sees (the shared store of a
// cache named by URL), named so that names sort by start:
//
//   .npc/precompiles/20261129T100000Z-<host>-<pid>.json
//   {"format": 1, "started": "2026-11-29T10:00:00.120Z", "ended": "...",
//    "host": "ip-10-0-0-1", "pid": 4242, "compiler_version": "2.15.128.0",
//    "graphs": [{"key": "neuronxcc-2.15.128.0/MODULE_1+abcd", "outcome": "compiled"}]}
//
// outcome: "compiled", "cached" (done before the run), "compiled_elsewhere"
// (by another process meanwhile), "failed", or "left" (pending at the end:
// held by another host, or removed). The launchers of one cluster run each
// write their own; their times overlap. A writer keeps the newest
// kKeptPrecompileRecords and removes older ones; a record that cannot be
// read is skipped with a warning, never an error.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cache/key.hpp>
#include <npc/storage/storage.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

inline constexpr std::string_view kPrecompilesDir = ".npc/precompiles";
inline constexpr std::size_t kKeptPrecompileRecords = 16;
// A record of 100,000 graphs is about 10 MB.
inline constexpr std::uint64_t kMaxPrecompileRecordBytes = 64ull << 20;

struct PrecompileGraph {
  std::string key; // CacheKey::str()
  std::string outcome;
};

struct PrecompileRecord {
  std::string name; // its file name in kPrecompilesDir (set when written or read)
  util::WallTime started;
  util::WallTime ended;
  std::string host;
  std::int64_t pid = 0;
  std::string compiler_version;
  std::vector<PrecompileGraph> graphs;
};

[[nodiscard]] std::string serialize_precompile_record(const PrecompileRecord& record);
[[nodiscard]] Result<PrecompileRecord> parse_precompile_record(std::string_view json_text);

// Writes `record` (its name made from its start, host and pid) and removes
// all but the newest kKeptPrecompileRecords. The removal's errors are
// ignored: an older record left is harmless.
[[nodiscard]] Status write_precompile_record(storage::Storage& storage, PrecompileRecord& record);
// Every readable record, oldest first.
[[nodiscard]] Result<std::vector<PrecompileRecord>> read_precompile_records(const storage::Storage& storage);

// The records of the last pre-compile: the newest record and every other
// whose run overlapped it in time (the launchers of one cluster run).
// Empty when there is none.
[[nodiscard]] std::vector<PrecompileRecord> last_precompile(std::vector<PrecompileRecord> oldest_first);
// When the run of `records` ended: the latest end among them (the epoch
// for none).
[[nodiscard]] util::WallTime precompile_end(const std::vector<PrecompileRecord>& records);
// The keys of the graphs the run of `records` took, each once, sorted (so
// that every look at the trial's graphs meets them in one order); a key
// that does not parse is left out.
[[nodiscard]] std::vector<CacheKey> precompile_keys(const std::vector<PrecompileRecord>& records);

} // namespace npc::cache
