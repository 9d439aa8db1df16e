#include <npc/launcher/warm_check.hpp>

#include <iostream>

#include <npc/cache/entry.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/misses.hpp>
#include <npc/cache/nearest_graph.hpp>
#include <npc/cache/precompile_record.hpp>
#include <npc/util/exit_code.hpp>

namespace npc::launcher {

namespace {

// The graphs of the cache's last pre-compile, to compare a graph with that
// none of them is; none when no pre-compile is recorded in `cache` (or its
// records cannot be read: the check still names every graph).
std::optional<cache::NearestTrialGraph> last_trial(const cache::Cache& cache) {
  auto records = cache::read_precompile_records(*cache.storage());
  if (!records) return std::nullopt;
  auto last = cache::last_precompile(std::move(*records));
  if (last.empty()) return std::nullopt;
  return std::optional<cache::NearestTrialGraph>(std::in_place, *cache.storage(), cache::precompile_keys(last));
}

// Why the training run would compile the graph of `entry` (not done).
std::string why_it_compiles(const cache::Cache& cache, const std::vector<cache::CacheKey>& keys,
                            const cache::Entry& entry, const cache::CacheKey& key,
                            std::optional<cache::NearestTrialGraph>& trial) {
  if (auto holder = entry.describe_holder())
    return "being compiled now, held by " + *holder + ": done when that compile ends";
  if (entry.looks_failed())
    return "failed before (a cached failure): compiled again only where failures are retried "
           "(--retry_failed_compilation in NEURON_CC_FLAGS)";
  for (const auto& same : cache::same_graph_keys(cache, keys, key)) {
    if (!cache.entry(same.key).looks_done()) continue;
    if (same.same_version) {
      std::string text = "the same graph is compiled under other flags (" + same.key.module_name() + ")";
      if (!same.flags_removed.empty()) text += "; flags here, not there: " + cache::joined_flags(same.flags_removed);
      if (!same.flags_added.empty()) text += "; flags there, not here: " + cache::joined_flags(same.flags_added);
      if (same.flags_added.empty() && same.flags_removed.empty()) text += "; the same flags in another order";
      return text;
    }
    return "the same graph is compiled under compiler " + same.key.compiler_version + " (" + same.key.str() +
           "), not " + key.compiler_version;
  }
  std::string why = "not compiled in this cache";
  if (trial) {
    auto verdict = trial->judge(key);
    std::string nearest = cache::describe_nearest(verdict.trial_key, verdict.comparison, verdict.undecodable,
                                                 "the last pre-compile's");
    if (!nearest.empty()) why += "; " + nearest;
  }
  return why;
}

} // namespace

int report_warm_check(const std::vector<fs::path>& entries, const cache::Cache& cache) {
  std::vector<std::pair<cache::CacheKey, cache::Entry>> cold;
  for (const auto& dir : entries) {
    cache::Entry entry = cache.entry(dir);
    if (entry.looks_done()) continue;
    if (auto key = cache::parse_key(dir.string())) cold.emplace_back(*key, std::move(entry));
  }
  // Current torch-neuronx names only the graphs it would compile (a graph
  // done in the cache is not extracted again); older releases and the
  // wrapper name every graph. So the count of graphs the trial ran is not
  // known, only of those not compiled.
  if (cold.empty()) {
    std::cout << "no graph would compile in the training run: every graph the trial ran is compiled in "
              << cache.describe() << "\n";
    return 0;
  }
  // Without a listing, each graph is still named; only the why is less.
  const std::vector<cache::CacheKey> keys = cache::list_keys(cache).value_or(std::vector<cache::CacheKey>{});
  std::optional<cache::NearestTrialGraph> trial = last_trial(cache);
  std::cout << cold.size() << " graph(s) the trial ran would compile in the training run:\n";
  for (const auto& [key, entry] : cold)
    std::cout << "  " << key.str() << ": " << why_it_compiles(cache, keys, entry, key, trial) << '\n';
  return exit_status_for_failed_graphs(cold.size());
}

} // namespace npc::launcher
