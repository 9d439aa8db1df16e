#include <npc/cache/keeping_way.hpp>

#include <chrono>
#include <string>

#include <spdlog/spdlog.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/store.hpp>
#include <npc/storage/lock.hpp>
#include <npc/util/error.hpp>

namespace npc::cache {

namespace {

class LockObjectEviction final : public KeepingWay::EvictionHold {
public:
  explicit LockObjectEviction(storage::Lock lock) : lock_(std::move(lock)) { lock_.keep_renewed(); }

private:
  storage::Lock lock_;
};

class StoredKeeping final : public KeepingWay {
public:
  Status ensure_root(const Cache&) const override { return ok_status(); } // the store's owner made the bucket

  void empty_trash(const Cache&) const override {} // a removal deletes objects: no trash

  // A lock object, renewed while a pass over a big cache takes its many
  // requests.
  std::unique_ptr<EvictionHold> take_eviction_lock(const Cache& cache) const override {
    auto taken = storage::Lock::try_acquire(cache.storage(), std::string(kStoredEvictionLock),
                                            util::LockHolder::self(lock_tool_name()),
                                            {storage::kLockTtl, cache.stale_lock_age()},
                                            std::chrono::system_clock::now());
    if (!taken) throw EnvironmentError(taken.error());
    if (auto* held = std::get_if<storage::Lock::Held>(&*taken)) {
      spdlog::debug("{} is being evicted: the lock {}", cache.describe(), held->facts.describe());
      return nullptr;
    }
    return std::make_unique<LockObjectEviction>(std::move(std::get<storage::Lock>(*taken)));
  }

  std::size_t after_eviction(const Cache&, const std::vector<EntryInfo>&, util::WallTime) const override {
    return 0; // no writer leaves temps in a store
  }

  // Only `neuron_cache prune` evicts a shared store.
  bool evicts_after_write(const Cache&) const override { return false; }

  // As an entry's lock object: only a live holder proved keeps it.
  std::optional<ClearedLock> clear_eviction_lock(const Cache& cache, bool force) const override {
    const std::string key(kStoredEvictionLock);
    auto facts = storage::judge_lock(*cache.storage(), key, cache.stale_lock_age(), std::chrono::system_clock::now());
    if (!facts) throw EnvironmentError(facts.error());
    if (facts->state == storage::LockState::absent) return std::nullopt;
    ClearedLock cleared{cache.storage()->describe(key), false};
    if (facts->owner_proved_alive() && !force) return cleared;
    if (auto s = cache.storage()->remove(key); !s) throw EnvironmentError(s.error());
    cleared.removed = true;
    return cleared;
  }
};

} // namespace

const KeepingWay& stored_keeping() {
  static const StoredKeeping way;
  return way;
}

} // namespace npc::cache
