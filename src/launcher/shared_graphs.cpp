#include <npc/launcher/remote_graphs.hpp>

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

RemoteGraphs::RemoteGraphs(std::vector<std::shared_ptr<storage::Storage>> connections, const cache::Cache& mirror,
                           std::string root_url, std::string compiler_version)
    : root_url_(without_trailing_slashes(root_url)), version_(std::move(compiler_version)) {
  for (auto& connection : connections) remotes_.push_back(std::make_unique<cache::RemoteCache>(std::move(connection), mirror));
}

void RemoteGraphs::for_each_parallel(std::size_t count,
                                     const std::function<void(const cache::RemoteCache&, std::size_t)>& work) {
  // The first error stops the rest: S3 unreachable, say, for all.
  util::for_each_shared_out(count, remotes_.size(),
                            [&](std::size_t worker, std::size_t i) { work(*remotes_[worker], i); });
}


fs::path RemoteGraphs::bring(const cache::RemoteCache& remote, const cache::CacheKey& key,
                             const std::vector<std::string>& names, bool& absent) {
  absent = false;
  // The result first: a graph another node compiled is downloaded, not
  // compiled again. A mirror entry another local process holds ("busy") or
  // a result that fails its record ("rejected") leaves the graph to fetch.
  // fetch_result lists the folder again: only a result, which costs its
  // download anyway, pays that LIST twice.
  const cache::ListedEntry listed = cache::read_listing(names);
  if (listed.done || listed.failed) {
    auto result = remote.fetch_result(key, std::chrono::milliseconds(0));
    if (!result) throw EnvironmentError(result.error());
    switch (result->outcome) {
    case cache::FetchOutcome::copied:
    case cache::FetchOutcome::failure_copied: ++results_downloaded_; [[fallthrough]];
    case cache::FetchOutcome::already_done: return remote.mirror().entry(key).graph_path();
    case cache::FetchOutcome::rejected:
      spdlog::warn("not using {}: {}; compiling it again", remote.describe(key), result->detail);
      break;
    case cache::FetchOutcome::busy:
    case cache::FetchOutcome::miss: break;
    }
  }
  if (upload_mirror_result(remote, key)) return remote.mirror().entry(key).graph_path();
  auto graph = remote.fetch_graph(key);
  if (!graph) throw EnvironmentError(graph.error());
  absent = !*graph;
  if (!absent && listed.has_lock) note_if_held(remote, key);
  return remote.mirror().entry(key).graph_path();
}

void RemoteGraphs::note_if_held(const cache::RemoteCache& remote, const cache::CacheKey& key) {
  const std::string folder = key.relative_path().generic_string();
  auto facts = remote.judge_lock(key);
  if (!facts) {
    // As the pool's own look does: a worker meets the same lock, or error.
    spdlog::warn("cannot read the lock of {}: {}; starting its compile", remote.describe(key), facts.error());
    return;
  }
  if (!facts->blocks()) return; // gone, or stale: ours to take
  std::lock_guard lock(held_mutex_);
  held_[folder] = facts->holder();
}

std::optional<std::string> RemoteGraphs::held_elsewhere(const fs::path& entry_dir) const {
  auto key = cache::parse_key(entry_dir.string());
  if (!key) return std::nullopt;
  std::lock_guard lock(held_mutex_);
  auto it = held_.find(key->relative_path().generic_string());
  if (it == held_.end()) return std::nullopt;
  return it->second;
}

bool RemoteGraphs::upload_mirror_result(const cache::RemoteCache& remote, const cache::CacheKey& key) {
  const cache::Entry entry = remote.mirror().entry(key);
  if (!entry.looks_done() && !entry.looks_failed()) return false;
  // Under the entry's lock in S3, as a compile's upload: the lock of an
  // upload that died with its process on this host is taken over at once.
  auto got = remote.try_lock(key);
  if (!got) throw EnvironmentError(got.error());
  // Held: another process is compiling or uploading it; the mirror's result
  // serves this node meanwhile.
  if (!std::holds_alternative<storage::Lock>(*got)) return true;
  if (auto pushed = remote.push(key); !pushed)
    spdlog::warn("the result of {} is in the local mirror but not in the cache: {}", remote.describe(key),
                 pushed.error());
  else
    ++results_uploaded_;
  return true;
}

RemoteGraphs::Taken RemoteGraphs::take(std::string_view url) { return take_with(*remotes_.front(), url); }

std::vector<RemoteGraphs::Taken> RemoteGraphs::take_all(const std::vector<std::string>& urls) {
  std::vector<Taken> taken(urls.size());
  for_each_parallel(urls.size(), [&](const cache::RemoteCache& remote, std::size_t i) { taken[i] = take_with(remote, urls[i]); });
  return taken;
}

RemoteGraphs::Taken RemoteGraphs::take_with(const cache::RemoteCache& remote, std::string_view text) {
  std::string_view url = without_trailing_slashes(text);
  if (url == root_url_) return {};
  if (!url.starts_with(root_url_ + "/"))
    return {std::nullopt, "not in the S3 cache " + root_url_ +
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
  auto names = remote.storage()->list(key->relative_path().generic_string());
  if (!names) throw EnvironmentError(names.error());
  bool absent = false;
  fs::path graph = bring(remote, *key, *names, absent);
  if (absent) return {std::nullopt, "no such graph in S3"};
  return {graph, {}};
}

std::vector<fs::path> RemoteGraphs::take_pending(bool with_failed) {
  const cache::RemoteCache& first = *remotes_.front();
  const std::string version_dir = std::string(cache::kVersionDirPrefix) + version_;
  auto modules = first.storage()->list(version_dir);
  if (!modules) throw EnvironmentError(modules.error());
  std::vector<cache::CacheKey> keys;
  for (const auto& module : *modules)
    if (auto key = cache::parse_key(version_dir + "/" + module)) keys.push_back(*key); // others left alone
  // A LIST of each entry, and what is pending brought into the mirror.
  std::vector<std::optional<fs::path>> graphs(keys.size());
  for_each_parallel(keys.size(), [&](const cache::RemoteCache& remote, std::size_t i) {
    auto files = remote.storage()->list(keys[i].relative_path().generic_string());
    if (!files) throw EnvironmentError(files.error());
    const cache::ListedEntry listed = cache::read_listing(*files);
    if (!listed.has_graph || listed.done || listed.done_without_neff) return;
    if (listed.failed && !with_failed) return;
    bool absent = false;
    fs::path graph = bring(remote, keys[i], *files, absent);
    if (!absent) graphs[i] = std::move(graph);
  });
  std::vector<fs::path> pending;
  for (auto& graph : graphs)
    if (graph) pending.push_back(std::move(*graph));
  return pending;
}

} // namespace npc::launcher
