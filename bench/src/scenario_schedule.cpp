// Scenario 1: schedule quality. The same graph set, the same stand-in
// compiler, three ways of pre-compiling it: one by one as a training run
// compiles just in time, `xargs -P N` over the dumped graphs in trial order,
// and neuron_parallel_compile. Each is measured against the lower bound
// max(sum of costs / N, longest cost), a cost being what the compiler itself
// takes for the graph, solo.

#include <algorithm>
#include <fstream>
#include <unistd.h>

#include "fixtures.hpp"
#include "scenarios.hpp"

namespace bench {

std::size_t count_lines(const fs::path& path) {
  std::ifstream in(path);
  std::size_t n = 0;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) ++n;
  return n;
}

std::size_t count_files(const fs::path& dir, const std::string& suffix) {
  std::size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().ends_with(suffix)) ++n;
  return n;
}

std::string xargs_command(const fs::path& graphs_dir, const fs::path& out_dir, int n) {
  return "xargs -P " + std::to_string(n) + " -I{} neuronx-cc compile --framework=XLA '" + graphs_dir.string() +
         "/{}' --output '" + out_dir.string() + "/{}.neff' < '" + (graphs_dir / "trial-order.txt").string() + "'";
}

json run_xargs(const Context& context, const Environment& env, const fs::path& graphs_dir, const fs::path& out_dir,
               int n, const fs::path& log) {
  (void)context;
  make_dirs(out_dir);
  RunSpec spec{{"/bin/sh", "-c", xargs_command(graphs_dir, out_dir, n)}, env, log, out_dir};
  double start = now_seconds();
  Timed t = run_timed(spec);
  // When a command dies by a signal, xargs stops and exits at once, leaving
  // the compiles still running behind: the run ends when they do.
  std::size_t left = settle_children();
  json record = {{"wall_seconds", now_seconds() - start},
                 {"xargs_exit_seconds", t.seconds},
                 {"exit", t.status.describe()},
                 {"neffs", count_files(out_dir, ".neff")}};
  if (left > 0) record["compiles_left_running_by_xargs"] = left;
  return record;
}

json run_ours_compile(const Context& context, const Environment& env, const fs::path& run_dir,
                      const std::vector<std::string>& extra_args) {
  fs::path report = run_dir / "report.json";
  std::vector<std::string> argv = {context.programs.launcher.string(), "--command", "compile",
                                   "--parallel_compile_workdir", (run_dir / "work").string(),
                                   "--report", report.string()};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  RunSpec spec{argv, env, run_dir / "launcher.log", std::nullopt};
  Timed t = run_timed(spec);
  json record = {{"wall_seconds", t.seconds},
                 {"exit", t.status.describe()},
                 {"launcher_peak_rss_bytes", t.status.peak_rss_bytes}};
  std::string text = read_text(report);
  json doc = json::parse(text, nullptr, false);
  if (!doc.is_discarded() && doc.contains("compilation_summary")) {
    const json& s = doc["compilation_summary"];
    for (const char* key : {"total_graphs", "compiled", "failed", "retried", "parallel", "sum_compile_seconds"})
      if (s.contains(key)) record[key] = s[key];
    if (doc.contains("compilation_time")) record["compilation_time"] = doc["compilation_time"];
    // Start order and per-graph time, to see how the pool ordered the work.
    json per_graph = json::array();
    for (const auto& [path, item] : doc["compilation_report"].items())
      per_graph.push_back({{"key", item.value("key", "")},
                           {"compile_time", item.value("compile_time", 0.0)},
                           {"attempts", item.value("attempts", 0)},
                           {"peak_rss_bytes", item.value("peak_rss_bytes", 0)},
                           {"predicted_seconds", item.value("predicted_seconds", 0.0)}});
    record["per_graph"] = per_graph;
  } else {
    record["report_missing"] = true;
  }
  return record;
}

json run_serial_jit(const Context& context, const Environment& env, const Workload& workload,
                    const fs::path& graphs_dir, const fs::path& out_dir, const fs::path& log) {
  make_dirs(out_dir);
  std::size_t compiled = 0;
  double start = now_seconds();
  for (const auto& g : workload.graphs) {
    RunSpec spec{{context.programs.wrapper.string(), "compile", "--graph", (graphs_dir / g.name).string(), "--output",
                  (out_dir / (g.name + ".neff")).string()},
                 env, log, std::nullopt};
    if (run_timed(spec).status.success()) ++compiled;
  }
  double wall = now_seconds() - start;
  return {{"wall_seconds", wall}, {"compiled", compiled}};
}

