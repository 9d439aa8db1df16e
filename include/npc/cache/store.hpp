#pragma once
// The persistent cache as a whole: where it is, the listing of its entries,
// and (in a directory) its private folder, trust mode and the trash that
// removals go through. One entry's files, states and publish sequence are
// entry.hpp's.
//
// A cache is in a local directory, or in any other storage (an object
// store: s3://bucket/prefix). Both hold the same layout and every entry
// works the same way over its storage; they differ in how the cache is read
// (reading_way.hpp: a directory in place, entry by entry with its
// summaries; another storage through its requests, in one walk) and in what
// it keeps besides its entries (keeping_way.hpp: a directory's private
// folder, trash and flocked eviction lock; another storage's eviction lock
// object), both chosen once where the cache is made.

#include <array>
#include <chrono>
#include <functional>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <npc/cache/entry.hpp>
#include <npc/cache/keeping_way.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/reading_way.hpp>
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
  // A cache in a storage that is no local directory. `connections` are
  // storages of that one cache (at least one): work on many entries (verify,
  // eviction) is shared out over them, a thread each.
  explicit Cache(std::vector<std::shared_ptr<storage::Storage>> connections,
                 const util::Clock& clock = util::SystemClock::instance());

  // Whether the cache is a local directory (root(), private_dir() and the
  // trust mode mean something only then).
  [[nodiscard]] bool is_directory() const { return !root_.empty(); }
  // The cache as users name it: its path, or its URL.
  [[nodiscard]] std::string describe() const;
  // Where one entry of this cache is, as users name it: its folder's path,
  // or its URL.
  [[nodiscard]] std::string describe(const EntryInfo& entry) const;

  [[nodiscard]] const fs::path& root() const { return root_; }
  [[nodiscard]] const util::Clock& clock() const { return clock_; }
  [[nodiscard]] fs::path entry_dir(const CacheKey& key) const { return root_ / key.relative_path(); }
  [[nodiscard]] Entry entry(const CacheKey& key) const {
    return Entry(*this, entry_dir(key), key.relative_path().generic_string());
  }
  [[nodiscard]] Entry entry(fs::path dir) const { return Entry(*this, std::move(dir)); }
  // As entry(dir), through connection `connection` (of connections()).
  [[nodiscard]] Entry entry(fs::path dir, std::size_t connection) const;
  [[nodiscard]] fs::path private_dir() const;
  // Where the entries' files are (the root, a local directory, or the
  // first connection).
  [[nodiscard]] const std::shared_ptr<storage::Storage>& storage() const { return storage_; }
  [[nodiscard]] const std::vector<std::shared_ptr<storage::Storage>>& connections() const { return connections_; }
  // Calls work(connection, i) for each i in [0, count): over every
  // connection at once for a cache with several, else over a few threads
  // sharing the one (a directory's work waits on the kernel).
  void share_out(std::size_t count, const std::function<void(std::size_t connection, std::size_t i)>& work) const;

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
  // A listed entry as it is now (ReadingWay::look_again).
  [[nodiscard]] Result<EntryInfo> look_again(const Entry& entry, const EntryInfo& listed) const;

  // How this cache is read (reading_way.hpp): what Entry asks to look at
  // one of its entries.
  [[nodiscard]] const ReadingWay& reading() const { return *reading_; }
  // What it keeps besides its entries (keeping_way.hpp): its set-up, trash
  // and eviction lock.
  [[nodiscard]] const KeepingWay& keeping() const { return *keeping_; }

  // Empties the trash left by an interrupted removal.
  void empty_trash() const;

private:
  fs::path root_; // empty for a cache that is no directory
  std::shared_ptr<storage::Storage> storage_;
  std::vector<std::shared_ptr<storage::Storage>> connections_;
  const ReadingWay* reading_; // chosen by the constructor: reading_way.hpp
  const KeepingWay* keeping_; // and keeping_way.hpp
  TrustMode trust_;
  const util::Clock& clock_;
  std::chrono::seconds stale_lock_age_ = std::chrono::duration_cast<std::chrono::seconds>(storage::kDefaultStaleLockAge);
  std::chrono::nanoseconds summary_settle_time_ = kSummarySettleTime;
};

// The tool name written into lock records by this process.
void set_lock_tool_name(std::string name);
[[nodiscard]] const std::string& lock_tool_name();

} // namespace npc::cache
