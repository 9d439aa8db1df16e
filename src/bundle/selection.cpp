#include <npc/bundle/selection.hpp>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include <npc/cache/store.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/input_file.hpp>
#include <npc/util/strings.hpp>
#include <npc/util/json_text.hpp>

namespace npc::bundle {

using cache::EntryInfo;
using cache::EntryState;
using nlohmann::json;

Result<std::vector<ReportedGraph>> read_launcher_report(const fs::path& report) {
  auto text = util::read_input_file(report);
  if (!text) return fail(text.error());
  auto parsed = util::parse_json_text(*text);
  if (!parsed || !parsed->is_object()) return fail(report.string() + " is not a JSON object");
  const json& doc = *parsed;
  auto graphs = doc.find("compilation_report");
  if (graphs == doc.end() || !graphs->is_object())
    return fail(report.string() + " has no compilation_report object (is it a neuron_parallel_compile --report file?)");
  std::vector<ReportedGraph> found;
  std::set<cache::CacheKey> seen;
  for (const auto& [graph_path, value] : graphs->items()) {
    if (!value.is_object()) return fail(report.string() + ": the record of " + graph_path + " is not an object");
    std::optional<cache::CacheKey> key;
    if (auto k = value.find("key"); k != value.end() && k->is_string()) key = cache::parse_key(k->get<std::string>());
    if (!key) key = cache::parse_key(fs::path(graph_path).parent_path().string());
    if (!key) return fail(report.string() + ": " + graph_path + " does not name a cache entry");
    ReportedGraph graph{*key, ""};
    if (auto s = value.find("status"); s != value.end() && s->is_string()) graph.status = *s;
    if (seen.insert(*key).second) found.push_back(std::move(graph));
  }
  return found;
}

namespace {

// The done entries of the listing that `keep` takes; failed ones only when
// asked for.
template <typename Keep>
void from_listing(const Listing& listing, Keep keep, const ExportOptions& options,
                  std::vector<ExportCandidate>& candidates, ExportReport& report) {
  for (const auto& e : listing()) {
    if (!keep(e)) continue;
    if (e.state == EntryState::done) candidates.push_back({e.key, true});
    else if (e.state == EntryState::failed) {
      if (options.include_failed) candidates.push_back({e.key, false});
      else report.left_out.push_back({e.key.str(), "a cached failure (--include-failed exports it)"});
    }
  }
}

// Entries last used at or after `days` ago.
void used_since(const Listing& listing, util::WallTime now, double days, const ExportOptions& options,
                std::vector<ExportCandidate>& candidates, ExportReport& report) {
  auto cutoff = now - std::chrono::duration_cast<util::WallTime::duration>(
                          std::chrono::duration<double>(days * 86400.0));
  double cutoff_unix = static_cast<double>(util::to_unix_seconds(cutoff));
  from_listing(
      listing,
      [cutoff_unix](const EntryInfo& e) { return static_cast<double>(util::to_unix_seconds(e.last_used)) >= cutoff_unix; },
      options, candidates, report);
}

// The graphs a launcher report names, by what the run left them.
void from_report(const fs::path& report_file, const ExportOptions& options, std::vector<ExportCandidate>& candidates,
                 ExportReport& report) {
  auto graphs = read_launcher_report(report_file);
  if (!graphs) throw UsageError("cannot use the report: " + graphs.error());
  for (const auto& g : *graphs) {
    if (g.status == "compiled" || g.status == "cached" || g.status == "compiled_elsewhere")
      candidates.push_back({g.key, true});
    else if (g.status == "failed" || g.status == "failed_cached") {
      if (options.include_failed) candidates.push_back({g.key, false});
      else report.left_out.push_back({g.key.str(), "the run left it failed (--include-failed exports it)"});
    } else {
      report.skipped.push_back({g.key.str(), "the run did not compile it (status '" + g.status + "')"});
    }
  }
}

} // namespace

std::vector<ExportCandidate> select_candidates(const cache::Cache& cache, const ExportSelection& selection,
                                               const ExportOptions& options, ExportReport& report) {
  return select_candidates([&cache] { return cache.list(); }, cache.clock().now(), selection, options, report);
}

std::vector<ExportCandidate> select_candidates(const Listing& listing, util::WallTime now,
                                               const ExportSelection& selection, const ExportOptions& options,
                                               ExportReport& report) {
  std::vector<ExportCandidate> candidates;
  switch (selection.kind) {
  case ExportSelection::Kind::all:
    from_listing(listing, [](const EntryInfo&) { return true; }, options, candidates, report);
    break;
  case ExportSelection::Kind::used_since:
    used_since(listing, now, selection.used_since_days, options, candidates, report);
    break;
  case ExportSelection::Kind::from_report:
    from_report(selection.report, options, candidates, report);
    break;
  case ExportSelection::Kind::keys:
    for (const auto& k : selection.keys) candidates.push_back({k, false});
    break;
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const ExportCandidate& a, const ExportCandidate& b) { return a.key < b.key; });
  candidates.erase(std::unique(candidates.begin(), candidates.end(),
                               [](const ExportCandidate& a, const ExportCandidate& b) { return a.key == b.key; }),
                   candidates.end());
  return candidates;
}

} // namespace npc::bundle
