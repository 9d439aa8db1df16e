#include <npc/launcher/graph_source.hpp>

#include <spdlog/spdlog.h>

#include <npc/cache/key.hpp>
#include <npc/storage/open.hpp>

namespace npc::launcher {

namespace {

// The pool's look at a graph another host holds (pool_runner.hpp), over one
// connection of the shared tier (cache/shared_tier.hpp): not for several
// threads at once.
//
// Many graphs due a look at once are listed in one walk of their version
// folder when that takes fewer LISTs than one each (`version_objects`, the
// folder's size when the graphs were taken, grown threefold as results land;
// unknown: one each). A lock object seen again unchanged is judged from what
// was read of it (cache::LockMemo): looks at a graph held for minutes cost
// the listing, and a read per renewal of its lock.
class SharedEntryLook final : public HeldEntryLook {
public:
  SharedEntryLook(std::shared_ptr<storage::Storage> connection, const cache::Cache& mirror, bool retry_failed,
                  cache::DownloadResult download, std::optional<std::size_t> version_objects)
      : shared_(std::move(connection), mirror), retry_failed_(retry_failed), download_(download),
        version_objects_(version_objects) {}
  [[nodiscard]] Pool::Found look(const fs::path& entry_dir) override {
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
      auto looked = shared_.look_all(keys, retry_failed_, download_, memo_, cache::LookListing::whole_version_folder);
      for (std::size_t k = 0; k < keys.size(); ++k) found[places[k]] = from(looked[k]);
      return found;
    }
    for (std::size_t k = 0; k < keys.size() && !out_of_time(); ++k)
      found[places[k]] =
          from(shared_.look_all({keys[k]}, retry_failed_, download_, memo_, cache::LookListing::each_entry).front());
    return found;
  }
  [[nodiscard]] bool downloads() const override { return download_ == cache::DownloadResult::yes; }

private:
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

  cache::SharedTier shared_;
  bool retry_failed_;
  cache::DownloadResult download_;
  std::optional<std::size_t> version_objects_;
  cache::LockMemo memo_;
};

} // namespace

GraphSource::GraphSource(const cache::Cache& cache, const config::Settings& settings,
                         const std::string& compiler_version)
    : cache_(cache), url_(settings.shared_cache_url) {
  if (url_) shared_.emplace(storage::open(*url_, kSharedTierConnections), cache, *url_, compiler_version);
}

std::shared_ptr<storage::Storage> GraphSource::open_common_storage() const {
  return url_ ? storage::open(*url_).front() : cache_.storage();
}

bool GraphSource::brings(const std::string& line) const { return shared_ && storage::is_url(line); }

void GraphSource::collect(Collector& collector, const std::vector<NamedGraph>& named) {
  std::vector<std::string> urls;
  if (shared_)
    for (const auto& one : named)
      if (storage::is_url(one.text)) urls.push_back(one.text);
  std::vector<SharedGraphs::Taken> taken = shared_ ? shared_->take_all(urls) : std::vector<SharedGraphs::Taken>();
  std::size_t next_url = 0;
  for (const auto& [text, source] : named) {
    if (!storage::is_url(text)) {
      collector.add_graph_path(text, source);
    } else if (!shared_) {
      collector.refuse(text, source,
                       "a graph in a shared cache, but the launcher's cache is " + cache_.describe() +
                           " (set NEURON_COMPILE_CACHE_URL to that cache, and the launcher compiles into it)");
    } else {
      const auto& one = taken[next_url++];
      if (one.graph) collector.add_graph_path(one.graph->string(), source);
      else if (!one.refused.empty()) collector.refuse(text, source, one.refused);
    }
  }
}

void GraphSource::collect_shared_pending(Collector& collector, bool with_failed) {
  if (!shared_) return;
  for (const auto& entry : shared_->take_pending(with_failed)) collector.add_entry_dir(entry);
}

std::optional<std::uint64_t> GraphSource::graph_bytes_later(const fs::path& entry_dir) const {
  return shared_ ? shared_->brought_later(entry_dir) : std::nullopt;
}

void GraphSource::log_transfers() const {
  if (!shared_) return;
  if (shared_->results_downloaded() > 0)
    spdlog::info("{} result(s) already in {} downloaded into {}", shared_->results_downloaded(), *url_,
                 cache_.describe());
  if (shared_->results_uploaded() > 0)
    spdlog::info("{} result(s) of {} that {} lacked uploaded", shared_->results_uploaded(), cache_.describe(), *url_);
}

std::optional<std::string> GraphSource::held_elsewhere(const fs::path& entry_dir) const {
  return shared_ ? shared_->held_elsewhere(entry_dir) : std::nullopt;
}

std::shared_ptr<HeldEntryLook> GraphSource::held_look(bool retry_failed, cache::DownloadResult download) const {
  // Over a connection already open: the graphs are all brought by now.
  if (!shared_) return nullptr;
  return std::make_shared<SharedEntryLook>(shared_->connection(), cache_, retry_failed, download,
                                           shared_->version_objects());
}

} // namespace npc::launcher
