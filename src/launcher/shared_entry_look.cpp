#include <npc/launcher/shared_entry_look.hpp>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include <npc/cache/key.hpp>
#include <npc/cache/listing.hpp>
#include <npc/launcher/result_uploads.hpp>

namespace npc::launcher {

namespace {

class SharedEntryLook final : public HeldEntryLook {
public:
  SharedEntryLook(std::shared_ptr<storage::Storage> connection,
                  std::vector<std::shared_ptr<storage::Storage>> upload_connections, const cache::Cache& mirror,
                  bool retry_failed, cache::DownloadResult download, std::optional<std::size_t> version_objects)
      : shared_(std::move(connection), mirror), retry_failed_(retry_failed), download_(download),
        version_objects_(version_objects), uploads_(std::move(upload_connections), mirror) {
    // A second of margin: S3's clock and ours are not the same clock.
    memo_.presume_held_since(std::chrono::system_clock::now() - std::chrono::seconds(1));
  }
  [[nodiscard]] Pool::Found look(const fs::path& entry_dir) override {
    // At a pick: the launcher looks at graph after graph, most of them
    // done or held by other hosts, until one is free. One walk answers for
    // all of them while it is recent; the lock taken next decides the rest.
    auto key = cache::parse_key(entry_dir.string());
    if (key && version_objects_ && listing_pages() <= kMaxPickWalkPages)
      if (const auto* walk = recent_walk(*key))
        return from(shared_.look_in_walk({*key}, *walk, retry_failed_, download_, memo_).front());
    return *look_all({entry_dir}, [] { return false; }).front();
  }
  [[nodiscard]] std::vector<std::optional<Pool::Found>> look_all(const std::vector<fs::path>& entry_dirs,
                                                                 const std::function<bool()>& out_of_time) override {
    std::vector<std::optional<Pool::Found>> found(entry_dirs.size());
    std::vector<cache::CacheKey> keys;
    std::vector<std::size_t> places;
    for (std::size_t i = 0; i < entry_dirs.size(); ++i) {
      auto key = cache::parse_key(entry_dirs[i].string());
      // Not an entry the shared tier names: the worker says what is wrong.
      if (!key) found[i] = Pool::Found::pending;
      else {
        keys.push_back(*key);
        places.push_back(i);
      }
    }
    if (keys.empty()) return found;
    if (version_objects_ && keys.size() > listing_pages()) {
      if (const auto* walk = recent_walk(keys.front())) {
        auto looked = shared_.look_in_walk(keys, *walk, retry_failed_, download_, memo_);
        for (std::size_t k = 0; k < keys.size(); ++k) found[places[k]] = from(looked[k]);
        return found;
      }
    }
    for (std::size_t k = 0; k < keys.size() && !out_of_time(); ++k)
      found[places[k]] =
          from(shared_.look_all({keys[k]}, retry_failed_, download_, memo_, cache::LookListing::each_entry).front());
    return found;
  }
  [[nodiscard]] bool downloads() const override { return download_ == cache::DownloadResult::yes; }

  [[nodiscard]] Take take_lock(const fs::path& entry_dir) override {
    auto key = cache::parse_key(entry_dir.string());
    if (!key) return Take::left_to_worker;
    if (!create_learned_) {
      // Once, before the first lock: where the server honours create-only
      // PUTs, a lock is one PUT, not a HEAD, a PUT, a pause and a GET.
      create_learned_ = true;
      auto exact = shared_.storage()->learn_exclusive_create();
      if (!exact) spdlog::debug("cannot tell whether {} honours create-only writes: {}", shared_.storage()->describe(),
                                exact.error());
      else spdlog::debug("{} {} create-only writes", shared_.storage()->describe(), *exact ? "honours" : "ignores");
    }
    // A graph the last look showed free is usually taken since by another
    // host, whose fresh lock needs no reading: one create says so. Found
    // free again later, its lock is judged (and broken when stale).
    if (!created_over_.contains(entry_dir.string())) {
      auto created = shared_.try_create_lock(*key);
      if (!created) {
        // The worker meets the same trouble and reports it with its graph.
        spdlog::debug("cannot take the lock of {}: {}; its worker tries", shared_.describe(*key), created.error());
        return Take::left_to_worker;
      }
      if (*created) return with_graph(*key, entry_dir, std::move(**created));
      created_over_.insert(entry_dir.string());
      return Take::held;
    }
    auto got = shared_.try_lock(*key);
    if (!got) {
      spdlog::debug("cannot take the lock of {}: {}; its worker tries", shared_.describe(*key), got.error());
      return Take::left_to_worker;
    }
    if (auto* taken = std::get_if<storage::Lock>(&*got)) return with_graph(*key, entry_dir, std::move(*taken));
    // What was read of it spares the next look its reading while unchanged.
    memo_.remember(shared_.lock_key(*key), std::get<storage::Lock::Held>(*got).facts);
    return Take::held;
  }

