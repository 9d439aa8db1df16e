#pragma once
// How much the cache saved: hits, misses, failures, time spent compiling and
// compile time saved, counted per program that uses the cache
// (neuron_cc_wrapper as torch-neuronx starts it, neuronx-cc through the
// masquerade, neuron_parallel_compile), as ccache keeps its counters:
// under <root>/.npc/stats/, in kStatsShards small files (their text:
// usage_shard.hpp). A process adds to one of them under flock(2) on that
// file: read, add, write back in place. No update is lost however many
// processes count at once; `neuron_cache stats` sums the files,
// `neuron_cache stats --zero` empties them.
//
// Counting never fails or holds up what counts: a cache the process cannot
// write (a read-only one) serves and compiles as before, uncounted. A
// process counts in the first shard it can lock at once, starting from the
// one its pid names (so that concurrent processes seldom meet): a shard
// another process holds, or one that cannot be used, is passed over. Every
// shard is looked at before it is opened and again once open, and opened
// without blocking: a FIFO, a directory, a device or a symbolic link in a
// shard's place is never read or waited on.
//
// One rule for a shard whose text is not a shard's (torn: a write a crash
// cut short, garbage, values out of range, more than a shard can hold): its
// counters count as nothing, `stats` names it, and the next count in it, or
// `stats --zero`, rewrites it. Other shards that cannot be read (not a file,
// no permission, locked for longer than kShardLockWait) are named too; the
// counters of every other shard are still summed and shown.
//
// Time saved by a hit is what the entry's compile took when it was compiled
// (its record, npc-entry.json); an entry compiled by another tool has no such
// record and saves an unknown time, counted as hits_without_time.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cache/usage_shard.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

inline constexpr std::string_view kStatsDir = "stats"; // under the cache's private directory
inline constexpr int kStatsShards = 16;
// A shard is held for a read and a write of a few hundred bytes: a lock held
// for a second belongs to a process that is stopped (Ctrl-Z) or stuck. No
// count, look at the counters or zero waits longer than that for their locks,
// however many shards are held.
inline constexpr std::chrono::milliseconds kShardLockWait{1000};

// The programs, as the counters name them.
inline constexpr std::string_view kWrapperProgram = "neuron_cc_wrapper";
inline constexpr std::string_view kMasqueradeProgram = "neuronx-cc (masquerade)";
inline constexpr std::string_view kLauncherProgram = "neuron_parallel_compile";

// Why the counters of a shard (or of all of them) are not in the sums.
enum class ShardFault {
  torn,       // a regular file whose text is not a shard's (usage_shard.hpp)
  not_a_file, // a directory, FIFO, device, socket or symbolic link in its place
  inaccessible, // cannot be opened, read or written (permission, I/O error)
  busy,       // another process held its lock past kShardLockWait
  no_folder   // <private>/stats itself is not a directory: no shard is there
};

struct UnreadShard {
  fs::path path;      // the shard; for no_folder, the stats folder
  ShardFault fault;
  // What is there, or what could not be done: "FIFO" (not_a_file, no_folder),
  // "'p' has hits -5, ..." (torn), "opened to read: Permission denied"
  // (inaccessible), "locked by another process for over 1.0s" (busy).
  std::string detail;
};

struct UsageStats {
  std::map<std::string, UsageCounts, std::less<>> by_program;
  std::optional<util::WallTime> zeroed_at; // the last --zero, if any
  std::vector<UnreadShard> unread;         // whose counters are not in the sums
  [[nodiscard]] UsageCounts total() const;
};

// Adds `delta` to the counters of `program` in the cache whose private
// directory is `private_dir`. An error says why nothing was counted.
[[nodiscard]] Status record_usage(const fs::path& private_dir, std::string_view program, const UsageCounts& delta,
                                  std::chrono::milliseconds lock_wait = kShardLockWait);
// The counters summed over the shards that can be read, and the others with
// why; empty when none was ever written.
[[nodiscard]] UsageStats read_usage(const fs::path& private_dir,
                                    std::chrono::milliseconds lock_wait = kShardLockWait);

// What a zero did: the files put back in a shard's (or the folder's) place,
// and those it could not zero, with why.
struct ZeroReport {
  std::vector<UnreadShard> replaced; // removed (as they were found) and made again, empty
  std::vector<UnreadShard> left;     // not zeroed: their counters are as they were
};
// Empties every counter, remembering `now` as when. A folder or a shard that
// is not a regular file is removed and made again, but a directory that
// holds anything (never removed with what it holds).
[[nodiscard]] ZeroReport zero_usage(const fs::path& private_dir, util::WallTime now,
                                    std::chrono::milliseconds lock_wait = kShardLockWait);

// "3.json is a FIFO, not a file", "3.json is torn (...)": what keeps one
// shard out, for a message.
[[nodiscard]] std::string describe(const UnreadShard& shard);

// A hit on the done entry at `entry_dir`, with the time its compile took
// (nullopt: not recorded).
[[nodiscard]] UsageCounts hit_of(const fs::path& entry_dir);

} // namespace npc::cache
