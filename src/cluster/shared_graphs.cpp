#include <npc/cluster/shared_graphs.hpp>

#include <algorithm>
#include <chrono>
#include <set>

#include <spdlog/spdlog.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/listing.hpp>
#include <npc/cache/store.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/parallel.hpp>
#include <npc/util/strings.hpp>

namespace npc::cluster {

namespace {

// A compile_flags.json is a list of flags: far below this.
constexpr std::uint64_t kMaxFlagsJsonBytes = 1 << 20;

std::string_view without_trailing_slashes(std::string_view text) {
  while (text.ends_with('/')) text.remove_suffix(1);
  return text;
}


} // namespace

SharedGraphs::SharedGraphs(std::vector<std::shared_ptr<storage::Storage>> connections, const cache::Cache& mirror,
                           std::string root_url, std::string compiler_version)
    : root_url_(without_trailing_slashes(root_url)), version_(std::move(compiler_version)) {
  for (auto& connection : connections) tiers_.push_back(std::make_unique<cache::SharedTier>(std::move(connection), mirror));
  presumption_.presume_held_from_now();
}

void SharedGraphs::for_each_parallel(std::size_t count,
                                     const std::function<void(const cache::SharedTier&, std::size_t)>& work) {
  // The first error stops the rest: the shared tier unreachable, say, for all.
  util::for_each_shared_out(count, tiers_.size(),
                            [&](std::size_t worker, std::size_t i) { work(*tiers_[worker], i); });
}


fs::path SharedGraphs::bring(const cache::SharedTier& tier, const cache::CacheKey& key,
                             const std::vector<std::string>& names, bool& absent) {
  auto brought = tier.bring(key, names);
  if (!brought) throw EnvironmentError(brought.error());
  absent = brought->absent;
  if (brought->downloaded) ++results_downloaded_;
  if (brought->uploaded) ++results_uploaded_;
  if (brought->held_by) {
    std::lock_guard lock(held_mutex_);
    held_[key.relative_path().generic_string()] = *brought->held_by;
  }
  return tier.mirror().entry(key).graph_path();
}

void SharedGraphs::note_holder(const cache::SharedTier& tier, const cache::CacheKey& key) {
  auto facts = tier.judge_lock(key);
  if (!facts) {
    // As the pool's own look does: a worker meets the same lock, or error.
    spdlog::warn("cannot read the lock of {}: {}; starting its compile", tier.describe(key), facts.error());
    return;
  }
  if (!facts->blocks()) return; // gone, or stale: ours to take
  std::lock_guard lock(held_mutex_);
  held_[key.relative_path().generic_string()] = facts->holder();
}

std::optional<std::uint64_t> SharedGraphs::brought_later(const fs::path& entry_dir) const {
  auto key = cache::parse_key(entry_dir.string());
  if (!key) return std::nullopt;
  std::lock_guard lock(held_mutex_);
  auto it = later_.find(key->relative_path().generic_string());
  if (it == later_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> SharedGraphs::held_elsewhere(const fs::path& entry_dir) const {
  auto key = cache::parse_key(entry_dir.string());
  if (!key) return std::nullopt;
  std::lock_guard lock(held_mutex_);
  auto it = held_.find(key->relative_path().generic_string());
  if (it == held_.end()) return std::nullopt;
  return it->second;
}

SharedGraphs::Taken SharedGraphs::take(std::string_view url) { return take_with(*tiers_.front(), url); }

std::vector<SharedGraphs::Taken> SharedGraphs::take_all(const std::vector<std::string>& urls) {
  std::vector<Taken> taken(urls.size());
  for_each_parallel(urls.size(), [&](const cache::SharedTier& tier, std::size_t i) { taken[i] = take_with(tier, urls[i]); });
  return taken;
}

SharedGraphs::Taken SharedGraphs::take_with(const cache::SharedTier& tier, std::string_view text) {
  std::string_view url = without_trailing_slashes(text);
  if (url == root_url_) return {};
  if (!url.starts_with(root_url_ + "/"))
    return {std::nullopt, "not in the shared cache " + root_url_ +
                              " (the launcher compiles into the cache NEURON_COMPILE_CACHE_URL or --cache_dir names)"};
  std::string_view relative = url.substr(root_url_.size() + 1);
  const std::string expected = "not a graph of a cache entry (<cache>/neuronxcc-<version>/MODULE_<hash>+<hash>/" +
                               std::string(cache::kGraphFile) + ")";
  if (!relative.ends_with("/" + std::string(cache::kGraphFile))) return {std::nullopt, expected};
  relative.remove_suffix(cache::kGraphFile.size() + 1);
  auto key = cache::parse_key(relative);
  if (!key || key->relative_path().generic_string() != relative) return {std::nullopt, expected};
  if (key->compiler_version != version_)
    return {std::nullopt, "extracted for compiler version " + key->compiler_version + ", but we compile with " + version_};
  // One LIST of the entry tells a miss (the usual case) from a result, and
  // shows a lock object another node may hold.
  auto names = tier.storage()->list(key->relative_path().generic_string());
  if (!names) throw EnvironmentError(names.error());
  bool absent = false;
  fs::path graph = bring(tier, *key, *names, absent);
  if (absent) return {std::nullopt, "no such graph in " + root_url_};
  return {graph, {}};
}

std::vector<fs::path> SharedGraphs::take_pending(bool with_failed) {
  const cache::SharedTier& first = *tiers_.front();
  const std::string version_dir = std::string(cache::kVersionDirPrefix) + version_;
  // One walk of the version's folder (on S3 a LIST per 1,000 objects), not a
  // LIST per entry: with many hosts taking one cache's graphs at once, the
  // per-entry LISTs were a third of their requests at the start.
  auto tree = first.storage()->list_tree(version_dir);
  if (!tree) throw EnvironmentError(tree.error());
  version_objects_ = tree->size();
  std::vector<cache::CacheKey> keys;
  std::vector<std::vector<std::string>> listings; // each entry's own files, as a LIST of it names them
  std::vector<std::uint64_t> graph_bytes;         // each entry's graph size, from the walk
  std::vector<std::optional<storage::Time>> lock_written; // when each entry's lock object was, if listed
  std::map<std::string, std::size_t> index;       // entry folder -> its place in all three
  for (const auto& file : *tree) {
    auto slash = file.key.find('/');
    if (slash == std::string::npos || file.key.find('/', slash + 1) != std::string::npos) continue;
    const std::string folder = file.key.substr(0, slash);
    auto found = index.find(folder);
    if (found == index.end()) {
      auto key = cache::parse_key(version_dir + "/" + folder);
      if (!key) continue; // others left alone
      found = index.emplace(folder, keys.size()).first;
      keys.push_back(*key);
      listings.emplace_back();
      graph_bytes.push_back(0);
      lock_written.emplace_back();
    }
    std::string name = file.key.substr(slash + 1);
    if (name == cache::kGraphFile) graph_bytes[found->second] = file.size;
    if (name == cache::kFrameworkLockFile) lock_written[found->second] = file.modified;
    listings[found->second].push_back(std::move(name));
  }
  std::vector<std::optional<fs::path>> entries(keys.size());
  for_each_parallel(keys.size(), [&](const cache::SharedTier& tier, std::size_t i) {
    const cache::ListedEntry listed = cache::read_listing(listings[i]);
    if (!listed.has_graph || listed.done || listed.done_without_neff) return;
    if (listed.failed && !with_failed) return;
    const fs::path entry_dir = tier.mirror().entry_dir(keys[i]);
    std::error_code ec;
    if (!listed.failed && !fs::exists(entry_dir, ec)) {
      // Only pending, and only there: its compile brings it.
      if (listed.has_lock) {
        const auto now = std::chrono::system_clock::now();
        if (lock_written[i] && presumption_.presumed_held(*lock_written[i], now)) {
          const double age = std::chrono::duration<double>(now - *lock_written[i]).count();
          std::lock_guard lock(held_mutex_);
          held_[keys[i].relative_path().generic_string()] =
              "a lock written " + util::format_seconds(std::max(0.0, age)) + " ago (presumed held, not read)";
        } else {
          note_holder(tier, keys[i]);
        }
      }
      std::lock_guard lock(held_mutex_);
      later_[keys[i].relative_path().generic_string()] = graph_bytes[i];
      entries[i] = entry_dir;
      return;
    }
    // The mirror has the entry (a result it may have to upload), or a cached
    // failure to bring with its log.
    bool absent = false;
    std::ignore = bring(tier, keys[i], listings[i], absent);
    if (!absent) entries[i] = entry_dir;
  });
  std::vector<fs::path> pending;
  for (auto& entry : entries)
    if (entry) pending.push_back(std::move(*entry));
  // The flags of the graphs left there, once per flags hash: a run's graphs
  // share a few sets of flags. One that cannot be read is left to the takes.
  std::set<std::string> hashes_read;
  for (const cache::CacheKey& key : keys) {
    if (!later_.contains(key.relative_path().generic_string()) || !hashes_read.insert(key.flags_hash).second) continue;
    auto text = first.storage()->read((key.relative_path() / cache::kFlagsFile).generic_string(), kMaxFlagsJsonBytes);
    if (text && cache::compile_flags_hash_to(*text, key.flags_hash)) flags_by_hash_.emplace(key.flags_hash, std::move(*text));
  }
  return pending;
}

} // namespace npc::cluster
