// Scenario 12: what seeing the compile costs. The cache's usage counters
// (cache/usage_stats.hpp) are updated by every hit, so a hit through
// neuron_cc_wrapper is timed counted and uncounted (NEURON_COMPILE_CACHE_STATS=0)
// in turn; and the launcher's whole run is timed with and without --trace.

#include "fixtures.hpp"
#include "scenarios.hpp"

namespace bench {

Scenario run_observe(const Context& context) {
  Scenario s;
  s.id = "observe";
  s.title = "12. What counting and tracing cost";
  s.reproduce = "bench/run.sh --only observe";
  const bool quick = context.options.quick;
  fs::path dir = context.options.scratch / s.id;
  make_dirs(dir);

  // (a) A hit, counted and not.
  const int spawns = quick ? 20 : 200;
  fs::path cache = dir / "cache";
  wipe(cache);
  Environment env = clean_environment(context.programs, cache);
  env.set("STANDIN_CC_MODE", "sleep");
  env.set("STANDIN_CC_BASE_MS", "50");
  fs::path graph = dir / "hit.hlo";
  write_text(graph, "HloModule observe\nENTRY e { ROOT p = f32[1024] parameter(0) }\n");
  RunSpec counted{{context.programs.wrapper.string(), "compile", "--graph", graph.string(), "--output",
                   (dir / "hit.neff").string()},
                  env, "/dev/null", std::nullopt};
  std::ignore = run_checked(counted, "neuron_cc_wrapper (the miss that fills the cache)");
  RunSpec uncounted = counted;
  uncounted.environment.set("NEURON_COMPILE_CACHE_STATS", "0");

  // (b) The launcher's whole run into an empty cache, with and without a trace.
  const int graphs_per_step = quick ? 10 : 100;
  fs::path run = dir / "run";
  auto launcher = [&](bool traced) {
    std::vector<std::string> argv = {context.programs.launcher.string(), "--memory-per-compile", "1GiB",
                                     "--parallel_compile_workdir", (run / "work").string()};
    if (traced) {
      argv.push_back("--trace");
      argv.push_back((run / "trace.json").string());
    }
    argv.emplace_back("--");
    const std::vector<std::string> trial = {context.programs.train.string(), "--nproc_per_node", "1",
                                            "--steps_this_run", "2", "--layers", "4", "--hidden", "256",
                                            "--eval_every", "0", "--graphs_per_step", std::to_string(graphs_per_step),
                                            "--workdir", (run / "trial").string()};
    argv.insert(argv.end(), trial.begin(), trial.end());
    Environment launch_env = clean_environment(context.programs, run / "cache");
    launch_env.set("STANDIN_CC_MODE", "sleep");
    launch_env.set("STANDIN_CC_BASE_MS", "0");
    Timed t = run_checked({argv, launch_env, run / "launcher.log", std::nullopt},
                          std::string("neuron_parallel_compile") + (traced ? " --trace" : ""));
    json record = {{"wall_seconds", t.seconds}};
    if (traced) record["trace_bytes"] = fs::file_size(run / "trace.json");
    return record;
  };
  auto fresh = [&](int) {
    wipe(run);
    make_dirs(run / "trial");
  };

  std::vector<Contender> hits = {
      {"hit-counted-vs-not", nullptr, [&](int) { return spawn_in_turn(counted, uncounted, spawns); }}};
  auto r = alternate(context, s.id + " (hits)", hits);
  // A run is a fraction of a second of many short processes: more rounds
  // than the others, for a median a busy moment does not move.
  std::vector<Contender> runs = {
      {"launcher-traced", fresh, [&](int) { return launcher(true); }},
      {"launcher", fresh, [&](int) { return launcher(false); }},
  };
  auto launcher_runs = alternate(context, s.id + " (runs)", runs, quick ? 0 : 11);
  r.insert(r.end(), launcher_runs.begin(), launcher_runs.end());
  std::vector<double> traced = column(r[1], "wall_seconds"), plain = column(r[2], "wall_seconds"), trace_ratio;
  for (std::size_t i = 0; i < traced.size(); ++i) trace_ratio.push_back(traced[i] / plain[i]);
  const double hit_ratio = spread(column(r[0], "ratio")).median, run_ratio = spread(trace_ratio).median;
  s.rows.push_back({"a cache hit through neuron_cc_wrapper, counted / not counted (NEURON_COMPILE_CACHE_STATS=0)",
                    "start-to-exit ratio", "x", column(r[0], "ratio"), "≤ 1.10", hit_ratio <= 1.10,
                    "medians of " + std::to_string(spawns) + " spawns of each per run, in turn (counted " +
                        num(spread(column(r[0], "first_ms")).median, 2) + " ms, not counted " +
                        num(spread(column(r[0], "second_ms")).median, 2) + " ms)",
                    3});
  s.rows.push_back({"neuron_parallel_compile's whole run, with --trace / without, paired per round", "time ratio",
                    "x", trace_ratio, "≤ 1.05", run_ratio <= 1.05, "", 3});
  s.rows.push_back({"the trace file", "size", "kB", [&] {
                      std::vector<double> kb;
                      for (double b : column(r[1], "trace_bytes")) kb.push_back(b / 1000.0);
                      return kb;
                    }(),
                    "", std::nullopt, "", 1});
  s.rows.push_back({"the launcher with --trace", "wall time", "s", traced, "", std::nullopt, "", 3});
  s.rows.push_back({"the launcher without", "wall time", "s", plain, "", std::nullopt, "", 3});
  s.workload = {{"hit", "one graph, compiled once untimed, then hit " + std::to_string(spawns) + " times each way"},
                {"launcher", "standin_train, 1 rank, 2 steps, --graphs_per_step " + std::to_string(graphs_per_step)},
                {"stand_in", "sleep mode; the launcher's compiles cost nothing, so the trace's share is at its largest"}};
  s.raw = {{"hit", r[0]}, {"launcher_traced", r[1]}, {"launcher", r[2]}};
  s.what =
      "**Counting.** Every hit adds to the cache's usage counters: one of 16 small files under `.npc/stats/`, "
      "updated under `flock`, and the entry's record read for the compile time it saved. One graph is compiled "
      "once, then `neuron_cc_wrapper compile` hits it " + std::to_string(spawns) +
      " times counted and " + std::to_string(spawns) +
      " times with `NEURON_COMPILE_CACHE_STATS=0`, in turn; the ratio is of the two medians. "
      "**Tracing.** `neuron_parallel_compile` over a 2-step trial of the stand-in training script (one rank, " +
      std::to_string(graphs_per_step) +
      " graphs a step) into an empty cache, with and without `--trace`; the stand-in compiler costs nothing, so "
      "the launcher's own work, the trace's included, is all there is to time. The contenders run in turn within "
      "each round, the order rotated.";
  return s;
}

} // namespace bench
