#include <npc/cluster/shared_entry_look.hpp>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <sys/eventfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/listing.hpp>
#include <npc/cluster/transfer_threads.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/strings.hpp>

namespace npc::cluster {

namespace {

class SharedEntryLook final : public HeldEntryLook {
public:
  SharedEntryLook(std::shared_ptr<storage::Storage> connection,
                  std::vector<std::shared_ptr<storage::Storage>> transfer_connections, const cache::Cache& mirror,
                  bool retry_failed, cache::DownloadResult download, std::optional<std::size_t> version_objects,
                  std::map<std::string, std::string> flags_by_hash)
      : shared_(std::move(connection), mirror), retry_failed_(retry_failed), download_(download),
        version_objects_(version_objects), transfer_connections_(transfer_connections),
        flags_by_hash_(std::move(flags_by_hash)),
        wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), transfers_(std::move(transfer_connections), mirror) {
    if (!wake_.valid())
      spdlog::warn("cannot make an eventfd ({}): the launcher waits for the shared locks it takes together "
                   "before it goes on",
                   std::strerror(errno));
    memo_.presume_held_from_now();
  }
  [[nodiscard]] cache::Found look(const fs::path& entry_dir) override {
    // At a pick: the launcher looks at graph after graph, most of them
    // done or held by other hosts, until one is free. One walk answers for
    // all of them while it is recent; the lock taken next decides the rest.
    auto key = cache::parse_key(entry_dir.string());
    if (key && version_objects_ && listing_pages() <= kMaxPickWalkPages)
      if (const auto* walk = recent_walk(*key, kWalkReuse))
        return shared_.look_in_walk({*key}, *walk, retry_failed_, download_, memo_).front();
    return *look_all({entry_dir}, [] { return false; }).front();
  }
  [[nodiscard]] std::optional<std::chrono::system_clock::time_point>
  lease_ends(const fs::path& entry_dir) const override {
    auto key = cache::parse_key(entry_dir.string());
    if (!key) return std::nullopt;
    return memo_.lease_ends(shared_.lock_key(*key));
  }
  [[nodiscard]] std::vector<std::optional<cache::Found>> look_all(const std::vector<fs::path>& entry_dirs,
                                                                 const std::function<bool()>& out_of_time) override {
    std::vector<std::optional<cache::Found>> found(entry_dirs.size());
    std::vector<cache::CacheKey> keys;
    std::vector<std::size_t> places;
    for (std::size_t i = 0; i < entry_dirs.size(); ++i) {
      auto key = cache::parse_key(entry_dirs[i].string());
      // Not an entry the shared tier names: the worker says what is wrong.
      if (!key) found[i] = cache::Found::pending;
      else {
        keys.push_back(*key);
        places.push_back(i);
      }
    }
    if (keys.empty()) return found;
    if (version_objects_ && keys.size() > listing_pages() * kEntryListsPerWalkPage) {
      if (const auto* walk = recent_walk(keys.front(), kRevisitWalkReuse)) {
        auto looked = shared_.look_in_walk(keys, *walk, retry_failed_, download_, memo_);
        for (std::size_t k = 0; k < keys.size(); ++k) found[places[k]] = looked[k];
        return found;
      }
    }
    for (std::size_t k = 0; k < keys.size() && !out_of_time(); ++k)
      found[places[k]] =
          shared_.look_all({keys[k]}, retry_failed_, download_, memo_, cache::LookListing::each_entry).front();
    return found;
  }
  [[nodiscard]] bool downloads() const override { return download_ == cache::DownloadResult::yes; }

