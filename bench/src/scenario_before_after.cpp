// Scenario 9: before and after the cache was rebuilt over one storage
// interface (a tiered local-mirror-in-front-of-S3 cache, one lock design, one
// publish protocol). The programs of an older revision (bench/run.sh builds
// them; NPC_BENCH_BEFORE names it) and ours run in turn in every round, on
// the same workloads and one s3rver:
//   - a cache hit through the compile entry on a local cache;
//   - a hit on S3 with an empty mirror (the NEFF downloaded) and with the
//     entry already in the mirror;
//   - the launcher over an all-cached trial on S3, on a node whose mirror is
//     empty;
//   - the launcher's whole run (trial, compile, upload) into an empty prefix;
//   - a bundle of every entry to and from S3 (neuron_cache export / import),
//     with `rclone copy` of the same cache's files as the reference.
// The stand-ins (compiler, training script) are ours for both: only the
// product's three programs differ.

#include <regex>

#include "fixtures.hpp"
#include "s3rver.hpp"
#include "scenarios.hpp"

namespace bench {

namespace {

constexpr const char* kComparisonBucket = "bench";

std::vector<std::string> comparison_trial_argv(const Context& context, int graphs_per_step, const fs::path& workdir) {
  return {context.programs.train.string(), "--nproc_per_node", "1", "--steps_this_run", "2", "--layers", "4",
          "--hidden", "512", "--eval_every", "0", "--graphs_per_step", std::to_string(graphs_per_step),
          "--workdir", workdir.string()};
}

// One side of the comparison: its programs and where its caches are.
struct Side {
  std::string name; // "before", "after"
  Programs programs;
  fs::path local_cache;
  std::string s3_prefix; // its filled cache on S3: s3://bench/<name>/filled
  fs::path mirror;       // that cache's mirror, kept warm
};

Environment s3_environment(const Side& side, const S3rver& server, const std::string& url, const fs::path& mirror,
                           const fs::path& dir) {
  Environment env = clean_environment(side.programs, url);
  env.set("NEURON_COMPILE_CACHE_MIRROR", mirror.string());
  use_s3_endpoint(env, server.endpoint(), "S3RVER", "S3RVER", dir);
  env.set("STANDIN_CC_MODE", "sleep");
  env.set("STANDIN_CC_BASE_MS", "0");
  return env;
}

Environment local_environment(const Side& side, const fs::path& cache) {
  Environment env = clean_environment(side.programs, cache);
  env.set("STANDIN_CC_MODE", "sleep");
  env.set("STANDIN_CC_BASE_MS", "0");
  return env;
}

// Median of `count` spawns, in milliseconds; `before_each` (untimed) runs
// ahead of every spawn.
double median_ms(const RunSpec& spec, int count, const std::function<void()>& before_each = nullptr) {
  std::vector<double> times;
  for (int i = 0; i < count; ++i) {
    if (before_each) before_each();
    Timed t = run_timed(spec);
    if (!t.status.success())
      throw std::runtime_error(spec.argv.front() + " failed: " + t.status.describe() + " (see " +
                               spec.output.string() + ")");
    times.push_back(t.seconds * 1000);
  }
  return median(times);
}

// "N graph(s) found: M already cached" from a launcher's output.
std::pair<int, int> found_and_cached(const fs::path& log) {
  static const std::regex found(R"((\d+) graph\(s\) found: (\d+) already cached)");
  std::string text = read_text(log);
  std::smatch m;
  if (!std::regex_search(text, m, found)) return {-1, -1};
  return {std::stoi(m[1]), std::stoi(m[2])};
}

// Where the mirror keeps the cache of an s3:// URL.
fs::path mirror_root(const fs::path& mirror, const std::string& url) {
  return mirror / "s3" / url.substr(std::string_view("s3://").size());
}

std::size_t files_under(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) ++n;
  return n;
}

// One measure for both sides: its name, what it returns, and how it runs on one side.
struct Measure {
  std::string id;
  std::string label;
  std::string figure;
  std::string unit;
  std::string key; // the record's figure
  std::function<json(const Side&, int run)> run;
};

} // namespace

