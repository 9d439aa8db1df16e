#include <npc/cache/listing_way.hpp>

#include <chrono>

#include <npc/cache/layout.hpp>
#include <npc/cache/listing.hpp>
#include <npc/cache/store.hpp>
#include <npc/util/error.hpp>

namespace npc::cache {

namespace {

// The entries of one walk of `folder` ("" for all).
std::vector<EntryInfo> walk_entries(const Cache& cache, const std::string& folder) {
  const auto now = std::chrono::system_clock::now();
  const storage::Storage& storage = *cache.storage();
  auto files = storage.list_tree(folder);
  if (!files) throw EnvironmentError(files.error());
  auto entries = entries_from_tree(*files, folder);
  for (auto& info : entries) {
    // Rare, so judged (a read) only when a lock object is there. A done
    // entry is done whoever holds its lock, as in a directory.
    if (info.framework_lock.state != storage::LockState::absent && !(info.has_done && info.has_neff)) {
      auto judged = storage::judge_lock(storage, info.dir.generic_string() + "/" + std::string(kFrameworkLockFile),
                                        cache.stale_lock_age(), now);
      if (!judged) throw EnvironmentError(judged.error());
      info.framework_lock = std::move(*judged);
    }
    info.state = state_from_files(info, info.framework_lock.blocks());
  }
  return entries;
}

class WalkedListing final : public ListingWay {
public:
  std::vector<EntryInfo> list(const Cache& cache) const override { return walk_entries(cache, ""); }

  std::vector<EntryInfo> list_version(const Cache& cache, const std::string& compiler_version) const override {
    return walk_entries(cache, std::string(kVersionDirPrefix) + compiler_version);
  }

  CacheCensus census(const Cache& cache) const override {
    CacheCensus census;
    for (const auto& e : walk_entries(cache, "")) census.count(e.state, e.bytes, e.last_used);
    return census;
  }

  Result<EntryInfo> look_again(const Cache&, const Entry& entry, const EntryInfo&) const override {
    return entry.inspect();
  }
};

} // namespace

const ListingWay& walked_listing() {
  static const WalkedListing way;
  return way;
}

} // namespace npc::cache