  void begin_take(std::size_t item, const fs::path& entry_dir) override {
    auto key = cache::parse_key(entry_dir.string());
    if (!key) {
      std::lock_guard guard(ended_mutex_);
      ended_.push_back(
          {item, entry_dir.string(), std::nullopt, Take::left_to_worker(), std::nullopt, std::nullopt, false, {}, {}});
      wake();
      return;
    }
    // A graph the last look showed free is usually taken since by another
    // host, whose fresh lock needs no reading: one create says so. Found
    // free again later, its lock is judged (and broken when stale).
    const bool create_only = !created_over_.contains(entry_dir.string());
    {
      std::lock_guard guard(ended_mutex_);
      ++takes_running_;
    }
    transfers_.add_first([this, item, key = *key, dir = entry_dir.string(), create_only](const cache::SharedTier& tier) {
      Ended ended = take(tier, item, key, dir, create_only);
      {
        std::lock_guard guard(ended_mutex_);
        ended_.push_back(std::move(ended));
        --takes_running_;
      }
      take_ended_.notify_all();
      wake();
    });
  }

  [[nodiscard]] std::vector<TakeEnded> takes_ended() override {
    std::uint64_t count = 0;
    if (wake_.valid()) std::ignore = ::read(wake_.get(), &count, sizeof count);
    std::vector<Ended> ended;
    {
      std::unique_lock guard(ended_mutex_);
      // No eventfd (out of descriptors): a take that ends on a thread could
      // go unseen for a whole tick, so the takes begun are waited for here
      // (together, as they run).
      if (!wake_.valid()) take_ended_.wait(guard, [this] { return takes_running_ == 0; });
      ended.swap(ended_);
    }
    std::vector<TakeEnded> takes;
    for (auto& e : ended) {
      if (e.lock) taken_.insert_or_assign(e.entry_dir, Taken{*e.key, std::move(*e.lock), std::move(e.listed)});
      if (e.created_over) created_over_.insert(e.entry_dir);
      // What was read of it spares the next look its reading while unchanged.
      if (e.held_facts) memo_.remember(shared_.lock_key(*e.key), *e.held_facts);
      takes.push_back({e.item, e.take, std::move(e.how)});
    }
    return takes;
  }

  [[nodiscard]] int wake_fd() const override { return wake_.get(); }

  void attempt_ended(const fs::path& entry_dir) override {
    auto it = taken_.find(entry_dir.string());
    if (it == taken_.end()) return;
    transfers_.upload(it->second.key, std::move(it->second.lock), std::move(it->second.listed));
    taken_.erase(it);
  }

  void finish() override {
    transfers_.wait();
    // Takes that ended after the run stopped (interrupted): no worker got
    // their locks.
    std::vector<Ended> left;
    {
      std::lock_guard guard(ended_mutex_);
      left.swap(ended_);
    }
    for (auto& e : left)
      if (e.lock) transfers_.upload(*e.key, std::move(*e.lock), std::move(e.listed));
    for (auto& [dir, held] : taken_) transfers_.upload(held.key, std::move(held.lock), std::move(held.listed));
    taken_.clear();
    transfers_.wait();
  }

private:
  // A take that ended (on a transfer thread), for takes_ended to pass on.
  struct Ended {
    std::size_t item = 0;
    std::string entry_dir;
    std::optional<cache::CacheKey> key;
    Take take = Take::left_to_worker();
    std::optional<storage::Lock> lock;          // taken, for the worker
    std::optional<storage::LockFacts> held_facts; // held, as read
    bool created_over = false;                  // held, as a create found it
    std::vector<std::string> listed;            // taken: the entry's files, listed under the lock
    std::string how;                            // failed: who failed it in this run, and how
  };
  // A lock held for a running worker, and what its upload starts from.
  struct Taken {
    cache::CacheKey key;
    storage::Lock lock;
    std::vector<std::string> listed;
  };

  void wake() {
    if (!wake_.valid()) return;
    const std::uint64_t one = 1;
    std::ignore = ::write(wake_.get(), &one, sizeof one);
  }