CompilerOverhead measure_compiler_overhead(const Context& context, const Workload& workload,
                                           const fs::path& graphs_dir, const fs::path& dir,
                                           const Environment& env) {
  const Graph* smallest = &workload.graphs.front();
  const Graph* largest = smallest;
  for (const auto& g : workload.graphs) {
    if (g.bytes < smallest->bytes) smallest = &g;
    if (g.bytes > largest->bytes) largest = &g;
  }
  make_dirs(dir);
  auto solo = [&](const Graph& g) {
    std::string text = read_text(graphs_dir / g.name);
    std::string marker = "// standin-cost-ms: " + std::to_string(g.cost_ms);
    auto at = text.find(marker);
    if (at != std::string::npos) text.replace(at, marker.size(), "// standin-cost-ms: 0");
    fs::path copy = dir / ("zero-cost-" + g.name);
    write_text(copy, text);
    std::vector<double> times;
    for (int i = 0; i < 5; ++i) {
      RunSpec spec{{context.programs.compiler.string(), "compile", "--framework=XLA", copy.string(), "--output",
                    (dir / "out.neff").string()},
                   env, dir / "calibration.log", dir};
      times.push_back(run_checked(spec, "the stand-in compiler on " + copy.string()).seconds);
    }
    return spread(times).median;
  };
  CompilerOverhead o;
  o.small_bytes = smallest->bytes;
  o.large_bytes = largest->bytes;
  o.small_seconds = solo(*smallest);
  o.large_seconds = solo(*largest);
  if (o.large_bytes > o.small_bytes)
    o.seconds_per_byte = std::max(0.0, (o.large_seconds - o.small_seconds) /
                                           static_cast<double>(o.large_bytes - o.small_bytes));
  o.fixed_seconds = o.small_seconds - o.seconds_per_byte * static_cast<double>(o.small_bytes);
  return o;
}