  void attempt_ended(const fs::path& entry_dir) override {
    auto it = taken_.find(entry_dir.string());
    if (it == taken_.end()) return;
    uploads_.add(it->second.first, std::move(it->second.second));
    taken_.erase(it);
  }

  void finish() override { uploads_.wait(); }

private:
  // A lock just taken. The entry is listed first: the look that showed it
  // free may be older than a whole compile of another host, which took the
  // lock, published and let go meanwhile. Then the graph comes into the
  // mirror, so that the worker compiles there alone, as in a directory (no
  // S3 client of its own). A result there (downloaded by a worker when this
  // run downloads them), a graph not brought (S3 failing, the graph
  // removed): the lock goes and the worker does what is left, and reports
  // what it meets.
  Take with_graph(const cache::CacheKey& key, const fs::path& entry_dir, storage::Lock lock) {
    auto let_go = [&](Take take) {
      if (auto s = lock.release(); !s)
        spdlog::warn("cannot release the lock of {}: {} (it frees itself at its expiry)", shared_.describe(key),
                     s.error());
      return take;
    };
    auto names = shared_.storage()->list(key.relative_path().generic_string());
    if (!names) {
      spdlog::debug("cannot look at {}: {}; its worker tries", shared_.describe(key), names.error());
      return let_go(Take::left_to_worker);
    }
    const cache::ListedEntry listed = cache::read_listing(*names);
    if (listed.done && download_ == cache::DownloadResult::no) return let_go(Take::done);
    if (listed.done || listed.done_without_neff || listed.failed) return let_go(Take::left_to_worker);
    auto graph = shared_.fetch_graph(key);
    if (!graph || !*graph) {
      if (!graph) spdlog::debug("cannot bring the graph of {}: {}; its worker tries", shared_.describe(key), graph.error());
      return let_go(Take::left_to_worker);
    }
    taken_.insert_or_assign(entry_dir.string(), std::pair{key, std::move(lock)});
    return Take::taken;
  }

  static Pool::Found from(cache::SharedLook look) {
    switch (look) {
    case cache::SharedLook::done: return Pool::Found::done;
    case cache::SharedLook::failed: return Pool::Found::failed;
    case cache::SharedLook::busy: return Pool::Found::locked;
    case cache::SharedLook::held: return Pool::Found::held_elsewhere;
    case cache::SharedLook::pending: break;
    }
    return Pool::Found::pending;
  }
  // LISTs a walk of the version folder takes (1,000 objects a page).
  [[nodiscard]] std::size_t listing_pages() const { return (3 * *version_objects_) / 1000 + 1; }

  // A walk of `key`'s version folder at most kWalkReuse old, walked now if
  // none is; null when the walk fails (then each entry is listed).
  [[nodiscard]] const std::vector<storage::TreeFile>* recent_walk(const cache::CacheKey& key) {
    const std::string version_dir = key.relative_path().parent_path().generic_string();
    const auto now = std::chrono::steady_clock::now();
    if (walk_ && walk_dir_ == version_dir && now - walked_at_ < kWalkReuse) return &*walk_;
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
  bool create_learned_ = false;
  std::set<std::string> created_over_; // entries whose lock a create found there once
  std::optional<std::vector<storage::TreeFile>> walk_; // recent_walk's
  std::string walk_dir_;
  std::chrono::steady_clock::time_point walked_at_;
  // By entry folder: the locks held for running workers.
  std::map<std::string, std::pair<cache::CacheKey, storage::Lock>> taken_;
  ResultUploads uploads_;
};

} // namespace

std::shared_ptr<HeldEntryLook> make_shared_entry_look(std::shared_ptr<storage::Storage> connection,
                                                      std::vector<std::shared_ptr<storage::Storage>> upload_connections,
                                                      const cache::Cache& mirror, bool retry_failed,
                                                      cache::DownloadResult download,
                                                      std::optional<std::size_t> version_objects) {
  return std::make_shared<SharedEntryLook>(std::move(connection), std::move(upload_connections), mirror, retry_failed,
                                           download, version_objects);
}

} // namespace npc::launcher