  // On a transfer thread, over its connection: the lock, then the graph.
  Ended take(const cache::SharedTier& tier, std::size_t item, const cache::CacheKey& key, const std::string& entry_dir,
             bool create_only) const {
    Ended ended{item, entry_dir, key, Take::left_to_worker(), std::nullopt, std::nullopt, false, {}, {}};
    if (create_only) {
      auto created = tier.try_create_lock(key);
      if (!created) {
        // The worker meets the same trouble and reports it with its graph.
        spdlog::debug("cannot take the lock of {}: {}; its worker tries", tier.describe(key), created.error());
        return ended;
      }
      if (*created) return with_graph(tier, std::move(ended), std::move(**created));
      ended.take = Take::as_found(cache::Found::held_elsewhere);
      ended.created_over = true;
      return ended;
    }
    auto got = tier.try_lock(key);
    if (!got) {
      spdlog::debug("cannot take the lock of {}: {}; its worker tries", tier.describe(key), got.error());
      return ended;
    }
    if (auto* taken = std::get_if<storage::Lock>(&*got)) return with_graph(tier, std::move(ended), std::move(*taken));
    ended.take = Take::as_found(cache::Found::held_elsewhere);
    ended.held_facts = std::get<storage::Lock::Held>(*got).facts;
    return ended;
  }

  // A lock just taken. The entry is listed first: the look that showed it
  // free may be older than a whole compile of another host, which took the
  // lock, published and let go meanwhile. Then the graph comes into the
  // mirror, so that the worker compiles there alone, as in a directory (no
  // S3 client of its own). A result there (downloaded by a worker when this
  // run downloads them), a graph not brought (S3 failing, the graph
  // removed): the lock goes and the worker does what is left, and reports
  // what it meets.
  Ended with_graph(const cache::SharedTier& tier, Ended ended, storage::Lock lock) const {
    const cache::CacheKey& key = *ended.key;
    auto let_go = [&](Take take) {
      if (auto s = lock.release(); !s)
        spdlog::warn("cannot release the lock of {}: {} (it frees itself at its expiry)", tier.describe(key),
                     s.error());
      ended.take = take;
      return std::move(ended);
    };
    auto names = tier.storage()->list(key.relative_path().generic_string());
    if (!names) {
      spdlog::debug("cannot look at {}: {}; its worker tries", tier.describe(key), names.error());
      return let_go(Take::left_to_worker());
    }
    const cache::ListedEntry listed = cache::read_listing(*names);
    if (listed.done && download_ == cache::DownloadResult::no) return let_go(Take::as_found(cache::Found::done));
    if (auto how = failed_for_good_in_run(tier, key, *names, listed)) {
      ended.how = std::move(*how);
      return let_go(Take::as_found(cache::Found::failed));
    }
    if (listed.done || listed.done_without_neff || listed.failed) return let_go(Take::left_to_worker());
    const std::optional<std::string> flags = known_flags(key);
    auto graph = tier.fetch_graph(key, flags);
    if (graph && *graph && !flags) learn_flags(key, tier.mirror().entry(key).dir());
    if (!graph || !*graph) {
      if (!graph) spdlog::debug("cannot bring the graph of {}: {}; its worker tries", tier.describe(key), graph.error());
      return let_go(Take::left_to_worker());
    }
    ended.take = Take::taken();
    ended.lock = std::move(lock);
    ended.listed = std::move(*names);
    return ended;
  }

  // Whether the shared entry's record, read under its lock, says another
  // launcher of this run failed the graph for good: who and how. Its record
  // went up before its lock was let go (SharedTier::push_as_holder). Read only
  // where the listing shows a record and no result, which a graph that
  // never failed does not have: no request more for the others.
  std::optional<std::string> failed_for_good_in_run(const cache::SharedTier& tier, const cache::CacheKey& key,
                                                    const std::vector<std::string>& names,
                                                    const cache::ListedEntry& listed) const {
    if (run().empty() || listed.done || listed.done_without_neff || !util::contains(names, cache::kMetaFile))
      return std::nullopt;
    auto text = tier.storage()->read(key.relative_path().generic_string() + "/" + std::string(cache::kMetaFile),
                                     cache::kMaxEntryMetaBytes);
    if (!text) {
      spdlog::debug("cannot read the record of {}: {}", tier.describe(key), text.error());
      return std::nullopt;
    }
    auto meta = cache::parse_entry_meta(*text);
    if (!meta) return std::nullopt;
    const cache::AttemptRecord* failed = meta->failed_for_good_in(run());
    if (!failed) return std::nullopt;
    return cache::describe_run_failure(*failed);
  }

