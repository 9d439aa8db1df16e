#include <npc/launcher/report.hpp>

#include <algorithm>
#include <utility>

#include <npc/cache/layout.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/strings.hpp>

namespace npc::launcher {

using nlohmann::json;

namespace {

const char* status_name(const ItemProgress& p) {
  switch (p.state) {
  case ItemState::compiled: return "compiled";
  case ItemState::cached: return "cached";
  case ItemState::compiled_elsewhere: return "compiled_elsewhere";
  case ItemState::failed: return p.cached_failure ? "failed_cached" : "failed";
  default: return "not_compiled";
  }
}

} // namespace

Counts count(const Pool& pool) {
  Counts c;
  c.found = pool.items().size();
  for (const auto& p : pool.progress()) {
    switch (p.state) {
    case ItemState::compiled: ++c.compiled; break;
    case ItemState::cached: ++c.cached; break;
    case ItemState::compiled_elsewhere: ++c.compiled_elsewhere; break;
    case ItemState::failed: ++c.failed; break;
    default: break;
    }
    if (p.retries > 0) ++c.retried;
    c.compile_seconds += p.compile_seconds;
  }
  return c;
}

double parallel_efficiency(const Counts& counts, const RunFacts& facts) {
  if (facts.parallel <= 0 || facts.compile_wall_seconds <= 0 || counts.compile_seconds <= 0) return 0;
  return counts.compile_seconds / (facts.parallel * facts.compile_wall_seconds);
}

namespace {

json graph_record(const WorkItem& item, const ItemProgress& p) {
  return {{"status", status_name(p)},
          {"retry", p.retries},
          {"compile_time", p.compile_seconds},
          {"attempts", p.attempts},
          {"peak_rss_bytes", p.peak_rss_bytes},
          {"exit", p.last_exit},
          {"log_path", p.log_path.empty() ? json(nullptr) : json(p.log_path.string())},
          {"key", item.key},
          {"predicted_seconds", item.predicted.seconds}};
}

// `text` (lines from dump(2)) with every line after the first indented by
// `by` more spaces, as it would be nested that deep.
std::string nested(const std::string& text, std::size_t by) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    out.push_back(c);
    if (c == '\n') out.append(by, ' ');
  }
  return out;
}

} // namespace

Status write_report(const Pool& pool, const RunFacts& facts, const fs::path& path) {
  Counts c = count(pool);
  json summary = {{"total_graphs", c.found},
                  {"already_cached", c.cached},
                  {"compiled", c.compiled},
                  {"compiled_elsewhere", c.compiled_elsewhere},
                  {"failed", c.failed},
                  {"retried", c.retried},
                  {"parallel", facts.parallel},
                  {"parallel_efficiency", parallel_efficiency(c, facts)},
                  {"sum_compile_seconds", c.compile_seconds},
                  {"compiler_version", facts.compiler_version},
                  {"training_script", facts.trial_status.empty() ? "ok" : facts.trial_status},
                  {"refused_paths", facts.refused}};
  // Keys in the order a json object keeps them: sorted.
  std::vector<std::pair<std::string, std::size_t>> graphs;
  graphs.reserve(pool.items().size());
  for (std::size_t i = 0; i < pool.items().size(); ++i)
    graphs.emplace_back((pool.items()[i].entry_dir / cache::kGraphFile).string(), i);
  std::sort(graphs.begin(), graphs.end());
  graphs.erase(std::unique(graphs.begin(), graphs.end(),
                           [](const auto& a, const auto& b) { return a.first == b.first; }),
               graphs.end());

  util::AtomicFile out(path);
  if (auto s = out.open(); !s) return s;
  std::string buffer = "{\n  \"compilation_report\": ";
  auto flush = [&](bool always) -> Status {
    if (!always && buffer.size() < (1 << 16)) return ok_status();
    auto s = out.write(buffer);
    buffer.clear();
    return s;
  };
  if (graphs.empty()) buffer += "{}";
  for (std::size_t n = 0; n < graphs.size(); ++n) {
    const auto& [graph, i] = graphs[n];
    buffer += n == 0 ? "{\n    " : ",\n    ";
    buffer += json(graph).dump() + ": " + nested(graph_record(pool.items()[i], pool.progress()[i]).dump(2), 4);
    if (auto s = flush(false); !s) return s;
  }
  if (!graphs.empty()) buffer += "\n  }";
  buffer += ",\n  \"compilation_summary\": " + nested(summary.dump(2), 2);
  buffer += ",\n  \"compilation_time\": " + json(facts.wall_seconds).dump();
  buffer += ",\n  \"start_time\": " + json(facts.start_time).dump() + "\n}\n";
  if (auto s = flush(true); !s) return s;
  return out.commit();
}

std::vector<std::string> summary_lines(const Pool& pool, const RunFacts& facts) {
  Counts c = count(pool);
  std::vector<std::string> lines;
  char efficiency[32];
  std::snprintf(efficiency, sizeof efficiency, "%.0f%%", 100 * parallel_efficiency(c, facts));
  std::string line = std::to_string(c.found) + " graphs found, " + std::to_string(c.cached) +
                     " already cached, " + std::to_string(c.compiled) + " compiled, " +
                     std::to_string(c.failed) + " failed, " + std::to_string(c.retried) + " retried";
  if (c.compiled_elsewhere > 0) line += ", " + std::to_string(c.compiled_elsewhere) + " compiled by another process";
  lines.push_back(line);
  lines.push_back("wall time " + util::format_seconds(facts.wall_seconds) + " (compile phase " +
                  util::format_seconds(facts.compile_wall_seconds) + ", " + std::to_string(facts.parallel) +
                  " at once, parallel efficiency " + efficiency + ")");
  if (!facts.trial_status.empty()) lines.push_back("the training script failed: " + facts.trial_status);
  for (std::size_t i = 0; i < pool.items().size(); ++i) {
    const auto& p = pool.progress()[i];
    if (p.state != ItemState::failed) continue;
    const auto& item = pool.items()[i];
    lines.push_back("FAILED " + item.entry_dir.string() + ": compiler " + p.last_exit +
                    (p.attempts > 0 ? " (" + std::to_string(p.attempts) + " attempt(s))" : "") +
                    "; log " + p.log_path.string());
    for (const auto& tail : util::tail_lines(p.log_path, 5)) lines.push_back("  | " + tail);
  }
  return lines;
}

std::optional<fs::path> dump_results_path(const fs::path& workdir) {
  auto value = util::env("NEURON_PARALLEL_COMPILE_DUMP_RESULTS");
  if (!value || value->empty()) return std::nullopt;
  auto lower = util::to_lower(*value);
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return std::nullopt;
  if (util::is_truthy(*value)) return workdir / "neuron_parallel_compile_results.json";
  return fs::path(*value);
}

} // namespace npc::launcher
