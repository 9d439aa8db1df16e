#pragma once
// Which entries an export takes (internal to npc_bundle): an ExportSelection
// (all, used since, the graphs of a launcher report, given keys) becomes a
// list of candidates; what is left out on the way is recorded in the report.

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <npc/bundle/bundle.hpp>
#include <npc/cache/entry.hpp>
#include <npc/cache/key.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/result.hpp>

namespace npc::bundle {

struct ExportCandidate {
  cache::CacheKey key;
  bool must_be_done = false; // the listing or the report says it is done
};

// Sorted by key, each key once. Throws UsageError when the report of a
// from_report selection cannot be used.
[[nodiscard]] std::vector<ExportCandidate> select_candidates(const cache::Cache& cache,
                                                             const ExportSelection& selection,
                                                             const ExportOptions& options, ExportReport& report);
// The same over any cache's listing (a shared tier's: shared_bundle.hpp), taken
// only when the selection needs it; "used since" counts back from `now`.
using Listing = std::function<std::vector<cache::EntryInfo>()>;
[[nodiscard]] std::vector<ExportCandidate> select_candidates(const Listing& listing, util::WallTime now,
                                                             const ExportSelection& selection,
                                                             const ExportOptions& options, ExportReport& report);

// The keys a launcher report names, with whether the run left each done.
struct ReportedGraph {
  cache::CacheKey key;
  std::string status; // compiled, cached, compiled_elsewhere, failed, failed_cached, ...
};
[[nodiscard]] Result<std::vector<ReportedGraph>> read_launcher_report(const fs::path& report);

} // namespace npc::bundle