  // The graphs of a run share a few sets of flags, and an entry's key names
  // its flags by their hash: a take brings the flags of a hash it has seen
  // from memory, a GET fewer. Only flags that do hash to their key's are
  // remembered (not those of a key of an older release's scheme).
  std::optional<std::string> known_flags(const cache::CacheKey& key) const {
    std::lock_guard guard(flags_mutex_);
    auto it = flags_by_hash_.find(key.flags_hash);
    if (it == flags_by_hash_.end()) return std::nullopt;
    return it->second;
  }
  void learn_flags(const cache::CacheKey& key, const fs::path& entry_dir) const {
    auto text = util::read_file(entry_dir / cache::kFlagsFile);
    if (!text || !cache::compile_flags_hash_to(*text, key.flags_hash)) return;
    std::lock_guard guard(flags_mutex_);
    flags_by_hash_.emplace(key.flags_hash, std::move(*text));
  }

  // LISTs a walk of the version folder takes (1,000 objects a page).
  [[nodiscard]] std::size_t listing_pages() const { return (3 * *version_objects_) / 1000 + 1; }

  // A walk of `key`'s version folder at most kWalkReuse old, walked now if
  // none is; null when the walk fails (then each entry is listed).
  [[nodiscard]] const std::vector<storage::TreeFile>* recent_walk(const cache::CacheKey& key,
                                                                  std::chrono::milliseconds reuse) {
    const std::string version_dir = key.relative_path().parent_path().generic_string();
    const auto now = std::chrono::steady_clock::now();
    if (walk_ && walk_dir_ == version_dir && now - walked_at_ < reuse) return &*walk_;
    auto tree = shared_.storage()->list_tree(version_dir);
    if (!tree) {
      spdlog::warn("cannot look at {}: {}; looking at each graph instead", shared_.storage()->describe(version_dir),
                   tree.error());
      walk_.reset();
      return nullptr;
    }
    walk_ = std::move(*tree);
    walk_dir_ = version_dir;
    walked_at_ = now;
    return &*walk_;
  }

  cache::SharedTier shared_;
  bool retry_failed_;
  cache::DownloadResult download_;
  std::optional<std::size_t> version_objects_;
  cache::LockMemo memo_;
  std::vector<std::shared_ptr<storage::Storage>> transfer_connections_; // transfers_'s
  std::set<std::string> created_over_; // entries whose lock a create found there once
  std::optional<std::vector<storage::TreeFile>> walk_; // recent_walk's
  std::string walk_dir_;
  std::chrono::steady_clock::time_point walked_at_;
  // By entry folder: the locks held for running workers.
  std::map<std::string, Taken> taken_;
  mutable std::mutex flags_mutex_;
  mutable std::map<std::string, std::string> flags_by_hash_; // known_flags: compile_flags.json by flags hash
  std::mutex ended_mutex_;
  std::condition_variable take_ended_;
  std::vector<Ended> ended_;      // takes ended, not yet passed on
  std::size_t takes_running_ = 0; // begun and not ended
  util::UniqueFd wake_;      // an eventfd: a take ended
  // Last: its threads, which use the members above, end first.
  TransferThreads transfers_;
};

} // namespace

std::shared_ptr<HeldEntryLook> make_shared_entry_look(std::shared_ptr<storage::Storage> connection,
                                                      std::vector<std::shared_ptr<storage::Storage>> transfer_connections,
                                                      const cache::Cache& mirror, bool retry_failed,
                                                      cache::DownloadResult download,
                                                      std::optional<std::size_t> version_objects,
                                                      std::map<std::string, std::string> flags_by_hash) {
  return std::make_shared<SharedEntryLook>(std::move(connection), std::move(transfer_connections), mirror, retry_failed,
                                           download, version_objects, std::move(flags_by_hash));
}

} // namespace npc::cluster
