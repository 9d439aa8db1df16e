#include <npc/launcher/report.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <utility>

#include <npc/cache/layout.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/json_text.hpp>
#include <npc/util/output_file.hpp>
#include <npc/util/strings.hpp>

namespace npc::launcher {

using nlohmann::json;

namespace {

const char* status_name(const ItemProgress& p) {
  switch (p.state) {
  case ItemState::compiled: return "compiled";
  case ItemState::cached: return "cached";
  case ItemState::compiled_elsewhere: return "compiled_elsewhere";
  case ItemState::locked_elsewhere: return "locked_elsewhere";
  case ItemState::removed_elsewhere: return "removed_elsewhere";
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
    case ItemState::locked_elsewhere: ++c.locked_elsewhere; break;
    case ItemState::removed_elsewhere: ++c.removed_elsewhere; break;
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
                  {"removed_elsewhere", c.removed_elsewhere},
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

  util::OutputFile out(path);
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
    buffer += util::json_string_text(graph) + ": " +
              nested(util::to_json_text(graph_record(pool.items()[i], pool.progress()[i]), 2), 4);
    if (auto s = flush(false); !s) return s;
  }
  if (!graphs.empty()) buffer += "\n  }";
  buffer += ",\n  \"compilation_summary\": " + nested(util::to_json_text(summary, 2), 2);
  buffer += ",\n  \"compilation_time\": " + util::to_json_text(json(facts.wall_seconds));
  buffer += ",\n  \"start_time\": " + util::to_json_text(json(facts.start_time)) + "\n}\n";
  if (auto s = flush(true); !s) return s;
  return out.commit();
}

std::vector<std::string> slowest_lines(const Pool& pool, const RunFacts& facts) {
  std::vector<std::size_t> ran;
  for (std::size_t i = 0; i < pool.items().size(); ++i)
    if (pool.progress()[i].compile_seconds > 0) ran.push_back(i);
  // One compile is its own slowest: nothing to tell apart.
  if (ran.size() < 2) return {};
  const std::size_t shown = std::min(ran.size(), kSlowestShown);
  std::partial_sort(ran.begin(), ran.begin() + static_cast<long>(shown), ran.end(), [&](std::size_t a, std::size_t b) {
    return pool.progress()[a].compile_seconds > pool.progress()[b].compile_seconds;
  });
  std::vector<std::string> lines = {"slowest compiles (share of the compile phase's " +
                                    util::format_seconds(facts.compile_wall_seconds) + "):"};
  for (std::size_t k = 0; k < shown; ++k) {
    const ItemProgress& p = pool.progress()[ran[k]];
    char share[32];
    std::snprintf(share, sizeof share, "%3.0f%%",
                  facts.compile_wall_seconds > 0 ? 100 * p.compile_seconds / facts.compile_wall_seconds : 0.0);
    std::string line = "  " + util::format_seconds(p.compile_seconds) + " " + share + "  " +
                       pool.items()[ran[k]].entry_dir.filename().string();
    if (p.state == ItemState::failed) line += " (failed)";
    if (p.attempts > 1) line += " (" + std::to_string(p.attempts) + " attempts)";
    lines.push_back(line);
  }
  return lines;
}

namespace {

// Every graph known done, failed or gone before the compile phase: no
// compile was to run.
bool nothing_to_compile(const Pool& pool) {
  return std::all_of(pool.progress().begin(), pool.progress().end(), [](const ItemProgress& p) {
    return p.attempts == 0 && (p.state == ItemState::cached || p.state == ItemState::removed_elsewhere ||
                               (p.state == ItemState::failed && p.cached_failure));
  });
}

// "wall time 3.5s (compile phase 3.4s, 2 at once, parallel efficiency 99%)";
// an efficiency only of compiles that ran here, and none of a run that had
// nothing to compile.
std::string wall_time_line(const Pool& pool, const Counts& c, const RunFacts& facts) {
  std::string line = "wall time " + util::format_seconds(facts.wall_seconds);
  if (nothing_to_compile(pool)) return line + "; nothing to compile";
  line += " (compile phase " + util::format_seconds(facts.compile_wall_seconds) + ", " +
          std::to_string(facts.parallel) + " at once";
  if (c.compile_seconds <= 0) return line + ")";
  char efficiency[32];
  std::snprintf(efficiency, sizeof efficiency, "%.0f%%", 100 * parallel_efficiency(c, facts));
  return line + ", parallel efficiency " + efficiency + ")";
}

} // namespace

std::vector<std::string> summary_lines(const Pool& pool, const RunFacts& facts) {
  Counts c = count(pool);
  std::vector<std::string> lines;
  std::string line = std::to_string(c.found) + " graphs found, " + std::to_string(c.cached) +
                     " already cached, " + std::to_string(c.compiled) + " compiled, " +
                     std::to_string(c.failed) + " failed, " + std::to_string(c.retried) + " retried";
  if (c.compiled_elsewhere > 0) line += ", " + std::to_string(c.compiled_elsewhere) + " compiled by another process";
  if (c.locked_elsewhere > 0)
    line += ", " + std::to_string(c.locked_elsewhere) + " locked by another process (left to it)";
  if (c.removed_elsewhere > 0)
    line += ", " + std::to_string(c.removed_elsewhere) + " removed by another process (not compiled)";
  lines.push_back(line);
  lines.push_back(wall_time_line(pool, c, facts));
  for (const auto& slow : slowest_lines(pool, facts)) lines.push_back(slow);
  if (!facts.trial_status.empty()) lines.push_back("the training script failed: " + facts.trial_status);
  for (std::size_t i = 0; i < pool.items().size(); ++i) {
    const auto& p = pool.progress()[i];
    if (p.state != ItemState::failed) continue;
    const auto& item = pool.items()[i];
    if (p.failed_in_run) {
      // Failed for the whole run: none of its launchers compiles it again.
      lines.push_back("FAILED " + item.entry_dir.string() + ": " + p.last_exit +
                      " (failed for the whole run, not retried by each of its launchers; the next run compiles it "
                      "again)");
      continue;
    }
    if (p.cached_failure) {
      // Not compiled in this run: say how to have it compiled again.
      lines.push_back("FAILED " + item.entry_dir.string() + ": " + p.last_exit + "; log " + p.log_path.string() +
                      " (compile it again with --retry_failed_compilation in NEURON_CC_FLAGS, or forget the "
                      "failure with neuron_cache clear-failed)");
      continue;
    }
    // "compiler exit code 70", but "No space left on device": a fault of the
    // disk or of the cache is not the compiler's.
    lines.push_back("FAILED " + item.entry_dir.string() + ": " +
                    (p.last_blame == Blame::compiler ? "compiler " : "") + p.last_exit +
                    (p.attempts > 0 ? " (" + std::to_string(p.attempts) + " attempt(s))" : "") +
                    "; log " + p.log_path.string());
    for (const auto& tail : util::tail_lines(p.log_path, 5)) lines.push_back("  | " + tail);
  }
  return lines;
}

// DEPRECATED: see report.hpp; run.cpp still calls it.
std::optional<fs::path> dump_results_path(const fs::path& workdir) {
  auto value = util::env("NEURON_PARALLEL_COMPILE_DUMP_RESULTS");
  if (!value || value->empty()) return std::nullopt;
  auto lower = util::to_lower(*value);
  if (lower == "0" || lower == "false" || lower == "no" || lower == "off") return std::nullopt;
  if (util::is_truthy(*value)) return workdir / "neuron_parallel_compile_results.json";
  return fs::path(*value);
}

// --- The original tool's results -------------------------------------------

namespace {

// Each graph with an outcome, by the path the original names it by (its
// model.hlo_module.pb), sorted; true when compiled, false when failed.
struct Outcome {
  bool ok = false;
  std::size_t item = 0;
};

std::map<std::string, Outcome> outcomes(const Pool& pool) {
  std::map<std::string, Outcome> by_path;
  for (std::size_t i = 0; i < pool.items().size(); ++i) {
    bool ok = false;
    switch (pool.progress()[i].state) {
    case ItemState::compiled:
    case ItemState::cached:
    case ItemState::compiled_elsewhere: ok = true; break;
    case ItemState::failed: ok = false; break;
    default: continue; // deferred (or unfinished): no outcome yet
    }
    by_path.emplace((pool.items()[i].entry_dir / cache::kGraphFile).string(), Outcome{ok, i});
  }
  return by_path;
}

// What Python's json.dumps(document, indent=4) prints: the same layout as
// dump(4), ASCII only; a path's bytes that are not UTF-8 become \udcXX, as
// Python writes the str os.fsdecode gives for them (util/json_text.hpp).
// Held in memory: three fields a graph stay small even for
// 10,000 graphs, unlike write_report's records.
std::string python_json(const nlohmann::ordered_json& document) {
  return util::to_json_text(document, 4, util::JsonAscii::escaped);
}

} // namespace

bool dump_results_requested() {
  auto value = util::env("NEURON_PARALLEL_COMPILE_DUMP_RESULTS");
  return value && !value->empty();
}

std::string python_float_text(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // The shortest digits that round-trip, as Python's repr picks them.
  char buffer[64];
#if defined(__cpp_lib_to_chars)
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string scientific(buffer, ec == std::errc() ? end : buffer);
#else // libstdc++ before 11: no to_chars for double; the fewest digits that read back the same
  for (int precision = 0; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*e", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  std::string scientific(buffer);
#endif
  std::string sign;
  if (!scientific.empty() && scientific.front() == '-') {
    sign = "-";
    scientific.erase(0, 1);
  }
  auto e = scientific.find('e');
  std::string digits;
  for (char c : scientific.substr(0, e))
    if (c != '.') digits += c;
  int exponent = std::atoi(scientific.c_str() + e + 1);
  int point = exponent + 1; // digits are 0.<digits> × 10^point
  std::string out = sign;
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
    } else if (static_cast<std::size_t>(point) >= digits.size()) {
      out += digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<std::size_t>(point)) + "." + digits.substr(static_cast<std::size_t>(point));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

Result<OriginalResults> write_original_results(const Pool& pool, double start_epoch_seconds,
                                               double compilation_seconds, double total_seconds,
                                               const fs::path& directory, double now_epoch_seconds,
                                               const std::string& tag) {
  using ordered = nlohmann::ordered_json;
  auto graphs = outcomes(pool);
  std::size_t ok = 0, failed = 0;
  ordered report = ordered::object();
  for (const auto& [path, outcome] : graphs) {
    ++(outcome.ok ? ok : failed);
    const auto& p = pool.progress()[outcome.item];
    report[path] = ordered{{"status", outcome.ok}, {"retry", p.retries}, {"compile_time", p.compile_seconds}};
  }
  // The original counts statuses in a dict: a status nobody had is absent.
  ordered summary = ordered::object();
  if (ok > 0) summary["true"] = ok;
  if (failed > 0) summary["false"] = failed;
  ordered results = {{"compilation_summary", std::move(summary)},
                     {"compilation_report", std::move(report)},
                     {"start_time", start_epoch_seconds},
                     {"compilation_time", compilation_seconds}};
  ordered total = {{"total_neuron_parallel_compile_time", total_seconds}};

  std::string time = (tag.empty() ? "" : tag + "_") + python_float_text(now_epoch_seconds);
  OriginalResults written{directory / ("neuron_parallel_compile_results_" + time + ".json"),
                          directory / ("total_neuron_parallel_compile_results_" + time + ".json")};
  if (auto s = util::write_output_file(written.results, python_json(results)); !s)
    return fail("cannot write " + written.results.string() + ": " + s.error());
  if (auto s = util::write_output_file(written.total, python_json(total)); !s)
    return fail("cannot write " + written.total.string() + ": " + s.error());
  return written;
}

std::vector<std::string> original_summary_lines(const Pool& pool) {
  std::size_t ok = 0, failed = 0;
  for (const auto& [path, outcome] : outcomes(pool)) ++(outcome.ok ? ok : failed);
  // Every graph found counts, also one left to another holder: the totals
  // must not say fewer graphs than the run found.
  std::set<std::string> graphs;
  for (const auto& item : pool.items()) graphs.insert((item.entry_dir / cache::kGraphFile).string());
  return {"Total graphs: " + std::to_string(graphs.size()), "Total successful compilations: " + std::to_string(ok),
          "Total failed compilations: " + std::to_string(failed)};
}

} // namespace npc::launcher
