#pragma once
// The persistent cache as a whole: its root and private folder, its trust
// mode, the listing of its entries, and the trash that removals go through.
// One entry's files, states and publish sequence are entry.hpp's.

#include <array>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <npc/cache/entry.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/summary.hpp>
#include <npc/cache/trust.hpp>
#include <npc/storage/lock.hpp>
#include <npc/storage/storage.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

// How many entries are in each state, their size and the span of their
// uses: what `neuron_cache stats` shows, counted without an EntryInfo per
// entry.
struct CacheCensus {
  std::size_t entries = 0;
  std::array<std::size_t, 6> by_state{}; // indexed by EntryState
  std::uint64_t bytes = 0;
  std::optional<util::WallTime> oldest_use, newest_use;

  void count(EntryState state, std::uint64_t entry_bytes, util::WallTime last_used);
  [[nodiscard]] std::size_t in_state(EntryState state) const { return by_state[static_cast<std::size_t>(state)]; }
};

class Cache {
public:
  // The trust mode comes from the environment (see trust.hpp).
  explicit Cache(fs::path root, const util::Clock& clock = util::SystemClock::instance());
  Cache(fs::path root, TrustMode trust, const util::Clock& clock = util::SystemClock::instance());

  [[nodiscard]] const fs::path& root() const { return root_; }
  [[nodiscard]] const util::Clock& clock() const { return clock_; }
  [[nodiscard]] fs::path entry_dir(const CacheKey& key) const { return root_ / key.relative_path(); }
  [[nodiscard]] Entry entry(const CacheKey& key) const {
    return Entry(*this, entry_dir(key), key.relative_path().generic_string());
  }
  [[nodiscard]] Entry entry(fs::path dir) const { return Entry(*this, std::move(dir)); }
  [[nodiscard]] fs::path private_dir() const;
  // Where the entries' files are (the root, a local directory).
  [[nodiscard]] const std::shared_ptr<storage::Storage>& storage() const { return storage_; }

  // Creates the root (0700, or 2770 for a shared cache) and our private
  // folder; an existing root must pass the trust check.
  [[nodiscard]] Status ensure_root() const;
  [[nodiscard]] TrustMode trust() const { return trust_; }

  // Past this age a lock whose owner cannot be proved alive is stale
  // (storage/lock.hpp); --lock-timeout sets it.
  void set_stale_lock_age(std::chrono::seconds age) { stale_lock_age_ = age; }
  [[nodiscard]] std::chrono::seconds stale_lock_age() const { return stale_lock_age_; }

  // A listing records the entries it found settled in a summary per
  // compiler version (summary.hpp); this says how long an entry must have
  // been left alone first (tests shorten it).
  void set_summary_settle_time(std::chrono::nanoseconds time) { summary_settle_time_ = time; }
  [[nodiscard]] std::chrono::nanoseconds summary_settle_time() const { return summary_settle_time_; }

  // Every entry of every compiler version, in no particular order.
  [[nodiscard]] std::vector<EntryInfo> list() const;
  // Every entry of one compiler version.
  [[nodiscard]] std::vector<EntryInfo> list_version(const std::string& compiler_version) const;
  // What list() would find, counted.
  [[nodiscard]] CacheCensus census() const;

  // Empties the trash left by an interrupted removal.
  void empty_trash() const;

private:
  fs::path root_;
  std::shared_ptr<storage::Storage> storage_;
  TrustMode trust_;
  const util::Clock& clock_;
  std::chrono::seconds stale_lock_age_ = std::chrono::duration_cast<std::chrono::seconds>(storage::kDefaultStaleLockAge);
  std::chrono::nanoseconds summary_settle_time_ = kSummarySettleTime;
};

// The tool name written into lock records by this process.
void set_lock_tool_name(std::string name);
[[nodiscard]] const std::string& lock_tool_name();

} // namespace npc::cache
