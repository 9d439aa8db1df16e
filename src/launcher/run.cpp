// --command collect-and-compile (default), collect and compile.

#include <algorithm>
#include <iostream>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/eviction.hpp>
#include <npc/cache/layout.hpp>
#include <npc/compile/compiler.hpp>
#include <npc/launcher/collect.hpp>
#include <npc/launcher/cost_model.hpp>
#include <npc/launcher/launcher.hpp>
#include <npc/launcher/pool_runner.hpp>
#include <npc/launcher/report.hpp>
#include <npc/launcher/system.hpp>
#include <npc/launcher/trial.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/strings.hpp>
#include <npc/util/table.hpp>

namespace npc::launcher {

namespace {

fs::path default_workdir() {
  return fs::path(util::env("TMPDIR").value_or("/tmp")) / "parallel_compile_workdir";
}

struct RunFiles {
  fs::path workdir;
  fs::path path_log;
  fs::path trial_log;
  fs::path log_dir;
};

// Per-run names, so that launchers sharing a workdir do not mix their files.
RunFiles prepare_workdir(const Options& options) {
  RunFiles files;
  files.workdir = fs::absolute(options.workdir.value_or(default_workdir()));
  if (auto s = util::ensure_dir(files.workdir, 0755); !s)
    throw EnvironmentError("--parallel_compile_workdir: " + s.error());
  std::string tag = std::to_string(::getpid());
  files.path_log = files.workdir / ("cache_paths." + tag + ".log");
  files.trial_log = files.workdir / ("trial." + tag + ".log");
  files.log_dir = files.workdir / ("compile_logs." + tag);
  std::ignore = ::unlink(files.path_log.c_str());
  if (auto s = util::ensure_dir(files.log_dir, 0755); !s) throw EnvironmentError(s.error());
  return files;
}

std::vector<WorkItem> make_items(const cache::Cache& cache, std::vector<fs::path> entries,
                                 const Options& options) {
  std::vector<WorkItem> items;
  items.reserve(entries.size());
  std::optional<CostModel> model;
  for (auto& dir : entries) {
    WorkItem item;
    auto key = cache::parse_key(dir.string());
    item.key = key ? key->str() : dir.filename().string();
    std::error_code ec;
    item.graph_bytes = fs::file_size(dir / cache::kGraphFile, ec);
    item.entry_dir = std::move(dir);
    if (ec) item.graph_bytes = 0;
    items.push_back(std::move(item));
  }
  // The split among launchers is over the work sorted by key, the same for all.
  std::vector<std::size_t> by_key(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) by_key[i] = i;
  std::sort(by_key.begin(), by_key.end(), [&](std::size_t a, std::size_t b) { return items[a].key < items[b].key; });
  for (std::size_t rank = 0; rank < by_key.size(); ++rank)
    items[by_key[rank]].own_share = static_cast<int>(rank % static_cast<std::size_t>(options.world_size)) == options.node_id;
  if (!items.empty()) model = CostModel::from_version_dir(items.front().entry_dir.parent_path());
  for (auto& item : items) {
    item.predicted = model->predict(item.entry_dir, item.graph_bytes);
    if (options.memory_per_compile) item.predicted.peak_bytes = *options.memory_per_compile;
  }
  (void)cache;
  return items;
}

int choose_parallelism(const Options& options, const std::vector<WorkItem>& items, std::uint64_t budget) {
  if (options.num_parallel) return *options.num_parallel;
  std::uint64_t peak = 0;
  for (const auto& item : items) peak = std::max(peak, item.predicted.peak_bytes);
  if (peak == 0) peak = kDefaultCompilePeakBytes;
  auto by_memory = budget == 0 ? core_count() : static_cast<unsigned>(std::max<std::uint64_t>(1, budget / peak));
  return static_cast<int>(std::max(1u, std::min(core_count(), by_memory)));
}

void print_dry_run(const Pool& pool) {
  util::Table table({"ORDER", "ENTRY", "STATE", "PREDICTED", "PEAK MEMORY", "SHARE"});
  int n = 0;
  for (std::size_t i : pool.order()) {
    const auto& item = pool.items()[i];
    const auto& p = pool.progress()[i];
    const char* state = p.state == ItemState::cached ? "cached"
                        : p.state == ItemState::failed ? "failed (cached)"
                        : p.state == ItemState::deferred ? "locked elsewhere"
                                                         : "would compile";
    table.add({std::to_string(++n), item.key, state, util::format_seconds(item.predicted.seconds),
               item.predicted.peak_bytes ? util::format_bytes(item.predicted.peak_bytes) : "unknown",
               item.own_share ? "own" : "other"});
  }
  table.print(std::cout);
}

} // namespace

int run(const Options& options, const cli::Settings& settings) {
  if (settings.cache.no_cache)
    throw UsageError("NEURON_CC_FLAGS has --no_cache: nothing compiled ahead of time would be kept, so "
                     "pre-compiling is pointless; remove --no_cache");
  double run_start = util::monotonic_seconds();
  RunFacts facts;
  facts.start_time = util::format_utc(std::chrono::system_clock::now());
  cache::Cache cache(settings.cache_root);
  if (auto s = cache.ensure_root(); !s) throw EnvironmentError(s.error());
  fs::path compiler = compile::locate_compiler(options.compiler);
  std::string version = compile::compiler_version(compiler, cache.private_dir() / cache::kCompilerVersionsDir);
  facts.compiler_version = version;
  RunFiles files = prepare_workdir(options);
  util::become_subreaper(); // so no process of the run outlives an interrupt

  Collector collector(cache.root(), version);
  if (mode_runs_trial(options.mode)) {
    util::Environment environment = util::Environment::current();
    environment.set("NEURON_EXTRACT_GRAPHS_ONLY", "1");
    environment.set("NEURON_PARALLEL_COMPILE", "1");
    environment.set("NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG", files.path_log.string());
    TrialResult trial = run_trial(options.command, environment, files.trial_log);
    if (trial.interrupted_by != 0) {
      spdlog::error("interrupted by {} during the trial run; nothing compiled", util::signal_name(trial.interrupted_by));
      return 128 + trial.interrupted_by;
    }
    for (const auto& line : read_path_log(files.path_log)) collector.add_graph_path(line, "the cache-path log");
    for (const auto& path : trial.reported_paths) collector.add_graph_path(path, "the trial's output");
    if (!trial.status.success()) {
      facts.trial_status = trial.status.describe();
      if (!util::is_truthy(util::env("NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE").value_or(""))) {
        spdlog::error("the training command failed ({}); nothing compiled. Set "
                      "NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE=1 to compile the {} graph(s) it extracted",
                      trial.status.describe(), collector.entries().size());
        return trial.status.shell_code();
      }
      spdlog::warn("the training command failed ({}); compiling the {} graph(s) it extracted, as "
                   "NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE is set",
                   trial.status.describe(), collector.entries().size());
    }
  } else {
    for (const auto& e : cache.list_version(version))
      if (e.state != cache::EntryState::done && e.state != cache::EntryState::incomplete) collector.add_entry_dir(e.dir);
  }
  facts.refused = collector.refused();

  if (options.mode == Mode::collect) {
    std::cout << "collected " << collector.entries().size() << " graph(s) into " << cache.root().string() << "\n";
    for (const auto& e : collector.entries()) std::cout << "  " << e.string() << "\n";
    return 0;
  }

  std::vector<WorkItem> items = make_items(cache, collector.take_entries(), options);
  std::uint64_t budget = options.memory_budget.value_or(available_memory());
  int parallel = choose_parallelism(options, items, budget);
  bool retry_failed = settings.cache.retry_failed_compilation;
  Pool pool(std::move(items), PoolLimits{parallel, budget, options.max_retries});
  double now = util::monotonic_seconds();
  for (std::size_t i = 0; i < pool.items().size(); ++i) {
    auto info = cache.inspect(pool.items()[i].entry_dir);
    if (!info) continue;
    if (info->state == cache::EntryState::done) pool.mark_cached(i);
    else if (info->state == cache::EntryState::locked) pool.mark_locked_elsewhere(i, now);
    else if (info->state == cache::EntryState::failed && !retry_failed)
      pool.mark_cached_failure(i, info->dir / cache::kLogFile);
  }
  if (options.dry_run) {
    print_dry_run(pool);
    return 0;
  }
  std::size_t to_compile = pool.count(ItemState::queued) + pool.count(ItemState::deferred);
  spdlog::info("{} graph(s) found: {} already cached, {} to compile, {} at once", pool.items().size(),
               pool.count(ItemState::cached), to_compile, parallel);

  RunnerConfig config{sibling_program("neuron_cc_wrapper"), compiler, options.compile_timeout, files.log_dir,
                      retry_failed};
  auto progress = ProgressDisplay::for_stream(stderr);
  facts.parallel = parallel;
  PoolRunResult ran = run_pool(pool, cache, config, progress);
  facts.compile_wall_seconds = ran.wall_seconds;
  facts.wall_seconds = util::monotonic_seconds() - run_start;
  if (ran.interrupted_by != 0) {
    spdlog::error("interrupted by {} while compiling; entries not finished stay pending for the next run",
                  util::signal_name(ran.interrupted_by));
    return 128 + ran.interrupted_by;
  }

  if (count(pool).compiled > 0) {
    try {
      auto evicted = cache::evict(cache, {settings.cache.size_limit(), settings.cache.ttl()});
      if (!evicted.deleted.empty())
        spdlog::info("evicted {} least recently used entries to stay under the cache size limit", evicted.deleted.size());
    } catch (const std::exception& e) {
      spdlog::warn("cache eviction skipped: {}", e.what());
    }
  }
  for (const auto& line : summary_lines(pool, facts)) spdlog::info("{}", line);
  for (const auto& path : {options.report, dump_results_path(files.workdir)}) {
    if (!path) continue;
    if (auto s = write_report(pool, facts, *path); !s)
      throw EnvironmentError("cannot write the report: " + s.error());
    spdlog::info("report written to {}", path->string());
  }
  return count(pool).failed > 0 ? kExitGraphsFailed : 0;
}

} // namespace npc::launcher
