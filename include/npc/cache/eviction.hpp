#pragma once
// Eviction, as torch-neuronx documents it: while the cache is larger than its
// limit, delete entries least recently used first; an entry used within the
// TTL is never deleted (even if the cache stays over the limit), nor is one a
// compile holds locked, nor a pending one: a graph waiting for its compile is
// small and is someone's extracted work (a launcher may have it queued).
// One process evicts at a time; the others skip (the cache's eviction lock:
// keeping_way.hpp).
//
// A cache in a directory is evicted after writes, at most once a minute
// (evict_after_write). A cache in another storage (S3) is never evicted
// behind the user's back: only `neuron_cache prune` does it, since the
// bucket is shared by every node and its size is the bucket owner's call.
// There an entry's last use is its use record's time (store.hpp), and each
// removal is a listing and a delete per object, shared out over the
// cache's connections.

#include <chrono>
#include <cstdint>
#include <vector>

#include <npc/cache/leftover_temps.hpp>
#include <npc/cache/store.hpp>

namespace npc::cache {

struct EvictionPolicy {
  std::uint64_t max_bytes = 0;
  std::chrono::seconds ttl{0};
};

enum class DryRun { no, yes };

struct EvictionReport {
  bool ran = false;               // false when another process was evicting
  std::uint64_t bytes_before = 0;
  std::uint64_t bytes_after = 0;  // what remains (or would remain, in a dry run)
  std::size_t entries_before = 0;
  std::vector<EntryInfo> deleted; // in deletion order
  std::size_t kept_by_ttl = 0;    // over the limit but used within the TTL
  std::size_t kept_locked = 0;
  std::size_t kept_pending = 0;   // graphs waiting to be compiled: never evicted
  std::size_t stale_temps_removed = 0;
};

// After a write, a full eviction scan runs at most this often: a scan of a
// large cache costs about a second, a write happens per graph.
inline constexpr auto kEvictionInterval = std::chrono::seconds(60);

// The deletion order for `entries` under `policy` at `now` (pure, for tests
// and --dry-run).
[[nodiscard]] std::vector<const EntryInfo*> plan_eviction(const std::vector<EntryInfo>& entries,
                                                          const EvictionPolicy& policy,
                                                          util::WallTime now,
                                                          std::size_t* kept_by_ttl = nullptr,
                                                          std::size_t* kept_locked = nullptr,
                                                          std::size_t* kept_pending = nullptr);

// Runs one eviction pass now (skipped, ran=false, if another process is
// evicting). Also removes stale temp files and leftover trash.
[[nodiscard]] EvictionReport evict(const Cache& cache, const EvictionPolicy& policy,
                                   DryRun dry_run = DryRun::no);

// After a write: evicts if the last pass is older than kEvictionInterval.
void evict_after_write(const Cache& cache, const EvictionPolicy& policy);

} // namespace npc::cache
