#include <npc/bundle/shared_bundle.hpp>

#include <algorithm>
#include <optional>
#include <variant>

#include <npc/bundle/selection.hpp>
#include <npc/cache/shared_tier.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/tiers.hpp>
#include <npc/util/error.hpp>
#include <npc/util/parallel.hpp>

namespace npc::bundle {

namespace {

std::vector<cache::SharedTier> tiers_over(const std::vector<std::shared_ptr<storage::Storage>>& connections,
                                             const cache::Cache& mirror) {
  if (connections.empty()) throw std::logic_error("a shared tier's bundle needs at least one connection");
  std::vector<cache::SharedTier> tiers;
  for (const auto& c : connections) tiers.emplace_back(c, mirror);
  return tiers;
}

void ensure_mirror(const cache::Cache& mirror) {
  if (auto s = mirror.ensure_root(); !s) throw EnvironmentError(s.error());
}

// How long an export waits for the mirror entry's lock (a compile of it on
// this node), as an import does by default.
constexpr std::chrono::seconds kMirrorLockWait{60};

// Brings one candidate's result into the mirror: nullopt when it is there
// now, else why not.
std::optional<std::string> bring(const cache::SharedTier& tier, const cache::CacheKey& key) {
  auto got = tier.fetch_result(key, kMirrorLockWait, cache::RecordUse::no);
  if (!got) throw EnvironmentError(got.error());
  switch (got->outcome) {
  case cache::FetchOutcome::copied:
  case cache::FetchOutcome::failure_copied:
  case cache::FetchOutcome::already_done: return std::nullopt;
  case cache::FetchOutcome::miss: return "no result in " + tier.describe(key);
  case cache::FetchOutcome::rejected: return got->detail;
  case cache::FetchOutcome::busy: return "being compiled here (" + got->detail + ")";
  }
  return "no result in " + tier.describe(key);
}

// Uploads one entry of the mirror, which the import left done or failed:
// nullopt when uploaded, else why not.
std::optional<std::string> upload(const cache::SharedTier& tier, const cache::CacheKey& key) {
  // Renewed while held: a big NEFF on a slow link can take longer than the lock lives.
  auto got = tier.try_lock(key);
  if (!got) throw EnvironmentError(got.error());
  if (auto* held = std::get_if<storage::Lock::Held>(&*got))
    return "held in " + tier.describe(key) + " by " + held->facts.holder() + "; left to its compile";
  auto pushed = tier.push_unless_there(key);
  if (!pushed) throw EnvironmentError("cannot upload " + tier.describe(key) + ": " + pushed.error());
  if (!*pushed) return "has a result in " + tier.describe(key) + " already";
  return std::nullopt;
}

} // namespace

ExportReport export_shared_bundle(const std::vector<std::shared_ptr<storage::Storage>>& connections,
                                  const cache::Cache& mirror, const ExportSelection& selection,
                                  const fs::path& output, const ExportOptions& options) {
  ensure_mirror(mirror);
  const auto tiers = tiers_over(connections, mirror);
  const cache::Cache shared(connections);
  ExportReport chosen;
  auto candidates = select_candidates([&shared] { return shared.list(); }, mirror.clock().now(), selection, options,
                                      chosen);
  std::vector<std::optional<std::string>> problems(candidates.size());
  util::for_each_shared_out(candidates.size(), tiers.size(), [&](std::size_t worker, std::size_t i) {
    problems[i] = bring(tiers[worker], candidates[i].key);
  });
  ExportSelection brought;
  brought.kind = ExportSelection::Kind::keys;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (problems[i]) chosen.skipped.push_back({candidates[i].key.str(), *problems[i]});
    else brought.keys.push_back(candidates[i].key);
  }
  // Nothing chosen is still a bundle (an empty one), as locally.
  ExportReport report = export_bundle(mirror, brought, output, options);
  report.skipped.insert(report.skipped.begin(), chosen.skipped.begin(), chosen.skipped.end());
  report.left_out.insert(report.left_out.begin(), chosen.left_out.begin(), chosen.left_out.end());
  std::sort(report.skipped.begin(), report.skipped.end(),
            [](const KeyReason& a, const KeyReason& b) { return a.key < b.key; });
  return report;
}

ImportReport import_shared_bundle(const std::vector<std::shared_ptr<storage::Storage>>& connections,
                                  const cache::Cache& mirror, const fs::path& bundle, const ImportOptions& options) {
  const auto tiers = tiers_over(connections, mirror);
  ImportReport local = import_bundle(mirror, bundle, options);
  // What reaches the shared tier: the entries now in the mirror from this bundle,
  // or done (or failed) there already from before.
  std::vector<std::string> keys = local.imported;
  ImportReport report = local;
  report.imported.clear();
  report.skipped.clear();
  for (const auto& s : local.skipped) {
    if (s.reason == kSkippedDoneHere || (s.reason == kSkippedFailedHere && options.include_failed))
      keys.push_back(s.key);
    else
      report.skipped.push_back(s);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<std::optional<std::string>> problems(keys.size());
  util::for_each_shared_out(keys.size(), tiers.size(), [&](std::size_t worker, std::size_t i) {
    auto key = cache::parse_key(keys[i]);
    if (!key) throw std::logic_error("the importer reported a key that does not parse: " + keys[i]);
    problems[i] = upload(tiers[worker], *key);
  });
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (problems[i]) report.skipped.push_back({keys[i], *problems[i]});
    else report.imported.push_back(keys[i]);
  }
  std::sort(report.skipped.begin(), report.skipped.end(),
            [](const KeyReason& a, const KeyReason& b) { return a.key < b.key; });
  return report;
}

ExportReport export_cache_bundle(cache::Tiers& tiers, std::size_t connections, const ExportSelection& selection,
                                 const fs::path& output, const ExportOptions& options) {
  if (!tiers.shared()) return export_bundle(tiers.directory(), selection, output, options);
  return export_shared_bundle(tiers.common_connections(connections), tiers.directory(), selection, output, options);
}

ImportReport import_cache_bundle(cache::Tiers& tiers, std::size_t connections, const fs::path& bundle,
                                 const ImportOptions& options) {
  if (!tiers.shared()) return import_bundle(tiers.directory(), bundle, options);
  return import_shared_bundle(tiers.common_connections(connections), tiers.directory(), bundle, options);
}

} // namespace npc::bundle
