// Scenario 11: a frontend that runs neuronx-cc itself (TorchNeuron's way,
// the stand-in standin_torchneuron), through the masquerade directory or
// straight to the compiler: a warm run against the compiler's own cost, and
// what caching adds to a cold run.

#include <regex>

#include "fixtures.hpp"
#include "scenarios.hpp"

namespace bench {

namespace {

// The frontend's line: "standin_torchneuron: S steps, N graphs through neuronx-cc in T s".
int graphs_of(const std::string& text) {
  static const std::regex line(R"(standin_torchneuron: \d+ steps, (\d+) graphs through neuronx-cc in )");
  std::smatch m;
  return std::regex_search(text, m, line) ? std::stoi(m[1]) : -1;
}

} // namespace

Scenario run_masquerade(const Context& context) {
  Scenario s;
  s.id = "masquerade";
  s.title = "11. One cache for a frontend that runs neuronx-cc itself";
  s.reproduce = "bench/run.sh --only masquerade";
  const bool quick = context.options.quick;
  fs::path dir = context.options.scratch / s.id;
  make_dirs(dir);

  const int graphs_per_step = quick ? 4 : 8;
  const int cost_ms = quick ? 100 : 300;
  const fs::path frontend = context.programs.standin_dir / "standin_torchneuron";
  const fs::path masquerade =
      (context.programs.build_dir / "libexec" / "neuron-parallel-compile" / "masquerade").lexically_normal();
  if (!fs::exists(masquerade / "neuronx-cc"))
    throw std::runtime_error("no masquerade directory at " + masquerade.string());
  // As a frontend's user has it: the compiler on PATH, the cache named by
  // NEURON_COMPILE_CACHE_URL (the frontend passes NEURON_CC_FLAGS to the compiler).
  auto env_for = [&](bool through_masquerade, const fs::path& cache) {
    Environment env = clean_environment(context.programs, cache);
    env.unset("NEURON_CC");
    env.unset("NEURON_CC_FLAGS");
    env.set("NEURON_COMPILE_CACHE_URL", cache.string());
    env.set("STANDIN_CC_MODE", "sleep");
    env.set("STANDIN_CC_BASE_MS", std::to_string(cost_ms));
    const std::string path = env.get("PATH").value_or("/usr/bin:/bin");
    if (through_masquerade) env.set("PATH", masquerade.string() + ":" + path);
    return env;
  };
  auto run_frontend = [&](bool through_masquerade, const fs::path& cache, const std::string& tag) {
    fs::path out = dir / (tag + ".log");
    wipe(out);
    Timed t = run_checked({{frontend.string(), "--graphs_per_step", std::to_string(graphs_per_step)},
                           env_for(through_masquerade, cache),
                           out,
                           std::nullopt},
                          "standin_torchneuron (" + tag + ")");
    int graphs = graphs_of(read_text(out));
    if (graphs <= 0) throw std::runtime_error("standin_torchneuron (" + tag + ") said no graphs: " + read_text(out));
    return json{{"wall_seconds", t.seconds}, {"graphs", graphs}};
  };

  const fs::path warm_cache = dir / "warm-cache", cold_cache = dir / "cold-cache", direct_cache = dir / "unused";
  log(context, "masquerade: filling the cache with one run through the masquerade");
  wipe(warm_cache);
  json fill = run_frontend(true, warm_cache, "fill");
  std::vector<Contender> contenders = {
      {"direct", nullptr, [&](int) { return run_frontend(false, direct_cache, "direct"); }},
      {"cold", [&](int) { wipe(cold_cache); }, [&](int) { return run_frontend(true, cold_cache, "cold"); }},
      {"warm", nullptr, [&](int) { return run_frontend(true, warm_cache, "warm"); }},
  };
  auto r = alternate(context, s.id, contenders);
  std::vector<double> direct = column(r[0], "wall_seconds"), cold = column(r[1], "wall_seconds"),
                      warm = column(r[2], "wall_seconds");
  std::vector<double> warm_over_direct, cold_over_direct, warm_per_graph_ms;
  const double graphs = fill.value("graphs", 1);
  for (std::size_t i = 0; i < direct.size(); ++i) {
    warm_over_direct.push_back(warm[i] / direct[i]);
    cold_over_direct.push_back(cold[i] / direct[i]);
    warm_per_graph_ms.push_back(warm[i] / graphs * 1000.0);
  }
  const double warm_ratio = spread(warm_over_direct).median, cold_ratio = spread(cold_over_direct).median;
  s.rows.push_back({"warm run through the masquerade / the same run straight to the compiler, paired per round",
                    "time ratio", "x", warm_over_direct, "≤ 0.10", warm_ratio <= 0.10,
                    "every graph a hit: the compiler never runs", 3});
  s.rows.push_back({"cold run through the masquerade (empty cache) / straight to the compiler, paired per round",
                    "time ratio", "x", cold_over_direct, "≤ 1.10", cold_ratio <= 1.10,
                    "what keying, locking and storing add to a miss", 3});
  s.rows.push_back({"warm run through the masquerade", "time per graph", "ms", warm_per_graph_ms, "", std::nullopt,
                    "a new neuron_cc_wrapper process per graph, as the frontend starts the compiler", 2});
  s.rows.push_back({"straight to the compiler (no cache)", "wall time", "s", direct, "", std::nullopt, "", 3});
  s.rows.push_back({"cold run through the masquerade", "wall time", "s", cold, "", std::nullopt, "", 3});
  s.rows.push_back({"warm run through the masquerade", "wall time", "s", warm, "", std::nullopt, "", 3});
  s.workload = {{"command", "standin_torchneuron --graphs_per_step " + std::to_string(graphs_per_step)},
                {"graphs", fill.value("graphs", 0)},
                {"compile_cost_ms", cost_ms},
                {"stand_in", "sleep mode, STANDIN_CC_BASE_MS=" + std::to_string(cost_ms)}};
  s.raw = {{"fill", fill}, {"direct", r[0]}, {"cold", r[1]}, {"warm", r[2]}};
  s.what =
      "`standin_torchneuron` plays TorchNeuron: it walks 4 steps of the stand-in model (" +
      std::to_string(fill.value("graphs", 0)) +
      " distinct graphs) in one process and compiles each new graph by running `neuronx-cc compile` from PATH, in "
      "a fresh temporary folder, one after another; the stand-in compiler costs " +
      std::to_string(cost_ms) +
      " ms a graph (sleep mode). **Straight**: PATH finds the stand-in compiler itself, so every run compiles "
      "every graph (what a frontend without a cache of ours pays at each start). **Cold**: the masquerade "
      "directory first on PATH and an empty cache (emptied before each round): every graph a miss, compiled and "
      "stored. **Warm**: the masquerade and a cache one untimed run filled: every graph a hit. The three run in "
      "turn within each round, the order rotated; the ratios pair the runs of one round.";
  return s;
}

} // namespace bench