Scenario run_before_after(const Context& context) {
  Scenario s;
  s.id = "before-after";
  s.title = "9. Before and after one cache over storage";
  s.reproduce = "bench/run.sh --only before-after";
  if (context.options.before_build.empty())
    throw std::runtime_error("no older build to compare with: run it through bench/run.sh, which builds the "
                             "revision NPC_BENCH_BEFORE names (or pass --before-build DIR)");
  const char* path = std::getenv("PATH");
  auto rclone = npc::util::find_executable("rclone", path ? std::optional<std::string>(path) : std::nullopt);
  if (!rclone) throw std::runtime_error("rclone is not installed: `bash tools/setup.sh` installs it");

  fs::path dir = context.options.scratch / s.id;
  make_dirs(dir);
  const bool quick = context.options.quick;
  const int graphs_per_step = quick ? 5 : 20;
  const int spawns = quick ? 5 : 15;

  Programs before_programs = context.programs;
  {
    Programs theirs = find_programs(context.options.before_build, /*with_standins=*/false);
    before_programs.launcher = theirs.launcher;
    before_programs.wrapper = theirs.wrapper;
    before_programs.cache_tool = theirs.cache_tool;
  }
  S3rver server(dir / "server", kComparisonBucket);
  std::vector<Side> sides = {{"before", before_programs, dir / "before" / "local", "", dir / "before" / "mirror"},
                             {"after", context.programs, dir / "after" / "local", "", dir / "after" / "mirror"}};
  const std::string url_base = std::string("s3://") + kComparisonBucket + "/";

  // Each side fills its own caches with its own programs (untimed): a
  // training run that compiles every graph just in time, on a local cache and
  // on S3.
  fs::path hit_graph = dir / "hit.hlo";
  int graphs = 0;
  for (auto& side : sides) {
    side.s3_prefix = url_base + side.name + "/filled";
    fs::path work = dir / side.name / "fill";
    make_dirs(work);
    std::ignore = run_checked({comparison_trial_argv(context, graphs_per_step, work), local_environment(side, side.local_cache),
                               dir / (side.name + "-fill.log"), std::nullopt},
                              "standin_train (" + side.name + ", filling the local cache)");
    wipe(work);
    make_dirs(work);
    std::ignore = run_checked({comparison_trial_argv(context, graphs_per_step, work),
                               s3_environment(side, server, side.s3_prefix, side.mirror, dir),
                               dir / (side.name + "-fill.log"), std::nullopt},
                              "standin_train (" + side.name + ", filling the S3 cache)");
    if (!fs::exists(hit_graph))
      for (const auto& e : fs::directory_iterator(work / "rank-0"))
        if (e.path().extension() == ".hlo" && e.path().filename().string().find("train0") != std::string::npos) {
          fs::copy_file(e.path(), hit_graph);
          break;
        }
    wipe(work);
    int done = static_cast<int>(count_done(side.local_cache));
    if (graphs != 0 && done != graphs)
      throw std::runtime_error("the two sides' training runs made " + std::to_string(graphs) + " and " +
                               std::to_string(done) + " entries");
    graphs = done;
  }
  if (!fs::exists(hit_graph)) throw std::runtime_error("the training run left no graph to hit");
  log(context, "before-after: caches filled (" + std::to_string(graphs) + " graphs each)");

  fs::path run_dir = dir / "run";
  auto fresh = [&] {
    wipe(run_dir);
    make_dirs(run_dir);
  };
  auto hit_spec = [&](const Environment& env) {
    return RunSpec{{"", "compile", "--graph", hit_graph.string(), "--output", (run_dir / "hit.neff").string()},
                   env,
                   run_dir / "hit.log",
                   std::nullopt};
  };
  std::vector<Measure> measures = {
      {"hit-local", "cache hit through neuron_cc_wrapper, local cache", "wall time (median of " +
                                                                             std::to_string(spawns) + " spawns)",
       "ms", "ms",
       [&](const Side& side, int) {
         fresh();
         RunSpec spec = hit_spec(local_environment(side, side.local_cache));
         spec.argv[0] = side.programs.wrapper.string();
         return json{{"ms", median_ms(spec, spawns)}};
       }},
      {"hit-s3-download", "cache hit on S3, empty mirror (the NEFF downloaded)",
       "wall time (median of " + std::to_string(spawns) + " spawns)", "ms", "ms",
       [&](const Side& side, int) {
         fresh();
         fs::path mirror = run_dir / "mirror";
         RunSpec spec = hit_spec(s3_environment(side, server, side.s3_prefix, mirror, dir));
         spec.argv[0] = side.programs.wrapper.string();
         return json{{"ms", median_ms(spec, spawns, [&] { wipe(mirror); })}};
       }},
      {"hit-s3-mirror", "cache hit on S3, entry in the mirror",
       "wall time (median of " + std::to_string(spawns) + " spawns)", "ms", "ms",
       [&](const Side& side, int) {
         fresh();
         RunSpec spec = hit_spec(s3_environment(side, server, side.s3_prefix, side.mirror, dir));
         spec.argv[0] = side.programs.wrapper.string();
         return json{{"ms", median_ms(spec, spawns)}};
       }},
      {"launcher-s3-cached", "neuron_parallel_compile over an all-cached trial on S3, empty mirror", "wall time",
       "s", "seconds",
       [&](const Side& side, int) {
         fresh();
         make_dirs(run_dir / "trial");
         std::vector<std::string> argv = {side.programs.launcher.string(), kStandinMemoryOption, kStandinMemory,
                                          "--parallel_compile_workdir", (run_dir / "work").string(), "--"};
         auto trial = comparison_trial_argv(context, graphs_per_step, run_dir / "trial");
         argv.insert(argv.end(), trial.begin(), trial.end());
         std::size_t requests_before = server.responses_logged();
         Timed t = run_checked({argv, s3_environment(side, server, side.s3_prefix, run_dir / "mirror", dir),
                                run_dir / "launcher.log", std::nullopt},
                               "neuron_parallel_compile (" + side.name + ", all cached on S3)");
         auto [found, cached] = found_and_cached(run_dir / "launcher.log");
         if (found != graphs || cached != graphs)
           throw std::runtime_error(side.name + ": the launcher found " + std::to_string(found) + " graphs, " +
                                    std::to_string(cached) + " cached, of " + std::to_string(graphs));
         return json{{"seconds", t.seconds}, {"requests", server.responses_logged() - requests_before}};
       }},
      {"launcher-s3-compile", "neuron_parallel_compile's whole run into an empty S3 prefix", "wall time", "s",
       "seconds",
       [&](const Side& side, int run) {
         fresh();
         make_dirs(run_dir / "trial");
         std::string url = url_base + side.name + "/compile-" + std::to_string(run);
         std::vector<std::string> argv = {side.programs.launcher.string(), kStandinMemoryOption, kStandinMemory,
                                          "--parallel_compile_workdir", (run_dir / "work").string(), "--"};
         auto trial = comparison_trial_argv(context, graphs_per_step, run_dir / "trial");
         argv.insert(argv.end(), trial.begin(), trial.end());
         std::size_t requests_before = server.responses_logged();
         Timed t = run_checked(
             {argv, s3_environment(side, server, url, run_dir / "mirror", dir), run_dir / "launcher.log", std::nullopt},
             "neuron_parallel_compile (" + side.name + ", compiling into S3)");
         std::size_t requests = server.responses_logged() - requests_before;
         std::size_t done = count_done(mirror_root(run_dir / "mirror", url));
         if (done != static_cast<std::size_t>(graphs))
           throw std::runtime_error(side.name + ": the launcher left " + std::to_string(done) + " done entries of " +
                                    std::to_string(graphs));
         return json{{"seconds", t.seconds}, {"requests", requests}};
       }},
      {"export-s3", "neuron_cache export --all from S3, empty mirror", "wall time", "s", "seconds",
       [&](const Side& side, int) {
         fresh();
         Timed t = run_checked({{side.programs.cache_tool.string(), "export", "--all", "-o",
                                 (run_dir / "bundle.tar.zst").string()},
                                s3_environment(side, server, side.s3_prefix, run_dir / "mirror", dir),
                                run_dir / "export.log", std::nullopt},
                               "neuron_cache export (" + side.name + ")");
         return json{{"seconds", t.seconds}, {"bundle_bytes", fs::file_size(run_dir / "bundle.tar.zst")}};
       }},
      {"import-s3", "neuron_cache import into an empty S3 prefix", "wall time", "s", "seconds",
       [&](const Side& side, int run) {
         fresh();
         // The bundle (untimed) from the side's warm mirror.
         std::ignore = run_checked({{side.programs.cache_tool.string(), "export", "--all", "-o",
                                     (run_dir / "bundle.tar.zst").string()},
                                    s3_environment(side, server, side.s3_prefix, side.mirror, dir),
                                    run_dir / "export.log", std::nullopt},
                                   "neuron_cache export (" + side.name + ", for the import)");
         std::string url = url_base + side.name + "/import-" + std::to_string(run);
         Timed t = run_checked({{side.programs.cache_tool.string(), "import", (run_dir / "bundle.tar.zst").string()},
                                s3_environment(side, server, url, run_dir / "mirror", dir), run_dir / "import.log",
                                std::nullopt},
                               "neuron_cache import (" + side.name + ")");
         std::size_t done = count_done(mirror_root(run_dir / "mirror", url));
         if (done != static_cast<std::size_t>(graphs))
           throw std::runtime_error(side.name + ": the import left " + std::to_string(done) + " done entries of " +
                                    std::to_string(graphs));
         return json{{"seconds", t.seconds}};
       }},
  };

  // The reference for the bundle's transfers: rclone copying the same cache's
  // files (every object of the filled prefix) down, and the files back up.
  Environment rclone_env = rclone_environment(server);
  auto rclone_copy = [&](const std::string& from, const std::string& to, const std::string& what) {
    // --fast-list: one listing of the whole prefix. Listing folder by folder
    // sends the folder as the prefix, and s3rver reads the '+' in
    // "neuronxcc-<version>+..." names as a space: rclone would find nothing.
    return run_checked({{rclone->string(), "--config", "/dev/null", "copy", "--fast-list", "--transfers", "4", from,
                         to},
                        rclone_env,
                        run_dir / "rclone.log", std::nullopt},
                       what);
  };
  const std::string filled_remote = std::string("s3bench:") + kComparisonBucket + "/after/filled";
  auto rclone_down = [&](int) {
    fresh();
    Timed t = rclone_copy(filled_remote, (run_dir / "copy").string(), "rclone copy (download)");
    return json{{"seconds", t.seconds}, {"files", files_under(run_dir / "copy")}};
  };
  auto rclone_up = [&](int run) {
    fresh();
    std::ignore = rclone_copy(filled_remote, (run_dir / "copy").string(), "rclone copy (download, for the upload)");
    Timed t = rclone_copy((run_dir / "copy").string(),
                          std::string("s3bench:") + kComparisonBucket + "/rclone/up-" + std::to_string(run),
                          "rclone copy (upload)");
    return json{{"seconds", t.seconds}, {"files", files_under(run_dir / "copy")}};
  };

  // Rounds: every (measure, side) and the two rclone references, in an order
  // rotated every round (the harness's rotation; `alternate` itself would
  // wait for the server as a child left behind).
  std::vector<std::pair<std::string, std::function<json(int)>>> contenders;
  for (const auto& m : measures)
    for (const auto& side : sides)
      contenders.emplace_back(m.id + "/" + side.name, [&m, &side](int run) { return m.run(side, run); });
  contenders.emplace_back("rclone-down", rclone_down);
  contenders.emplace_back("rclone-up", rclone_up);
  std::vector<std::vector<json>> records(contenders.size());
  for (int run = 0; run < context.options.runs; ++run) {
    for (std::size_t position = 0; position < contenders.size(); ++position) {
      std::size_t i = (position + static_cast<std::size_t>(run) * 3) % contenders.size();
      json r = contenders[i].second(run);
      r["run"] = run + 1;
      r["position"] = position + 1;
      records[i].push_back(r);
    }
    log(context, "before-after: round " + std::to_string(run + 1) + "/" + std::to_string(context.options.runs) +
                     " done");
  }

  json raw = json::object();
  for (std::size_t mi = 0; mi < measures.size(); ++mi) {
    const Measure& m = measures[mi];
    const auto& before = records[2 * mi];
    const auto& after = records[2 * mi + 1];
    auto b = column(before, m.key);
    auto a = column(after, m.key);
    std::vector<double> ratio;
    for (std::size_t r = 0; r < a.size() && r < b.size(); ++r) ratio.push_back(a[r] / b[r]);
    Row row{m.label + ": after / before, paired per round", "time ratio", "x", ratio, "≤ 1.10× before", {}, "", 2,
            true};
    row.met = spread(ratio).median <= 1.10;
    s.rows.push_back(row);
    int decimals = m.unit == "ms" ? 2 : 3;
    s.rows.push_back({m.label + ": before", m.figure, m.unit, b, "", std::nullopt, "", decimals});
    s.rows.push_back({m.label + ": after", m.figure, m.unit, a, "", std::nullopt, "", decimals});
    if (before.front().contains("requests")) {
      s.rows.push_back({m.label + ": before", "S3 requests", "", column(before, "requests"), "", std::nullopt,
                        "counted in s3rver's log", 0});
      s.rows.push_back({m.label + ": after", "S3 requests", "", column(after, "requests"), "", std::nullopt,
                        "counted in s3rver's log", 0});
    }
    raw[m.id] = {{"before", before}, {"after", after}};
  }
  const auto& down = records[2 * measures.size()];
  const auto& up = records[2 * measures.size() + 1];
  s.rows.push_back({"reference: `rclone copy --fast-list --transfers 4` of the filled prefix's objects (download)", "wall time",
                    "s", column(down, "seconds"), "", std::nullopt,
                    std::to_string(down.front().value("files", 0)) + " files", 3});
  s.rows.push_back({"reference: `rclone copy --fast-list --transfers 4` of those files into an empty prefix (upload)",
                    "wall time", "s", column(up, "seconds"), "", std::nullopt, "", 3});
  raw["rclone_download"] = down;
  raw["rclone_upload"] = up;
  s.raw = raw;
  s.workload = {{"graphs", graphs},
                {"trial", "standin_train --nproc_per_node 1 --steps_this_run 2 --layers 4 --hidden 512 "
                          "--eval_every 0 --graphs_per_step " + std::to_string(graphs_per_step)},
                {"stand_in", "sleep mode, STANDIN_CC_BASE_MS=0"},
                {"spawns_per_hit_figure", spawns},
                {"before_revision", context.options.before_revision},
                {"before_build", context.options.before_build.string()},
                {"server", "s3rver (node), data on the scratch filesystem"}};
  s.what =
      "The same workloads run by the programs of revision " + context.options.before_revision +
      " (**before**: the tree before the cache was rebuilt over one storage interface, built by bench/run.sh from "
      "`git archive`) and by this revision (**after**), in turn within every round, the order rotated from round to "
      "round; the stand-in compiler and training script are this revision's for both. Each side first fills its "
      "own caches with its own programs (untimed): a training run compiling " + std::to_string(graphs) +
      " graphs just in time, on a local directory and on an S3 prefix of one s3rver. Then: a hit through "
      "`neuron_cc_wrapper compile` on the local cache; a hit on S3 with the mirror emptied before every spawn "
      "(one LIST, the record and the NEFF downloaded and checked); a hit on S3 with the entry in the mirror; "
      "`neuron_parallel_compile` over the all-cached trial on a node with an empty mirror; its whole run (trial, "
      "compile in sleep mode at no cost, upload) into an empty prefix; `neuron_cache export --all` from S3 with an "
      "empty mirror, and `neuron_cache import` of that bundle into an empty prefix. The ratio is after over before "
      "within a round; the goal is that no figure is worse than before, read as at most 1.10 times before on this "
      "noisy machine. `rclone copy` of the filled prefix's objects (down) and of those files (up) is shown for "
      "scale: it moves bytes only, where ours also checks, locks and records.";
  return s;
}

} // namespace bench
