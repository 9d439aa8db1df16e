#include <npc/cache/misses.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include <spdlog/spdlog.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/explain.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/nearest_graph.hpp>
#include <npc/cache/store.hpp>

namespace npc::cache {

namespace {

// The trial's graphs by key, and by graph part.
struct TrialGraphs {
  std::map<std::string, std::string> outcome_by_key;
  std::multimap<std::string, CacheKey> by_graph;

  explicit TrialGraphs(const std::vector<PrecompileRecord>& records) {
    for (const auto& r : records)
      for (const auto& g : r.graphs) {
        auto key = parse_key(g.key);
        if (!key) continue;
        // Of several launchers', a compile counts over a failure.
        auto [it, inserted] = outcome_by_key.emplace(key->str(), g.outcome);
        if (!inserted && g.outcome != "failed") it->second = g.outcome;
      }
    for (auto& key : precompile_keys(records)) by_graph.emplace(key.graph_hash, std::move(key));
  }
};

std::optional<std::vector<std::string>> flags_of(const storage::Storage& storage, const CacheKey& key) {
  auto text = storage.read(key.str() + "/" + std::string(kFlagsFile), kMaxEntryMetaBytes);
  if (!text) return std::nullopt;
  auto flags = parse_compile_flags(*text);
  if (!flags) return std::nullopt;
  return *flags;
}

void judge_miss(const storage::Storage& storage, const TrialGraphs& trial, bool recorded, Miss& miss) {
  if (!recorded) {
    miss.cause = MissCause::no_precompile;
    return;
  }
  if (auto it = trial.outcome_by_key.find(miss.key.str()); it != trial.outcome_by_key.end()) {
    miss.cause = it->second == "failed" ? MissCause::failed_in_precompile : MissCause::made_again;
    miss.trial_key = miss.key;
    return;
  }
  auto [first, last] = trial.by_graph.equal_range(miss.key.graph_hash);
  if (first == last) {
    miss.cause = MissCause::not_in_trial;
    return;
  }
  // Under the same compiler version, only the flags differ.
  for (auto it = first; it != last; ++it) {
    if (it->second.compiler_version != miss.key.compiler_version) continue;
    miss.cause = MissCause::other_flags;
    miss.trial_key = it->second;
    auto here = flags_of(storage, miss.key);
    auto there = flags_of(storage, it->second);
    if (here && there) {
      FlagsDiff diff = diff_flags(*there, *here);
      miss.flags_added = std::move(diff.added);
      miss.flags_removed = std::move(diff.removed);
    }
    return;
  }
  miss.cause = MissCause::other_compiler_version;
  miss.trial_key = first->second;
}

} // namespace

std::string_view to_string(MissCause cause) {
  switch (cause) {
  case MissCause::not_in_trial: return "not_in_trial";
  case MissCause::other_flags: return "other_flags";
  case MissCause::other_compiler_version: return "other_compiler_version";
  case MissCause::failed_in_precompile: return "failed_in_precompile";
  case MissCause::made_again: return "made_again";
  case MissCause::no_precompile: return "no_precompile";
  }
  return "?";
}

std::string_view describe(MissCause cause) {
  switch (cause) {
  case MissCause::not_in_trial: return "never produced by the trial";
  case MissCause::other_flags: return "the trial's graph under other compiler flags";
  case MissCause::other_compiler_version: return "the trial's graph under another compiler version";
  case MissCause::failed_in_precompile: return "failed in the pre-compile";
  case MissCause::made_again: return "done by the pre-compile, evicted or removed since";
  case MissCause::no_precompile: return "compiled since (no pre-compile recorded to compare with)";
  }
  return "?";
}

Result<std::vector<CacheKey>> list_keys(const Cache& cache) {
  const storage::Storage& storage = *cache.storage();
  std::vector<CacheKey> keys;
  auto versions = storage.list("");
  if (!versions) return fail("cannot list the cache " + cache.describe() + ": " + versions.error());
  for (const auto& version : *versions) {
    if (!version.starts_with(kVersionDirPrefix)) continue;
    auto names = storage.list(version);
    if (!names) {
      spdlog::warn("skipping {}: {}", storage.describe(version), names.error());
      continue;
    }
    for (const auto& name : *names)
      if (auto key = parse_key(version + "/" + name)) keys.push_back(*key);
  }
  return keys;
}

std::vector<SameGraphKey> same_graph_keys(const Cache& cache, const std::vector<CacheKey>& keys, const CacheKey& key) {
  const storage::Storage& storage = *cache.storage();
  std::vector<SameGraphKey> same;
  std::optional<std::vector<std::string>> own_flags;
  bool read_own = false;
  for (const auto& other : keys) {
    if (other.graph_hash != key.graph_hash || other == key) continue;
    SameGraphKey one{other, other.compiler_version == key.compiler_version, {}, {}};
    if (one.same_version) {
      if (!read_own) {
        own_flags = flags_of(storage, key);
        read_own = true;
      }
      auto there = flags_of(storage, other);
      if (own_flags && there) {
        FlagsDiff diff = diff_flags(*own_flags, *there);
        one.flags_added = std::move(diff.added);
        one.flags_removed = std::move(diff.removed);
      }
    }
    same.push_back(std::move(one));
  }
  // The nearest first: the same version, then the fewest words apart.
  std::stable_sort(same.begin(), same.end(), [](const SameGraphKey& a, const SameGraphKey& b) {
    if (a.same_version != b.same_version) return a.same_version;
    return a.flags_added.size() + a.flags_removed.size() < b.flags_added.size() + b.flags_removed.size();
  });
  return same;
}

Result<Misses> find_misses(const Cache& cache, std::vector<PrecompileRecord> precompile, util::WallTime since) {
  Misses found;
  found.since = since;
  const storage::Storage& storage = *cache.storage();
  auto listed = list_keys(cache);
  if (!listed) return fail(listed.error());
  const std::vector<CacheKey>& keys = *listed;
  found.looked_at = keys.size();
  // Each graph's time: one stat each, over the cache's connections.
  std::vector<std::optional<util::WallTime>> written(keys.size());
  cache.share_out(keys.size(), [&](std::size_t connection, std::size_t i) {
    const auto& one = cache.connections().empty() ? cache.storage() : cache.connections()[connection];
    auto info = one->stat(keys[i].str() + "/" + std::string(kGraphFile));
    if (info && *info && !(*info)->directory) written[i] = (*info)->modified;
  });
  const TrialGraphs trial(precompile);
  const bool recorded = !precompile.empty();
  const util::WallTime ended = precompile_end(precompile);
  NearestTrialGraph nearest(storage, precompile_keys(precompile));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!written[i] || *written[i] <= since) continue;
    // A graph of the trial's written by its end is the pre-compile's own
    // work (listed from an earlier --since), not a miss.
    if (recorded && *written[i] <= ended && trial.outcome_by_key.contains(keys[i].str())) continue;
    Miss miss;
    miss.key = keys[i];
    miss.written = *written[i];
    auto info = cache.entry(keys[i]).inspect();
    miss.state = info ? info->state : EntryState::incomplete;
    judge_miss(storage, trial, recorded, miss);
    if (miss.cause == MissCause::not_in_trial) {
      auto verdict = nearest.judge(miss.key);
      miss.trial_key = std::move(verdict.trial_key);
      miss.differences = std::move(verdict.comparison.differences);
      miss.hint = std::move(verdict.comparison.hint);
      miss.undecodable = std::move(verdict.undecodable);
    }
    found.misses.push_back(std::move(miss));
  }
  std::sort(found.misses.begin(), found.misses.end(), [](const Miss& a, const Miss& b) {
    if (a.cause != b.cause) return a.cause < b.cause;
    if (a.written != b.written) return a.written < b.written;
    return a.key < b.key;
  });
  found.precompile = std::move(precompile);
  return found;
}

} // namespace npc::cache