namespace {

std::vector<double> walls_of_ours(const std::vector<std::vector<json>>& records) {
  return column(records[2], "wall_seconds");
}

struct ScheduleConfig {
  std::string id;
  std::string title;
  std::string mode; // sleep | busy
  int n = 8;
  WorkloadSpec spec;
};

Scenario run_schedule(const Context& context, const ScheduleConfig& config) {
  Scenario s;
  s.id = config.id;
  s.title = config.title;
  s.reproduce = "bench/run.sh --only " + config.id;
  Workload workload = generate(config.spec);
  const int n = config.n;
  const double bound = schedule_bound(workload, n);

  fs::path dir = context.options.scratch / config.id;
  fs::path graphs = dir / "graphs";
  fs::path template_cache = dir / "template-cache";
  fs::path run = dir / "run";
  write_graphs(workload, graphs);
  log(context, config.id + ": " + std::to_string(workload.graphs.size()) + " graphs, sum " +
                   num(workload.sum_seconds()) + " s, bound " + num(bound) + " s at N=" +
                   std::to_string(n));
  extract_into_cache(context, workload, graphs, template_cache, dir / "extract.log");

  auto env_for = [&](const fs::path& cache_dir) {
    Environment env = clean_environment(context.programs, cache_dir);
    env.set("STANDIN_CC_MODE", config.mode);
    return env;
  };
  auto fresh_run_dir = [&](int) {
    wipe(run);
    make_dirs(run);
  };
  const std::size_t total = workload.graphs.size();

  // The bound the target is judged by: each graph's cost as the compiler
  // itself takes it, solo (configured cost + the compiler's own overhead).
  CompilerOverhead overhead = measure_compiler_overhead(context, workload, graphs, dir / "calibration", env_for(dir));
  double compiler_sum = 0, compiler_longest = 0;
  for (const auto& g : workload.graphs) {
    compiler_sum += overhead.cost(g);
    compiler_longest = std::max(compiler_longest, overhead.cost(g));
  }
  const double compiler_bound = std::max(compiler_sum / n, compiler_longest);
  log(context, config.id + ": the compiler's own time adds " + num(overhead.small_seconds * 1000, 1) + " ms (" +
                   std::to_string(overhead.small_bytes) + " bytes) to " + num(overhead.large_seconds * 1000, 1) +
                   " ms (" + std::to_string(overhead.large_bytes) + " bytes) per compile; bound " +
                   num(compiler_bound) + " s");

  std::vector<Contender> contenders;
  contenders.push_back({"serial", fresh_run_dir, [&](int) {
                          json r = run_serial_jit(context, env_for(run / "cache"), workload, graphs, run / "out",
                                                  run / "serial.log");
                          r["complete"] = r["compiled"].get<std::size_t>() == total;
                          return r;
                        }});
  contenders.push_back({"xargs", fresh_run_dir, [&](int) {
                          json r = run_xargs(context, env_for(run / "unused-cache"), graphs, run / "out", n,
                                             run / "xargs.log");
                          r["complete"] = r["neffs"].get<std::size_t>() == total;
                          return r;
                        }});
  contenders.push_back({"ours",
                        [&](int r) {
                          fresh_run_dir(r);
                          copy_tree(template_cache, run / "cache");
                        },
                        [&](int) {
                          json r = run_ours_compile(context, env_for(run / "cache"), run,
                                                    {"--num_parallel", std::to_string(n)});
                          r["complete"] = r.value("compiled", 0) == static_cast<int>(total) && r.value("failed", 1) == 0;
                          return r;
                        }});
  auto records = alternate(context, config.id, contenders);
  for (auto& per : records)
    for (auto& r : per) {
      r["ratio_to_bound"] = r["wall_seconds"].get<double>() / compiler_bound;
      r["ratio_to_configured_bound"] = r["wall_seconds"].get<double>() / bound;
    }

  std::string serial_name = "one by one, just in time (compile entry per graph)";
  std::string xargs_name = "`xargs -P " + std::to_string(n) + "` over the dumped graphs";
  std::string ours_name = "neuron_parallel_compile --num_parallel " + std::to_string(n);

  auto ratios = [&](std::size_t i) { return column(records[i], "ratio_to_bound"); };
  auto walls = [&](std::size_t i) { return column(records[i], "wall_seconds"); };
  Spread ours_ratio = spread(ratios(2));
  Row ours_row{ours_name, "wall time / bound", "x", ratios(2), "≤ 1.05", ours_ratio.median <= 1.05, "", 3};
  {
    // What the runs show about the miss: how long the longest compile itself
    // took, and how much longer all compiles took than configured.
    std::vector<double> longest_wall, stretch;
    for (const auto& r : records[2]) {
      double top = 0, top_time = 0;
      for (const auto& g : r.value("per_graph", json::array()))
        if (g.value("predicted_seconds", 0.0) > top) {
          top = g.value("predicted_seconds", 0.0);
          top_time = g.value("compile_time", 0.0);
        }
      longest_wall.push_back(top_time);
      stretch.push_back(r.value("sum_compile_seconds", 0.0) / workload.sum_seconds());
    }
    double longest = spread(longest_wall).median;
    double beyond = spread(walls_of_ours(records)).median - compiler_bound;
    std::string note = "ours took " + num(beyond, 2) + " s longer than the bound. The longest compile took " +
                       num(longest, 2) + " s through the compile entry, for " + num(compiler_longest, 2) +
                       " s of the compiler alone (the compile entry's start, its lock, the graph hashed, the NEFF "
                       "hashed and published), after the launcher's own start";
    if (config.mode == "busy")
      note += "; all compiles together took " + num(spread(stretch).median, 2) +
              "× their configured CPU time, since the cores are shared with every compile's process starts and "
              "with anything else running on the machine";
    double serial_overhead_ms =
        (spread(column(records[0], "wall_seconds")).median - compiler_sum) / static_cast<double>(total) * 1000;
    note += "; one by one, the compile entry adds " + num(serial_overhead_ms, 0) + " ms per compile to the compiler's own time";
    if (!ours_row.met.value_or(true)) ours_row.note = note;
    s.workload["longest_compile_wall_seconds_median"] = longest;
  }
  bool all_complete = true;
  for (const auto& per : records)
    for (const auto& r : per) all_complete = all_complete && r.value("complete", false);
  // A ratio from a run that did not compile every graph means nothing.
  if (!all_complete) {
    std::string which;
    const char* names[] = {"serial", "xargs", "ours"};
    for (std::size_t i = 0; i < records.size(); ++i)
      for (const auto& r : records[i])
        if (!r.value("complete", false)) which += std::string(" ") + names[i] + "#" + std::to_string(r.value("run", 0));
    throw std::runtime_error("some runs did not compile every graph (" + which.substr(1) +
                             "); check the product and the stand-in with `npc_bench --keep --only " + config.id + "`");
  }

  // Paired per round: how many times longer xargs took than ours.
  std::vector<double> paired;
  for (std::size_t r = 0; r < records[2].size(); ++r)
    paired.push_back(records[1][r]["wall_seconds"].get<double>() / records[2][r]["wall_seconds"].get<double>());
  Spread xargs_wall = spread(walls(1)), ours_wall = spread(walls(2));
  bool clearly_ahead = ours_wall.max < xargs_wall.min && spread(paired).min > 1.0;

  s.rows.push_back({serial_name, "wall time / bound", "x", ratios(0), "", std::nullopt, "", 3});
  s.rows.push_back({xargs_name, "wall time / bound", "x", ratios(1), "", std::nullopt, "", 3, true});
  s.rows.push_back(ours_row);
  s.rows.push_back({"xargs / ours, paired per round", "wall time ratio", "x", paired,
                    "> 1, spreads apart", clearly_ahead,
                    clearly_ahead ? "ours' slowest run beat xargs' fastest"
                                  : "the spreads overlap: with N = " + std::to_string(n) +
                                        " the large graphs' head start is small next to the per-compile costs above",
                    3});
  auto configured = [&](std::size_t i) { return column(records[i], "ratio_to_configured_bound"); };
  s.rows.push_back({xargs_name, "wall time / bound from configured costs only", "x", configured(1), "",
                    std::nullopt, "", 3});
  s.rows.push_back({ours_name, "wall time / bound from configured costs only", "x", configured(2), "",
                    std::nullopt, "the compiler's own time per compile counted as scheduling overhead", 3});
  s.rows.push_back({serial_name, "wall time", "s", walls(0), "", std::nullopt, "", 3});
  s.rows.push_back({xargs_name, "wall time", "s", walls(1), "", std::nullopt, "", 3});
  s.rows.push_back({ours_name, "wall time", "s", walls(2), "", std::nullopt, "", 3});
  // What the compile entry adds to each compile, seen in the serial runs:
  // its process start, the key, the lock, publishing into the cache.
  std::vector<double> per_compile_overhead;
  for (double w : walls(0))
    per_compile_overhead.push_back((w - compiler_sum) / static_cast<double>(total) * 1000.0);
  s.rows.push_back({serial_name, "time per compile beyond the compiler's own", "ms", per_compile_overhead, "",
                    std::nullopt, "the compile entry's start, key, lock and publishing", 1});

  json longest_note = s.workload;
  s.workload = workload.to_json();
  for (const auto& [k, v] : longest_note.items()) s.workload[k] = v;
  s.workload["mode"] = config.mode;
  s.workload["n"] = n;
  s.workload["bound_seconds"] = compiler_bound;
  s.workload["bound"] = "max(sum of compiler costs / N, longest compiler cost); a compiler cost is the configured "
                        "cost plus the stand-in's own time, measured solo";
  s.workload["configured_bound_seconds"] = bound;
  s.workload["compiler_overhead"] = {{"small_graph_bytes", overhead.small_bytes},
                                     {"small_graph_seconds", overhead.small_seconds},
                                     {"large_graph_bytes", overhead.large_bytes},
                                     {"large_graph_seconds", overhead.large_seconds},
                                     {"fixed_seconds", overhead.fixed_seconds},
                                     {"seconds_per_byte", overhead.seconds_per_byte}};
  s.workload["commands"] = {
      {"serial", "for g in $(cat trial-order.txt); do neuron_cc_wrapper compile --graph $g --output $g.neff; done "
                 "(fresh cache each run)"},
      {"xargs", "xargs -P " + std::to_string(n) +
                    " -I{} neuronx-cc compile --framework=XLA GRAPHS/{} --output OUT/{}.neff < trial-order.txt"},
      {"ours", "neuron_parallel_compile --command compile --num_parallel " + std::to_string(n) +
                   " (cache holding the graphs as pending entries, as the trial leaves them)"}};
  s.workload["all_runs_complete"] = all_complete;
  s.raw = {{"serial", records[0]}, {"xargs", records[1]}, {"ours", records[2]}};

  std::string mode_text =
      config.mode == "sleep"
          ? "The stand-in compiler runs in **sleep** mode (`STANDIN_CC_MODE=sleep`): a compile waits out its cost, so "
            "N = " + std::to_string(n) + " parallel compiles can be studied on a small machine."
          : "The stand-in compiler runs in **busy** mode (`STANDIN_CC_MODE=busy`): a compile burns its cost in CPU "
            "time, so parallelism is limited by the cores; N = " + std::to_string(n) + " = the number of cores.";
  s.what = mode_text + " The graph set has " + std::to_string(total) + " graphs: " +
           std::to_string(config.spec.small_count) + " small ones with log-normal costs (median " +
           std::to_string(static_cast<int>(config.spec.small_median_ms)) + " ms) and " +
           std::to_string(config.spec.large_ms.size()) +
           " large ones, which come last in the trial order. Sum of costs " +
           num(workload.sum_seconds(), 2) + " s, longest " +
           num(workload.longest_seconds(), 2) + " s. **The bound** is max(sum/N, longest) over each graph's cost "
           "as the compiler itself takes it: its configured cost plus the stand-in's own time around it (process "
           "start, reading and hashing the graph, writing the NEFF), measured before the runs by running the "
           "stand-in directly, solo, 5 times on zero-cost copies of the smallest and the largest graph (" +
           num(overhead.small_seconds * 1000, 1) + " ms at " + std::to_string(overhead.small_bytes) + " bytes, " +
           num(overhead.large_seconds * 1000, 1) + " ms at " + std::to_string(overhead.large_bytes) +
           " bytes; linear in between). No scheduler can beat it; what ours adds beyond it is its own cost. "
           "Bound: **" + num(compiler_bound, 2) + " s** (" + num(bound, 2) +
           " s from the configured costs alone, also shown). Each graph's size is proportional to its cost (" + std::to_string(config.spec.bytes_per_ms) +
           " bytes per ms) and the cache is cold (no compile history): neuron_parallel_compile orders the work "
           "by graph size alone. Every run starts from a fresh copy of the cache/output directory; the copy is "
           "not timed. Wall time is the whole process (for ours: the launcher from start to exit).\n\n"
           "The contenders: **one by one**, `neuron_cc_wrapper compile --graph G --output G.neff` for each graph in "
           "trial order into an empty cache, as a training run compiles just in time; **xargs**, what a user writes "
           "by hand over the dumped graphs, `xargs -P " + std::to_string(n) +
           " -I{} neuronx-cc compile --framework=XLA GRAPHS/{} --output OUT/{}.neff < trial-order.txt` (it leaves "
           "the NEFFs outside the cache, which favours it); **ours**, `neuron_parallel_compile --command compile "
           "--num_parallel " + std::to_string(n) +
           "` over a cache holding the graphs as pending entries, exactly as the trial's extraction leaves them.";
  return s;
}

WorkloadSpec sleep_spec(bool quick) {
  WorkloadSpec spec;
  spec.name = "sleep";
  spec.seed = 20240611;
  spec.small_count = quick ? 12 : 20;
  spec.small_median_ms = 120;
  spec.small_sigma = 0.6;
  spec.small_min_ms = 40;
  spec.small_max_ms = 500;
  spec.large_ms = quick ? std::vector<std::uint64_t>{600, 800} : std::vector<std::uint64_t>{2000, 2500, 3000};
  spec.bytes_per_ms = 200;
  return spec;
}

WorkloadSpec busy_spec(bool quick) {
  WorkloadSpec spec;
  spec.name = "busy";
  spec.seed = 20240612;
  spec.small_count = quick ? 6 : 8;
  spec.small_median_ms = 150;
  spec.small_sigma = 0.6;
  spec.small_min_ms = 50;
  spec.small_max_ms = 400;
  spec.large_ms = quick ? std::vector<std::uint64_t>{400, 500} : std::vector<std::uint64_t>{600, 800, 1000};
  spec.bytes_per_ms = 200;
  return spec;
}

} // namespace

Scenario run_schedule_sleep(const Context& context) {
  ScheduleConfig config{"schedule-sleep", "1a. Schedule quality, sleep mode, N = 8", "sleep", 8,
                        sleep_spec(context.options.quick)};
  return run_schedule(context, config);
}

Scenario run_schedule_busy(const Context& context) {
  long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  int n = static_cast<int>(std::max(1L, cores));
  ScheduleConfig config{"schedule-busy", "1b. Schedule quality, busy-CPU mode, N = cores = " + std::to_string(n),
                        "busy", n, busy_spec(context.options.quick)};
  return run_schedule(context, config);
}

} // namespace bench
