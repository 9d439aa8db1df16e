#include <npc/cache/nearest_graph.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include <npc/cache/layout.hpp>

namespace npc::cache {

namespace {

double shape_distance(const GraphShape& a, const GraphShape& b) {
  if (a == b) return 0;
  if (a.type != b.type || a.dims.size() != b.dims.size()) return 10;
  // A dimension that differs counts one, and a little more the further
  // apart: of two batches, the nearer size is the nearer graph.
  double d = 0;
  for (std::size_t i = 0; i < a.dims.size(); ++i) {
    if (a.dims[i] == b.dims[i]) continue;
    const double x = static_cast<double>(a.dims[i]), y = static_cast<double>(b.dims[i]);
    d += 1 + 0.01 * std::abs(x - y) / std::max({std::abs(x), std::abs(y), 1.0});
  }
  return d;
}

double shapes_distance(const std::vector<GraphShape>& a, const std::vector<GraphShape>& b) {
  double d = 100.0 * static_cast<double>(std::max(a.size(), b.size()) - std::min(a.size(), b.size()));
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) d += shape_distance(a[i], b[i]);
  return d;
}

// "SyncTensorsGraph.57" -> "SyncTensorsGraph": the framework numbers its
// modules, so only the rest of the name says what the graph is.
std::string base_name(const std::string& module) {
  std::size_t end = module.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(module[end - 1]))) --end;
  if (end > 0 && end < module.size() && module[end - 1] == '.') --end;
  return module.substr(0, end);
}

// How the arrays that differ differ.
struct ShapeChanges {
  std::size_t differing = 0;
  std::size_t first_dim_smaller = 0; // only the first dimension differs, smaller here
  std::size_t first_dim_larger = 0;
  std::size_t type_only = 0;         // the same dimensions, another element type
};

void compare_list(const char* what, const std::vector<GraphShape>& here, const std::vector<GraphShape>& there,
                  std::vector<std::string>& out, ShapeChanges& changes) {
  constexpr std::size_t kNamed = 3;
  std::size_t named = 0;
  if (here.size() != there.size())
    out.push_back(std::to_string(here.size()) + " " + what + "s here, " + std::to_string(there.size()) + " there");
  for (std::size_t i = 0; i < std::min(here.size(), there.size()); ++i) {
    const GraphShape& a = here[i];
    const GraphShape& b = there[i];
    if (a == b) continue;
    ++changes.differing;
    if (a.type != b.type && a.dims == b.dims) ++changes.type_only;
    if (a.type == b.type && a.dims.size() == b.dims.size() && !a.dims.empty() &&
        std::equal(a.dims.begin() + 1, a.dims.end(), b.dims.begin() + 1)) {
      if (a.dims[0] < b.dims[0]) ++changes.first_dim_smaller;
      else ++changes.first_dim_larger;
    }
    if (named++ < kNamed)
      out.push_back(std::string(what) + " " + std::to_string(i) + " is " + a.text + " here, " + b.text + " there");
  }
  if (named > kNamed) out.push_back("and " + std::to_string(named - kNamed) + " more " + what + "s");
}

} // namespace

double graph_distance(const GraphSummary& here, const GraphSummary& there) {
  double d = shapes_distance(here.parameters, there.parameters) + shapes_distance(here.results, there.results);
  const double a = static_cast<double>(here.instructions), b = static_cast<double>(there.instructions);
  d += 10.0 * std::abs(a - b) / std::max({a, b, 1.0});
  if (base_name(here.module_name) != base_name(there.module_name)) d += 5;
  return d;
}

GraphComparison compare_graphs(const GraphSummary& here, const GraphSummary& there) {
  GraphComparison result;
  ShapeChanges changes;
  compare_list("parameter", here.parameters, there.parameters, result.differences, changes);
  compare_list("result", here.results, there.results, result.differences, changes);
  const bool same_counts =
      here.parameters.size() == there.parameters.size() && here.results.size() == there.results.size();
  if (here.instructions != there.instructions)
    result.differences.push_back(std::to_string(here.instructions) + " instructions here, " +
                                 std::to_string(there.instructions) + " there");
  if (base_name(here.module_name) != base_name(there.module_name))
    result.differences.push_back("module " + here.module_name + " here, " + there.module_name + " there");

  if (same_counts && changes.differing > 0 && changes.first_dim_smaller == changes.differing)
    result.hint = "a smaller last batch?";
  else if (same_counts && changes.differing > 0 && changes.first_dim_larger == changes.differing)
    result.hint = "a larger batch than the trial's?";
  else if (same_counts && changes.differing > 0 && changes.type_only == changes.differing)
    result.hint = "another precision (a cast, or XLA_USE_BF16 / XLA_DOWNCAST_BF16 set otherwise)?";
  else if (!same_counts || here.instructions != there.instructions)
    result.hint = "a step the trial did not run (an evaluation step, or one past the trial's last)?";
  if (result.differences.empty()) {
    result.differences.push_back("the same parameters, results and instruction count");
    result.hint = "the graph differs inside (a constant, or an operation): a setting other than the trial's?";
  }
  return result;
}

std::string describe_nearest(const std::optional<CacheKey>& trial_key, const GraphComparison& comparison,
                             const std::string& undecodable, std::string_view whose) {
  if (!undecodable.empty()) return "its graph cannot be decoded: " + undecodable;
  if (!trial_key) return "";
  std::string text = "nearest " + std::string(whose) + " " + trial_key->module_name() + ": ";
  for (std::size_t i = 0; i < comparison.differences.size(); ++i)
    text += (i == 0 ? "" : "; ") + comparison.differences[i];
  if (!comparison.hint.empty()) text += ": " + comparison.hint;
  return text;
}

NearestTrialGraph::NearestTrialGraph(const storage::Storage& storage, std::vector<CacheKey> trial_keys)
    : storage_(storage), trial_keys_(std::move(trial_keys)) {}

Result<GraphSummary> NearestTrialGraph::summarize(const CacheKey& key) const {
  auto bytes = storage_.read(key.str() + "/" + std::string(kGraphFile), kMaxSummarizedGraphBytes);
  if (!bytes) return fail(bytes.error());
  return summarize_graph(*bytes);
}

void NearestTrialGraph::load_trial() {
  loaded_ = true;
  // One graph under several flags or versions is one graph.
  std::set<std::string> graphs;
  for (const auto& key : trial_keys_) {
    if (!graphs.insert(key.graph_hash).second) continue;
    if (auto summary = summarize(key)) trial_.emplace_back(key, std::move(*summary));
  }
}

NearestTrialGraph::Verdict NearestTrialGraph::judge(const CacheKey& key) {
  Verdict verdict;
  auto here = summarize(key);
  if (!here) {
    verdict.undecodable = here.error();
    return verdict;
  }
  if (!loaded_) load_trial();
  const std::pair<CacheKey, GraphSummary>* nearest = nullptr;
  double best = 0;
  for (const auto& candidate : trial_) {
    const double d = graph_distance(*here, candidate.second);
    if (!nearest || d < best) {
      nearest = &candidate;
      best = d;
    }
  }
  if (!nearest) return verdict;
  verdict.trial_key = nearest->first;
  verdict.comparison = compare_graphs(*here, nearest->second);
  return verdict;
}

} // namespace npc::cache
