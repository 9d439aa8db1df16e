// Scenario 7: the launcher's own peak memory with 10,000 graphs.

#include "fixtures.hpp"
#include "scenarios.hpp"

namespace bench {

Scenario run_launcher_memory(const Context& context) {
  Scenario s;
  s.id = "launcher-memory";
  s.title = "7. Memory of the launcher with 10,000 graphs";
  s.reproduce = "bench/run.sh --only launcher-memory";
  fs::path dir = context.options.scratch / s.id;
  make_dirs(dir);
  const std::size_t count = context.options.quick ? 2000 : 10000;

  // (a) A trial that reports 10,000 graphs, all already compiled.
  BulkSpec done_spec;
  done_spec.tag = "lmdone";
  done_spec.count = count;
  fs::path done_cache = dir / "done-cache";
  std::ignore = write_bulk_entries(done_cache, done_spec);
  std::string list;
  for (std::size_t i = 0; i < count; ++i)
    list += (bulk_entry_dir(done_cache, done_spec, i) / "model.hlo_module.pb").string() + "\n";
  fs::path list_file = dir / "graphs.txt";
  write_text(list_file, list);

  // (b) 10,000 pending entries, planned with --command compile --dry-run.
  BulkSpec pending_spec;
  pending_spec.tag = "lmpending";
  pending_spec.count = count;
  pending_spec.done = false;
  fs::path pending_cache = dir / "pending-cache";
  std::ignore = write_bulk_entries(pending_cache, pending_spec);
  log(context, "launcher-memory: caches written");

  fs::path run = dir / "run";
  auto fresh = [&](int) {
    wipe(run);
    make_dirs(run);
  };
  fs::path empty_cache = dir / "empty-cache";
  make_dirs(empty_cache);
  std::vector<Contender> contenders = {
      {"empty", fresh,
       [&](int) {
         Environment env = clean_environment(context.programs, empty_cache);
         Timed t = run_checked_rss(context, {{context.programs.launcher.string(), kStandinMemoryOption, kStandinMemory, "--command", "compile",
                                              "--parallel_compile_workdir", (run / "work").string(), "--dry-run"},
                                             env, run / "empty.log", std::nullopt},
                                   "neuron_parallel_compile --command compile --dry-run over an empty cache");
         return json{{"wall_seconds", t.seconds}, {"peak_rss_bytes", t.status.peak_rss_bytes}};
       }},
      {"trial", fresh,
       [&](int) {
         Environment env = clean_environment(context.programs, done_cache);
         Timed t = run_checked_rss(
             context,
             {{context.programs.launcher.string(), kStandinMemoryOption, kStandinMemory, "--parallel_compile_workdir", (run / "work").string(), "--report",
               (run / "report.json").string(), "--", "/bin/sh", "-c",
               "cat '" + list_file.string() + "' >> \"$NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG\""},
              env, run / "launcher.log", std::nullopt},
             "neuron_parallel_compile over 10,000 cached graphs");
         json doc = json::parse(read_text(run / "report.json"), nullptr, false);
         json r = {{"wall_seconds", t.seconds}, {"peak_rss_bytes", t.status.peak_rss_bytes}};
         if (!doc.is_discarded()) {
           r["total_graphs"] = doc["compilation_summary"].value("total_graphs", 0);
           r["already_cached"] = doc["compilation_summary"].value("already_cached", 0);
         }
         return r;
       }},
      {"dry-run", fresh,
       [&](int) {
         Environment env = clean_environment(context.programs, pending_cache);
         Timed t = run_checked_rss(context, {{context.programs.launcher.string(), kStandinMemoryOption, kStandinMemory, "--command", "compile",
                                 "--parallel_compile_workdir", (run / "work").string(), "--dry-run"},
                                env, run / "dry-run.log", std::nullopt},
                               "neuron_parallel_compile --command compile --dry-run over 10,000 pending graphs");
         return json{{"wall_seconds", t.seconds},
                     {"peak_rss_bytes", t.status.peak_rss_bytes},
                     {"planned", count_lines(run / "dry-run.log")}};
       }},
  };
  auto records = alternate(context, s.id, contenders);
  auto mib = [](const std::vector<json>& rs) {
    std::vector<double> v;
    for (double b : column(rs, "peak_rss_bytes")) v.push_back(b / kMiB);
    return v;
  };
  const std::string n = count_text(count);
  const double base = spread(mib(records[0])).median;
  for (std::size_t i = 1; i < 3; ++i) {
    std::vector<double> v = mib(records[i]);
    std::string name = i == 1 ? "collect-and-compile: trial reports " + n + " graphs, all cached (report written)"
                              : "--command compile --dry-run: " + n + " pending graphs planned";
    double m = spread(v).median;
    Row row{name, "peak RSS", "MiB", v, "≤ 32 MiB", m <= 32.0, "", 1};
    if (!*row.met)
      row.note = num((m - base) * 1024 / static_cast<double>(count), 1) + " KiB per graph above the " + num(base, 1) +
                 " MiB of a run with none: every graph's work item, cache state and prediction are held at once "
                 "(the report is written one graph at a time)";
    s.rows.push_back(row);
  }
  s.rows.push_back({"baseline: --command compile --dry-run, empty cache", "peak RSS", "MiB", mib(records[0]), "",
                    std::nullopt, "", 1});
  s.rows.push_back({"collect-and-compile, " + n + " cached graphs", "wall time", "s", column(records[1], "wall_seconds"),
                    "", std::nullopt, "", 3});
  s.rows.push_back({"--command compile --dry-run, " + n + " pending graphs", "wall time", "s",
                    column(records[2], "wall_seconds"), "", std::nullopt, "", 3});
  s.workload = {{"graphs", count},
                {"trial", "/bin/sh -c 'cat <list of " + n + " graph paths> >> \"$NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG\"'"},
                {"peak_rss", "ru_maxrss from wait4 on the launcher, taken by the small helper bench/npc_peak_rss: the "
                             "largest of the launcher and the children it waited for (the trial's shell and cat are "
                             "~1–2 MiB)"}};
  s.raw = {{"empty_cache", records[0]}, {"collect_all_cached", records[1]}, {"dry_run_pending", records[2]}};
  s.what = "Peak RSS of neuron_parallel_compile itself with " + n +
           " graphs, in two shapes: (a) the default collect-and-compile mode over a trial (a shell that writes " + n +
           " graph paths into the cache-path log, as " + n +
           " extracted graphs would), every graph already compiled, with `--report` writing the full JSON report; "
           "(b) `--command compile --dry-run` over " + n +
           " pending entries, which builds the whole work list and cost predictions and prints the plan. MiB = 2^20 "
           "bytes; the 32 MB target is read as 32 MiB.";
  if (!context.options.keep) {
    wipe(done_cache);
    wipe(pending_cache);
  }
  return s;
}

} // namespace bench
