#pragma once
// What a cache keeps besides its entries, one of two ways chosen where the
// cache is made (store.hpp), so that its set-up and eviction never ask which
// storage the cache is in:
//  - a directory has a private folder (.npc): the root is made with the
//    mode its trust mode asks for; removed entries go through its trash;
//    one process evicts at a time by a flock on .npc/eviction.lock, as older
//    releases take it; eviction follows writes at most once a minute, by the
//    time of .npc/last-eviction, and removes the temps of dead writers
//    (directory_keeping.cpp);
//  - another storage has none of that: its owner made the bucket, a removal
//    deletes objects, and eviction (only `neuron_cache prune`: the bucket is
//    every node's) takes a lock object, renewed while the pass runs
//    (stored_keeping.cpp).

#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include <npc/util/clock.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

class Cache;
struct EntryInfo;

class KeepingWay {
public:
  // The cache's eviction lock, held while this lives.
  class EvictionHold {
  public:
    virtual ~EvictionHold() = default;
  };

  virtual ~KeepingWay() = default;
  // Cache::ensure_root.
  [[nodiscard]] virtual Status ensure_root(const Cache& cache) const = 0;
  // Cache::empty_trash.
  virtual void empty_trash(const Cache& cache) const = 0;
  // nullptr when another process evicts the cache now; what cannot be
  // written throws EnvironmentError.
  [[nodiscard]] virtual std::unique_ptr<EvictionHold> take_eviction_lock(const Cache& cache) const = 0;
  // After an eviction pass over `entries` (not a dry run), at `now`: the
  // number of dead writers' temps removed.
  virtual std::size_t after_eviction(const Cache& cache, const std::vector<EntryInfo>& entries,
                                     util::WallTime now) const = 0;
  // Whether a write is to be followed by an eviction pass now.
  [[nodiscard]] virtual bool evicts_after_write(const Cache& cache) const = 0;

  // The eviction lock as clear-locks leaves it: removed unless a live
  // holder is proved (any with `force`), or kept. Nothing when there is none.
  struct ClearedLock {
    std::filesystem::path where; // as users name it: a path, or a URL
    bool removed = false;        // else held, and kept
  };
  [[nodiscard]] virtual std::optional<ClearedLock> clear_eviction_lock(const Cache& cache, bool force) const = 0;
};

[[nodiscard]] const KeepingWay& directory_keeping();
[[nodiscard]] const KeepingWay& stored_keeping();

} // namespace npc::cache
