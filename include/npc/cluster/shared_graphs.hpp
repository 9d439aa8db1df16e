#pragma once
// The launcher on a cache with a shared tier (cache/shared_tier.hpp: an S3
// cache, s3://bucket/prefix). The trial extracts each graph into the shared
// tier and names it by URL: "Extracting graphs
// (s3://bucket/prefix/neuronxcc-<v>/MODULE_<k>/model.hlo_module.pb)". The
// cache-path log holds the root URL (current torch-neuronx) or the graph's
// URL (neuron_cc_wrapper's extraction); both are taken.
//
// Each graph is brought into the local mirror before it is collected
// (SharedTier::bring: its result, or a result the mirror has uploaded, or
// its graph and flags, pending). From there it is a graph of the mirror like
// any other, and the workers compile it under the shared entry's lock and
// push the result (neuron_cc_wrapper compile-entry --remote-cache URL).
//
// Only the graphs of the cache the launcher was given
// (NEURON_COMPILE_CACHE_URL, or --cache_dir in NEURON_CC_FLAGS) are taken: a
// graph of another bucket or prefix is refused by name, as a local path
// outside the cache is.
//
// A graph whose lock object (model.hlo_module.pb.lock) the entry's listing
// shows, held (storage/lock.hpp), is compiled by another host now:
// held_elsewhere() says so, and the launcher waits for it there
// (SharedTier::look) rather than starting a worker only to meet the lock.
// Its graph is still brought, pending, so that it is compiled here if the
// lock expires.
//
// Requests on S3: per graph, 1 LIST for a miss and 2 GETs for its graph and
// flags, + 1 GET of the lock when there is a lock object; a done entry's
// result is downloaded (SharedTier::fetch_result, which lists it again).
//
// take_pending (--command compile, where every host of a cluster may take
// the same graphs at once) lists the whole version folder in one walk (a
// LIST per 1,000 objects) and brings nothing that is only pending there:
// such a graph stays in the shared tier, its size from the listing, until a
// worker compiles it (compile-entry --shared-cache fetches the graph under
// the shared entry's lock). With K hosts over N graphs, each host then GETs
// the graphs it compiles, about N/K, not all N: at 16 hosts × 304 graphs
// that was 608 GETs a host at the start. A lock object the listing shows
// is read (a HEAD and a GET), to know whether another host holds the
// graph, unless it was written since this launcher started and less than
// kPresumeHeldFor ago (LockMemo): then it is presumed held. Hosts of a
// cluster start together and take each other's graphs at once, and reading
// the locks taken in the meantime was half the requests of a run's first
// second (532 of 1,056 at 16 hosts × 304 graphs).
// The graphs are shared out over the connections given, a thread each: with
// 8, 1,000 graphs at 20 ms a request should take about 8 s (not measured),
// and the NEFFs of a cache another host filled come down 8 at a time.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cache/shared_tier.hpp>

namespace npc::cluster {

namespace fs = std::filesystem;

// How many connections the launcher opens to the shared tier for this.
inline constexpr std::size_t kSharedTierConnections = 8;

class SharedGraphs {
public:
  // `connections`: storages of the one shared tier (at least one).
  SharedGraphs(std::vector<std::shared_ptr<storage::Storage>> connections, const cache::Cache& mirror,
               std::string root_url, std::string compiler_version);

  struct Taken {
    std::optional<fs::path> graph; // the graph's path in the mirror
    std::string refused;           // otherwise why not; both empty: this cache's root, nothing to take
  };
  // A URL the trial named. Throws EnvironmentError when the shared tier cannot be read.
  [[nodiscard]] Taken take(std::string_view url);
  // Each of `urls`, over all the connections at once; in their order.
  [[nodiscard]] std::vector<Taken> take_all(const std::vector<std::string>& urls);
  // Every entry of our compiler version in the shared tier with a graph and no result
  // (nor a cached failure, unless `with_failed`): --command compile. Their
  // mirror entry folders, in the order listed; a graph only pending there is
  // not brought (see above: brought_later), the others are as take() brings
  // them. Throws EnvironmentError when the shared tier cannot be read.
  [[nodiscard]] std::vector<fs::path> take_pending(bool with_failed);
  // The size of the graph of the mirror entry `entry_dir` when take_pending
  // left it in the shared tier, to be brought by its compile; nothing for
  // any other graph.
  [[nodiscard]] std::optional<std::uint64_t> brought_later(const fs::path& entry_dir) const;

  // Results found in the shared tier and copied into the mirror so far, and results of
  // the mirror that the shared tier lacked, uploaded.
  [[nodiscard]] std::size_t results_downloaded() const { return results_downloaded_; }
  [[nodiscard]] std::size_t results_uploaded() const { return results_uploaded_; }
  // Who holds the lock of the pending graph at `entry_dir` (its mirror
  // entry), when another process held it, in force, as the graph was taken:
  // its holder's description. Nothing for any other graph.
  [[nodiscard]] std::optional<std::string> held_elsewhere(const fs::path& entry_dir) const;
  // How many objects the version folder held when take_pending walked it;
  // nothing when it did not (the graphs a trial named are taken one by one).
  [[nodiscard]] std::optional<std::size_t> version_objects() const { return version_objects_; }
  // The compile_flags.json of each flags hash among the graphs take_pending
  // left in the shared tier, read once per hash (compile_flags_hash_to): the
  // takes of their compiles then GET only the graph.
  [[nodiscard]] const std::map<std::string, std::string>& flags_by_hash() const { return flags_by_hash_; }
  // One of the connections, for use once the graphs are taken (the pool's
  // looks at entries another host holds, SharedTier::look): never while a
  // take_* call runs.
  [[nodiscard]] std::shared_ptr<storage::Storage> connection() const { return tiers_.front()->storage(); }

private:
  [[nodiscard]] Taken take_with(const cache::SharedTier& tier, std::string_view url);
  // `names`: a listing of the entry's folder in the shared tier.
  [[nodiscard]] fs::path bring(const cache::SharedTier& tier, const cache::CacheKey& key,
                               const std::vector<std::string>& names, bool& absent);
  // Calls work(tier, i) for each i in [0, count), over every connection.
  void for_each_parallel(std::size_t count, const std::function<void(const cache::SharedTier&, std::size_t)>& work);

  std::vector<std::unique_ptr<cache::SharedTier>> tiers_; // one per connection
  std::string root_url_;
  std::string version_;
  std::atomic<std::size_t> results_downloaded_ = 0;
  std::atomic<std::size_t> results_uploaded_ = 0;
  // Records a lock in force on `key` (a judge of the lock object the listing showed).
  void note_holder(const cache::SharedTier& tier, const cache::CacheKey& key);

  // Which of the locks the walk shows are presumed held, unread.
  cache::LockMemo presumption_;

  mutable std::mutex held_mutex_;            // guards held_ and later_ (written by the take_* threads)
  std::map<std::string, std::string> held_; // entry folder -> holder
  std::map<std::string, std::uint64_t> later_; // entry folder -> graph bytes, for brought_later
  std::optional<std::size_t> version_objects_;
  std::map<std::string, std::string> flags_by_hash_;
};

} // namespace npc::cluster
