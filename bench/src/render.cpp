#include "render.hpp"

#include <cstdio>
#include <sstream>

namespace bench {

using nlohmann::json;

namespace {

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string with_unit(const std::string& number, const std::string& unit) {
  if (unit.empty()) return number;
  if (unit == "x") return number + "×";
  return number + " " + unit;
}

int decimals_of(const json& row) {
  if (row.contains("decimals")) return row["decimals"].get<int>();
  std::string unit = row.value("unit", "");
  if (unit == "MB/s" || unit.empty()) return 0;
  if (unit == "MiB" || unit == "ms") {
    double m = row.value("median", 0.0);
    return m >= 100 ? 0 : (m >= 10 ? 1 : 2);
  }
  return unit == "x" ? 2 : 3;
}

std::string median_text(const json& row) {
  return with_unit(fixed(row.value("median", 0.0), decimals_of(row)), row.value("unit", ""));
}

std::string spread_text(const json& row) {
  int d = decimals_of(row);
  return fixed(row.value("min", 0.0), d) + "–" + fixed(row.value("max", 0.0), d);
}

std::string met_text(const json& row) {
  if (!row.contains("met")) return "";
  return row["met"].get<bool>() ? "met" : "**missed**";
}

std::string cell(std::string text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

void scenario_table(std::ostringstream& md, const json& scenario) {
  md << "| Contender | Figure | Median | Spread (min–max) | Runs | Target | Met | Note |\n";
  md << "| --- | --- | ---: | ---: | ---: | --- | --- | --- |\n";
  for (const auto& row : scenario["rows"]) {
    md << "| " << cell(row.value("contender", "")) << " | " << cell(row.value("figure", "")) << " | "
       << median_text(row) << " | " << spread_text(row) << " | " << row.value("runs", 0) << " | "
       << cell(row.value("target", "")) << " | " << met_text(row) << " | " << cell(row.value("note", "")) << " |\n";
  }
}

} // namespace

std::string render_markdown(const json& doc) {
  std::ostringstream md;
  const json& machine = doc["machine"];
  md << "# Performance\n\n";
  md << "Users run `neuron_parallel_compile` to reach their first training step sooner. These benchmarks measure "
        "that, side by side with what users would otherwise do, and check the cache's speed at scale. The stand-in "
        "compiler (`tools/standin/`) supplies compile costs, so the figures are about scheduling and the cache, not "
        "about neuronx-cc. Absolute times on a shared machine are noisy: the headline figures are ratios, and "
        "every comparison runs its contenders side by side in the same invocation, in an order rotated every round, "
        << "at least " << doc.value("runs_per_comparison", 0)
        << " times (the Runs column says how many); the tables give the median and the spread (min–max). Benchmarks are not tests: nothing in the "
           "test suite asserts a time.\n\n";
  md << "This file and `docs/performance.json` (every raw per-run figure) are written by the harness; do not edit "
        "them by hand.\n\n";

  md << "## Reproduce\n\n```sh\nbench/run.sh\n```\n\n";
  md << "It configures the project if needed and builds what the benchmarks run (`build/`, or `$BUILD_DIR`), runs "
        "the driver (`build/bench/npc_bench`), writes `docs/performance.md` and `docs/performance.json`, and removes "
        "its scratch directory: `$NPC_BENCH_SCRATCH`, else `/dev/shm` when it is a tmpfs with 4 GiB free, else "
        "`$TMPDIR` or `/tmp` (about 3 GB of small files at the peak; see the machine table for why a tmpfs is "
        "preferred). `bench/run.sh --only ID[,ID...]` re-runs some scenarios (ids below) and keeps the others' "
        "figures; `--runs N` changes the repetitions; `--quick` shrinks every workload to try the harness out and "
        "writes `build/bench/quick-performance.*` instead (its figures are not comparable).\n\n";
  md << "This run: `" << doc.value("command", "bench/run.sh") << "`, driver time **"
     << fixed(doc.value("duration_seconds", 0.0), 0) << " s**";
  if (doc.contains("build_seconds")) md << " plus " << fixed(doc["build_seconds"].get<double>(), 0) << " s of build";
  md << ", on " << doc.value("generated_utc", "") << ", revision `" << doc.value("revision", "unknown") << "`.\n\n";
  if (doc.contains("partial_runs")) {
    md << "Scenarios re-run alone since then:";
    for (const auto& p : doc["partial_runs"]) {
      md << " " << p.value("utc", "") << " (";
      bool first = true;
      for (const auto& id : p["scenarios"]) {
        md << (first ? "" : ", ") << "`" << id.get<std::string>() << "`";
        first = false;
      }
      md << ", " << fixed(p.value("duration_seconds", 0.0), 0) << " s);";
    }
    md << " each scenario below says when it ran.\n\n";
  }
  md << "| Machine | |\n| --- | --- |\n";
  md << "| CPU | " << cell(machine.value("cpu_model", "")) << " |\n";
  md << "| Cores (nproc) | " << machine.value("nproc", 0) << " |\n";
  md << "| SHA extensions (`sha_ni`) | " << (machine.value("sha_ni", false) ? "yes" : "no") << " |\n";
  md << "| Memory | " << fixed(machine.value("mem_total_bytes", 0.0) / (1024.0 * 1024 * 1024), 1) << " GiB |\n";
  md << "| Kernel | " << cell(machine.value("kernel", "")) << " |\n";
  md << "| Compiler, build type | " << cell(machine.value("cxx", "")) << ", " << machine.value("build_type", "")
     << " |\n";
  md << "| OpenSSL | " << cell(machine.value("openssl", "")) << " |\n";
  md << "| Process start (`/bin/true`, median of 20) | " << fixed(machine.value("bin_true_ms", 0.0), 2) << " ms |\n";
  auto churn = [&](const char* key, const char* label) {
    if (!machine.contains(key) || machine[key].contains("error")) return;
    const json& c = machine[key];
    md << "| " << label << " | `" << cell(c.value("path", "")) << "`: " << c.value("filesystem", "") << " ("
       << cell(c.value("mount_options", "")) << "); per directory of 5 small files: create "
       << fixed(c.value("create_ms_per_entry", 0.0), 2) << " ms, delete " << fixed(c.value("delete_ms_per_entry", 0.0), 2)
       << " ms |\n";
  };
  churn("scratch", "Scratch directory (every cache of the run)");
  churn("tmp", "`$TMPDIR`/`/tmp`, for comparison");
  md << "| Load average (1, 5, 15 min) at start / end | " << cell(machine.value("load_average_at_start", "")) << " / "
     << cell(machine.value("load_average_at_end", "")) << " |\n\n";

  if (doc.contains("errors") && !doc["errors"].empty()) {
    md << "## Scenarios that failed to run\n\n";
    for (const auto& e : doc["errors"])
      md << "- `" << e.value("scenario", "") << "`: " << cell(e.value("message", "")) << "\n";
    md << "\n";
  }

  md << "## Headline\n\n";
  md << "| # | Scenario | Figure | Median | Spread | Target | Met | What limits it |\n"
        "| --- | --- | --- | ---: | ---: | --- | --- | --- |\n";
  for (const auto& scenario : doc["scenarios"]) {
    for (const auto& row : scenario["rows"]) {
      if (!row.contains("target") && !row.value("headline", false)) continue;
      std::string title = scenario.value("title", "");
      std::string number = title.substr(0, title.find(' '));
      md << "| " << number << " | " << cell(title.substr(title.find(' ') + 1)) << " | "
         << cell(row.value("contender", "") + ": " + row.value("figure", "")) << " | " << median_text(row) << " | "
         << spread_text(row) << " | " << cell(row.value("target", "")) << " | " << met_text(row) << " | "
         << (row.value("met", true) ? "" : cell(row.value("note", ""))) << " |\n";
    }
  }
  md << "\n";
  if (doc.contains("summary") && !doc["summary"].empty()) {
    for (const auto& line : doc["summary"]) md << line.get<std::string>() << "\n\n";
  }

  for (const auto& scenario : doc["scenarios"]) {
    md << "## " << scenario.value("title", "") << "\n\n";
    md << scenario.value("what", "") << "\n\n";
    md << "Run only this: `" << scenario.value("reproduce", "") << "` (id `" << scenario.value("id", "")
       << "`; took " << fixed(scenario.value("scenario_seconds", 0.0), 0) << " s, ended " << scenario.value("ran_utc", "")
       << "; load average before / after: " << scenario.value("load_average_before", "") << " / "
       << scenario.value("load_average_after", "") << ").\n\n";
    scenario_table(md, scenario);
    md << "\n";
    for (const auto& note : scenario["notes"]) md << note.get<std::string>() << "\n\n";
  }
  md << "## Raw figures\n\n`docs/performance.json` holds, per scenario, the workload (including every generated "
        "graph's cost, size and peak), each row above with all its per-run values, and every per-run record "
        "(`runs`), including the round and the position the contender ran in.\n";
  return md.str();
}

} // namespace bench
