// Scenario 4: launcher overhead. neuron_parallel_compile over a trial whose
// graphs are all cached, against the bare trial command run with the same
// environment the launcher gives it.

#include <regex>

#include "fixtures.hpp"
#include "scenarios.hpp"

namespace bench {

namespace {

std::vector<std::string> trial_argv(const Context& context, int graphs_per_step, const fs::path& workdir) {
  return {context.programs.train.string(), "--nproc_per_node", "1", "--steps_this_run", "2", "--layers", "4",
          "--hidden", "256", "--eval_every", "0", "--graphs_per_step", std::to_string(graphs_per_step),
          "--workdir", workdir.string()};
}

} // namespace

Scenario run_overhead(const Context& context) {
  Scenario s;
  s.id = "launcher-overhead";
  s.title = "4. Launcher overhead";
  s.reproduce = "bench/run.sh --only launcher-overhead";
  fs::path dir = context.options.scratch / s.id;
  make_dirs(dir);
  const std::vector<int> sizes = context.options.quick ? std::vector<int>{1, 10} : std::vector<int>{1, 50};

  struct Variant {
    int graphs_per_step;
    fs::path cache;
    int graphs = 0;
  };
  std::vector<Variant> variants;
  for (int g : sizes) {
    Variant v{g, dir / ("cache-" + std::to_string(g))};
    Environment env = clean_environment(context.programs, v.cache);
    env.set("STANDIN_CC_BASE_MS", "0");
    fs::path workdir = dir / "fill";
    make_dirs(workdir);
    std::ignore = run_checked({trial_argv(context, g, workdir), env, dir / "fill.log", std::nullopt},
                              "standin_train (filling the cache)");
    wipe(workdir);
    v.graphs = static_cast<int>(count_done(v.cache));
    variants.push_back(v);
  }
  log(context, "launcher-overhead: caches filled");

  fs::path run = dir / "run";
  auto fresh = [&](int) {
    wipe(run);
    make_dirs(run);
  };
  std::vector<Contender> contenders;
  for (const auto& v : variants) {
    contenders.push_back({"bare", fresh, [&, v](int) {
                            Environment env = clean_environment(context.programs, v.cache);
                            env.set("NEURON_EXTRACT_GRAPHS_ONLY", "1");
                            env.set("NEURON_PARALLEL_COMPILE", "1");
                            env.set("NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG", (run / "paths.log").string());
                            make_dirs(run / "trial");
                            Timed t = run_checked({trial_argv(context, v.graphs_per_step, run / "trial"), env,
                                                   run / "bare.log", std::nullopt},
                                                  "the bare trial");
                            return json{{"wall_seconds", t.seconds}, {"graphs", count_lines(run / "paths.log")}};
                          }});
    contenders.push_back({"ours", fresh, [&, v](int) {
                            Environment env = clean_environment(context.programs, v.cache);
                            std::vector<std::string> argv = {context.programs.launcher.string(), kStandinMemoryOption, kStandinMemory,
                                                             "--parallel_compile_workdir", (run / "work").string(),
                                                             "--"};
                            make_dirs(run / "trial");
                            auto trial = trial_argv(context, v.graphs_per_step, run / "trial");
                            argv.insert(argv.end(), trial.begin(), trial.end());
                            Timed t = run_checked({argv, env, run / "ours.log", std::nullopt},
                                                  "neuron_parallel_compile over the trial");
                            std::string text = read_text(run / "ours.log");
                            static const std::regex found(R"((\d+) graph\(s\) found: (\d+) already cached)");
                            std::smatch m;
                            json r = {{"wall_seconds", t.seconds}, {"peak_rss_bytes", t.status.peak_rss_bytes}};
                            if (std::regex_search(text, m, found)) {
                              r["graphs"] = std::stoi(m[1]);
                              r["already_cached"] = std::stoi(m[2]);
                            }
                            return r;
                          }});
  }
  // Cheap and noisy (a difference of two wall times): more rounds.
  auto records = alternate(context, s.id, contenders, context.options.quick ? 0 : 9);

  json raw = json::object();
  json workload = json::array();
  for (std::size_t i = 0; i < variants.size(); ++i) {
    const auto& v = variants[i];
    const auto& bare = records[2 * i];
    const auto& ours = records[2 * i + 1];
    std::vector<double> overhead;
    for (std::size_t r = 0; r < bare.size(); ++r)
      overhead.push_back((ours[r]["wall_seconds"].get<double>() - bare[r]["wall_seconds"].get<double>()) * 1000);
    double limit = 50.0 + v.graphs;
    double m = spread(overhead).median;
    std::string label = std::to_string(v.graphs) + " graphs, all cached";
    s.rows.push_back({label, "launcher overhead (ours − bare, paired per round)", "ms", overhead,
                      "≤ " + num(limit, 0) + " ms (50 + 1 × " + std::to_string(v.graphs) + ")", m <= limit, "", 1});
    s.rows.push_back({label + ": bare trial", "wall time", "s", column(bare, "wall_seconds"), "", std::nullopt, "", 3});
    s.rows.push_back({label + ": neuron_parallel_compile over it", "wall time", "s", column(ours, "wall_seconds"), "",
                      std::nullopt, "", 3});
    std::string key = "graphs_" + std::to_string(v.graphs);
    raw[key] = {{"bare", bare}, {"ours", ours}};
    workload.push_back({{"graphs", v.graphs},
                        {"trial", "standin_train --nproc_per_node 1 --steps_this_run 2 --layers 4 --hidden 256 "
                                  "--eval_every 0 --graphs_per_step " + std::to_string(v.graphs_per_step)}});
  }
  s.raw = raw;
  s.workload = {{"variants", workload},
                {"bare_environment", "NEURON_EXTRACT_GRAPHS_ONLY=1 NEURON_PARALLEL_COMPILE=1 "
                                     "NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG=<file>, as the launcher sets for its trial"},
                {"ours", "neuron_parallel_compile --parallel_compile_workdir <dir> -- <trial>"}};
  s.what =
      "The trial is `standin_train` with 1 rank; every graph it reaches is already in the cache, so "
      "neuron_parallel_compile runs the trial, collects the graphs, finds them all done and compiles nothing. The "
      "bare contender is the same trial command run directly with the environment the launcher would give it "
      "(graph-extraction mode, the cache-path log). The overhead is ours minus bare within the same round. Both "
      "trial runs spawn the compile entry once per graph; that cost is in both and cancels out.";
  return s;
}

} // namespace bench
