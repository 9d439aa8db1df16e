#include <npc/launcher/shared_graphs.hpp>

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include <npc/cache/key.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/listing.hpp>
#include <npc/cache/store.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/parallel.hpp>
#include <npc/util/strings.hpp>

namespace npc::launcher {

namespace {

std::string_view without_trailing_slashes(std::string_view text) {
  while (text.ends_with('/')) text.remove_suffix(1);
  return text;
}


} // namespace

SharedGraphs::SharedGraphs(std::vector<std::shared_ptr<storage::Storage>> connections, const cache::Cache& mirror,
                           std::string root_url, std::string compiler_version)
    : root_url_(without_trailing_slashes(root_url)), version_(std::move(compiler_version)) {
  for (auto& connection : connections) tiers_.push_back(std::make_unique<cache::SharedTier>(std::move(connection), mirror));
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
  std::vector<cache::CacheKey> keys;
  std::vector<std::vector<std::string>> listings; // each entry's own files, as a LIST of it names them
  std::map<std::string, std::size_t> index;       // entry folder -> its place in both
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
    }
    listings[found->second].push_back(file.key.substr(slash + 1));
  }
  // What is pending brought into the mirror.
  std::vector<std::optional<fs::path>> graphs(keys.size());
  for_each_parallel(keys.size(), [&](const cache::SharedTier& tier, std::size_t i) {
    const cache::ListedEntry listed = cache::read_listing(listings[i]);
    if (!listed.has_graph || listed.done || listed.done_without_neff) return;
    if (listed.failed && !with_failed) return;
    bool absent = false;
    fs::path graph = bring(tier, keys[i], listings[i], absent);
    if (!absent) graphs[i] = std::move(graph);
  });
  std::vector<fs::path> pending;
  for (auto& graph : graphs)
    if (graph) pending.push_back(std::move(*graph));
  return pending;
}

} // namespace npc::launcher
