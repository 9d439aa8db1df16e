// --command collect-and-compile (default), collect and compile.

#include <algorithm>
#include <unistd.h>
#include <map>
#include <set>
#include <iostream>

#include <spdlog/spdlog.h>

#include <npc/cache/eviction.hpp>
#include <npc/cache/explain.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/precompile_record.hpp>
#include <npc/cache/usage_stats.hpp>
#include <npc/compile/compiler.hpp>
#include <npc/launcher/collect.hpp>
#include <npc/launcher/cost_model.hpp>
#include <npc/launcher/gather.hpp>
#include <npc/launcher/graph_source.hpp>
#include <npc/launcher/launcher.hpp>
#include <npc/launcher/pool_runner.hpp>
#include <npc/launcher/report.hpp>
#include <npc/launcher/run_cluster.hpp>
#include <npc/launcher/run_trace.hpp>
#include <npc/launcher/system.hpp>
#include <npc/launcher/warm_check.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/output_file.hpp>
#include <npc/util/process.hpp>
#include <npc/util/random.hpp>
#include <npc/util/log.hpp>
#include <npc/util/strings.hpp>
#include <npc/util/table.hpp>

namespace npc::launcher {

namespace {

// Every file the run writes at its end, checked before the trial and the
// compiles: finding an unwritable --report after hours of compiling loses
// the report of all of them.
void check_outputs_writable(const Options& options) {
  if (options.report)
    if (auto s = util::check_output_writable(*options.report); !s)
      throw EnvironmentError("--report: " + s.error() + " (name a file in a writable directory)");
  if (dump_results_requested())
    if (auto s = util::check_directory_writable(fs::current_path()); !s)
      throw EnvironmentError("NEURON_PARALLEL_COMPILE_DUMP_RESULTS: the results are written to the current "
                             "directory, but " + s.error());
}

// Which launcher of --world_size takes which entries. Round robin over the
// entries sorted by key by default, every launcher helping with the rest once
// its share is done. --static_schedule, as the original's: contiguous shares
// of the sorted list, each launcher then helping only the 8 before it.
inline constexpr int kStaticScheduleHelped = 8;

std::vector<WorkItem> make_items(std::vector<fs::path> entries, const Options& options, const GraphSource& source) {
  std::vector<WorkItem> items;
  items.reserve(entries.size());
  for (auto& dir : entries) {
    WorkItem item;
    auto key = cache::parse_key(dir.string());
    item.key = key ? key->str() : dir.filename().string();
    std::error_code ec;
    item.graph_bytes = fs::file_size(dir / cache::kGraphFile, ec);
    if (ec) item.graph_bytes = source.graph_bytes_later(dir).value_or(0);
    item.entry_dir = std::move(dir);
    items.push_back(std::move(item));
  }
  // The split among launchers is over the work sorted by key, the same for all.
  std::vector<std::size_t> by_key(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) by_key[i] = i;
  std::sort(by_key.begin(), by_key.end(), [&](std::size_t a, std::size_t b) { return items[a].key < items[b].key; });
  const auto world = static_cast<std::size_t>(options.world_size);
  const auto node = static_cast<std::size_t>(options.node_id);
  const std::size_t share = (by_key.size() + world - 1) / std::max<std::size_t>(1, world);
  std::vector<bool> keep(items.size(), true);
  for (std::size_t rank = 0; rank < by_key.size(); ++rank) {
    if (!options.static_schedule) {
      items[by_key[rank]].own_share = rank % world == node;
      continue;
    }
    std::size_t owner = share == 0 ? 0 : rank / share;
    items[by_key[rank]].own_share = owner == node;
    // Helped: one of the (up to) 8 launchers before this one, cyclically.
    std::size_t distance = (node + world - owner) % world;
    keep[by_key[rank]] = distance <= static_cast<std::size_t>(kStaticScheduleHelped);
  }
  if (options.static_schedule) {
    std::vector<WorkItem> kept;
    for (std::size_t i = 0; i < items.size(); ++i)
      if (keep[i]) kept.push_back(std::move(items[i]));
    items = std::move(kept);
  }
  // Records are per compiler version directory; a trial may fill several roots.
  std::map<fs::path, CostModel> models;
  for (auto& item : items) {
    fs::path version_dir = item.entry_dir.parent_path();
    auto found = models.find(version_dir);
    if (found == models.end()) found = models.emplace(version_dir, CostModel::from_version_dir(version_dir)).first;
    item.predicted = found->second.predict(item.entry_dir, item.graph_bytes);
    if (options.memory_per_compile) item.predicted.peak_bytes = *options.memory_per_compile;
  }
  return items;
}

int choose_parallelism(const Options& options, const std::vector<WorkItem>& items, std::uint64_t budget) {
  if (options.num_parallel) return *options.num_parallel;
  std::uint64_t peak = 0;
  for (const auto& item : items) peak = std::max(peak, item.predicted.peak_bytes);
  if (peak == 0) {
    // Nothing learned: the original's plan, whatever the cores.
    std::uint64_t total = total_memory();
    if (total == 0) return 1;
    return static_cast<int>(std::max<std::uint64_t>(1, (total + kDefaultCompilePeakBytes - 1) / kDefaultCompilePeakBytes));
  }
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
    // Without history the size alone says nothing of seconds: unknown.
    table.add({std::to_string(++n), item.key, state,
               item.predicted.from_history ? util::format_seconds(item.predicted.seconds) : "unknown",
               item.predicted.peak_bytes ? util::format_bytes(item.predicted.peak_bytes) : "unknown",
               item.own_share ? "own" : "other"});
  }
  table.print(std::cout);
}


double epoch_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// How many graphs this run compiled that its own eviction then removed: a
// limit too small for one run's graphs undoes the pre-compile.
std::size_t compiled_and_evicted(const Pool& pool, const cache::EvictionReport& evicted) {
  // By version folder and module name: the same entry may be spelled
  // differently under the roots the collector and the eviction were given.
  auto key = [](const fs::path& dir) { return dir.parent_path().filename() / dir.filename(); };
  std::set<fs::path> compiled;
  for (std::size_t i = 0; i < pool.items().size(); ++i)
    if (pool.progress()[i].state == ItemState::compiled) compiled.insert(key(pool.items()[i].entry_dir));
  return static_cast<std::size_t>(std::count_if(evicted.deleted.begin(), evicted.deleted.end(),
                                                [&](const cache::EntryInfo& e) { return compiled.contains(key(e.dir)); }));
}

// A graph compiled although its bytes were cached under other flags or
// another compiler usually means the settings changed between runs, and the
// training run will miss too if they change again: say so, once.
void hint_graphs_seen_elsewhere(const Pool& pool, const std::vector<fs::path>& roots) {
  std::vector<fs::path> compiled;
  for (std::size_t i = 0; i < pool.items().size(); ++i)
    if (pool.progress()[i].state == ItemState::compiled) compiled.push_back(pool.items()[i].entry_dir);
  if (compiled.empty()) return;
  std::vector<cache::EntryInfo> entries;
  for (const auto& root : roots) {
    auto listed = cache::Cache(root).list();
    entries.insert(entries.end(), std::make_move_iterator(listed.begin()), std::make_move_iterator(listed.end()));
  }
  auto seen = cache::compiled_graphs_seen_elsewhere(std::move(entries), compiled);
  if (seen.graphs == 0) return;
  spdlog::info("note: {} graph(s) compiled in this run already had entries under other compiler flags or another "
               "compiler version; `neuron_cache explain {}` shows what differs",
               seen.graphs, seen.example->string());
}

// What the cache already says about each graph: done, failed, held or gone.
void mark_known(Pool& pool, const cache::Cache& cache, const GraphSource& source, bool retry_failed) {
  double now = util::monotonic_seconds();
  for (std::size_t i = 0; i < pool.items().size(); ++i) {
    const cache::Entry entry = cache.entry(pool.items()[i].entry_dir);
    auto info = entry.inspect();
    if (!info) continue;
    if (info->state == cache::EntryState::done) pool.mark_cached(i);
    else if (info->state == cache::EntryState::locked) pool.mark_locked_elsewhere(i, now);
    else if (info->state == cache::EntryState::absent && !source.graph_bytes_later(entry.dir()))
      pool.mark_removed_elsewhere(i); // since the trial
    else if (info->state == cache::EntryState::failed && !retry_failed)
      pool.mark_cached_failure(i, entry.log_path());
    // Pending here, and held elsewhere in force when it was brought: waited
    // for there, as a graph a worker found held, so no worker starts only
    // to meet the lock.
    if (info->state == cache::EntryState::pending || info->state == cache::EntryState::absent)
      if (auto holder = source.held_elsewhere(entry.dir())) {
        pool.mark_held_elsewhere(i, now);
        spdlog::debug("{} is held by another host ({}); waiting for it there, no worker started",
                      entry.dir().filename().string(), *holder);
      }
  }
}

// After a run that compiled: each cache the graphs went to kept under its
// limit, and a warning when that evicted what this run compiled.
void evict_after_run(const Pool& pool, const std::vector<fs::path>& roots, const cache::Cache& cache,
                     const config::Settings& settings) {
  for (const auto& root : roots) {
    cache::Cache root_cache(root);
    root_cache.set_stale_lock_age(cache.stale_lock_age());
    try {
      auto evicted = cache::evict(root_cache, {settings.cache.size_limit(), settings.cache.ttl()});
      if (!evicted.deleted.empty())
        spdlog::info("evicted {} least recently used entries of {} to stay under the cache size limit",
                     evicted.deleted.size(), root.string());
      if (std::size_t lost = compiled_and_evicted(pool, evicted); lost > 0)
        spdlog::warn("the cache size limit evicted {} of the {} graph(s) this run compiled: the training run "
                     "will compile them again. Raise --cache_size (now {} bytes) or --cache_ttl (now {:g} days) "
                     "in NEURON_CC_FLAGS",
                     lost, count(pool).compiled, settings.cache.size_limit(),
                     static_cast<double>(settings.cache.ttl().count()) / 86400.0);
    } catch (const std::exception& e) {
      spdlog::warn("cache eviction of {} skipped: {}", root.string(), e.what());
    }
  }
}

// The end of a run: summaries, graphs left to another holder, hints, the
// report and the original's results files.
// The pre-compile as a record in the cache every host sees
// (cache/precompile_record.hpp), for `neuron_cache misses` to judge later
// compiles against: each graph it took and how it ended. Its end is taken
// once every graph of the run is stored, so none reads as made after it.
void record_precompile(const Pool& pool, const GraphSource& source, const cache::Cache& cache,
                       const std::vector<fs::path>& roots, util::WallTime started,
                       const std::string& compiler_version) {
  // A run that took no graph (--command compile with none pending) is no
  // pre-compile to judge a training run against: the last one stays so.
  if (pool.items().empty()) return;
  cache::PrecompileRecord record;
  record.started = started;
  record.ended = std::chrono::system_clock::now();
  record.host = util::this_host();
  record.pid = ::getpid();
  record.compiler_version = compiler_version;
  for (std::size_t i = 0; i < pool.items().size(); ++i) {
    std::string outcome = "left";
    switch (pool.progress()[i].state) {
    case ItemState::compiled: outcome = "compiled"; break;
    case ItemState::cached: outcome = "cached"; break;
    case ItemState::compiled_elsewhere: outcome = "compiled_elsewhere"; break;
    case ItemState::failed: outcome = "failed"; break;
    default: break;
    }
    record.graphs.push_back({pool.items()[i].key, std::move(outcome)});
  }
  try {
    auto storage = source.open_common_storage();
    if (auto s = cache::write_precompile_record(*storage, record); !s) spdlog::warn("{}", s.error());
  } catch (const std::exception& e) {
    spdlog::warn("cannot record the pre-compile: {}", e.what());
  }
  // A trial of an older release stores its graphs in DIR/neuron-compile-cache,
  // the root neuron_cache then finds: the record goes there too.
  for (const auto& root : roots) {
    std::error_code ec;
    if (fs::equivalent(root, cache.root(), ec)) continue;
    if (auto s = cache::write_precompile_record(*cache::Cache(root).storage(), record); !s)
      spdlog::warn("{}", s.error());
  }
}

void report_run(const Options& options, const Pool& pool, const cache::Cache& cache, const std::vector<fs::path>& roots,
                const RunFacts& facts, const PoolRunResult& ran, double compile_start_epoch) {
  for (const auto& line : summary_lines(pool, facts)) spdlog::info("{}", line);
  // Graphs left to another holder: who, and what to do if it is gone.
  for (std::size_t i = 0; i < pool.items().size(); ++i)
    if (pool.progress()[i].state == ItemState::locked_elsewhere)
      spdlog::warn("LEFT {}: held by {}; if that process is gone, `neuron_parallel_compile --command clear-locks` "
                   "removes its lock and a rerun compiles it",
                   pool.items()[i].entry_dir.string(),
                   cache.entry(pool.items()[i].entry_dir).describe_holder().value_or("a process that let go since"));
  for (const auto& line : original_summary_lines(pool)) util::log_always(line);
  try {
    hint_graphs_seen_elsewhere(pool, roots);
  } catch (const std::exception& e) {
    spdlog::debug("no look for the compiled graphs under other settings: {}", e.what());
  }
  if (options.report) {
    if (auto s = write_report(pool, facts, *options.report); !s)
      throw EnvironmentError("--report: " + s.error());
    spdlog::info("report written to {}", options.report->string());
  }
  if (dump_results_requested()) {
    auto written = write_original_results(pool, compile_start_epoch, ran.wall_seconds, ran.wall_seconds,
                                          fs::current_path(), epoch_seconds(),
                                          options.step ? options.step->file_tag() : std::string());
    if (!written) throw EnvironmentError("cannot write the results: " + written.error());
    spdlog::info("results written to {} and {}", written->results.string(), written->total.string());
  }
}

// What the run adds to the cache's counters (cache/usage_stats.hpp): the
// graphs found compiled are its hits, those it compiled its misses.
void count_run_usage(const Pool& pool, const cache::Cache& cache) {
  cache::UsageCounts counts;
  for (std::size_t i = 0; i < pool.items().size(); ++i) {
    const ItemProgress& p = pool.progress()[i];
    if (p.state == ItemState::cached) counts += cache::hit_of(pool.items()[i].entry_dir);
    if (p.state == ItemState::compiled) ++counts.misses;
    if (p.state == ItemState::failed) ++counts.failed;
    counts.compile_seconds += p.compile_seconds;
  }
  if (auto s = cache::record_usage(cache.private_dir(), cache::kLauncherProgram, counts); !s)
    spdlog::debug("the run is not counted in the cache's statistics: {}", s.error());
}

// What a command line can get wrong, found before anything is created or run.
void check_before_anything_runs(const Options& options, const config::Settings& settings) {
  if (settings.cache.no_cache)
    spdlog::warn("NEURON_CC_FLAGS has --no_cache; ignored, as the original does: the compiled graphs go "
                 "into the cache");
  check_outputs_writable(options);
  // A training command that is not there is a mistake in the command line.
  if (mode_runs_trial(options.mode) && !options.command.empty())
    if (auto found = util::find_executable(options.command.front(), util::env("PATH")); !found)
      throw UsageError("cannot run the training command: " + found.error());
}

void log_step_task(const Options& options) {
  spdlog::info("a task of Slurm step {} ({} tasks){}", options.step->step, options.step->count,
               options.share_from_step ? "; on the cache's roll as " +
                                             cluster::step_member_name(*options.step, options.step->index) +
                                             ", its share of the graphs comes first"
                                       : std::string());
}

// --command collect: what was collected, and into which caches.
int print_collected(const Collector& collector) {
  std::string roots;
  for (const auto& r : collector.roots()) roots += (roots.empty() ? "" : ", ") + r.string();
  std::cout << "collected " << collector.entries().size() << " graph(s) into " << roots << "\n";
  for (const auto& e : collector.entries()) std::cout << "  " << e.string() << "\n";
  return 0;
}

// The pool of the run: one item per graph collected, as many compiles at
// once as the memory allows, what the cache holds already marked, and the
// split among launchers the command line asks for.
struct PlannedPool {
  Pool pool;
  int parallel = 1;
  std::uint64_t budget = 0;
};

PlannedPool plan_pool(const Options& options, std::vector<fs::path> entries, const cache::Cache& cache,
                      const GraphSource& source, const npc::cluster::Cluster& cluster, bool retry_failed) {
  std::vector<WorkItem> items = make_items(std::move(entries), options, source);
  const std::uint64_t budget = options.memory_budget.value_or(available_memory());
  const int parallel = choose_parallelism(options, items, budget);
  Pool pool(std::move(items), PoolLimits{parallel, budget, options.max_retries});
  if (cluster.spreads_picks()) pool.spread_picks(util::random_u64(), kSpreadBand);
  if (options.world_size > 1) pool.split_by_world();
  mark_known(pool, cache, source, retry_failed);
  // --static_schedule keeps the original's shares as they are.
  if (options.world_size > 1 && !options.static_schedule)
    pool.share_the_critical(static_cast<std::size_t>(options.world_size));
  return {std::move(pool), parallel, budget};
}

// The compile phase: the pool run by this launcher's workers, with its
// progress on stderr and its phase in the trace.
PoolRunResult compile_pool(PlannedPool& planned, const cache::Cache& cache, const RunnerConfig& config,
                           RunFacts& facts) {
  auto progress = ProgressDisplay::for_stream(stderr);
  const double compile_start = util::monotonic_seconds();
  PoolRunResult ran = run_pool(planned.pool, cache, config, progress);
  facts.compile_wall_seconds = ran.wall_seconds;
  if (config.trace) {
    const Counts counted = count(planned.pool);
    config.trace->phase("compile", compile_start, util::monotonic_seconds(),
                        {{"parallel", planned.parallel}, {"memory_budget_bytes", planned.budget},
                         {"compiled", counted.compiled}, {"failed", counted.failed},
                         {"compiled_elsewhere", counted.compiled_elsewhere},
                         {"interrupted_by", ran.interrupted_by != 0 ? util::signal_name(ran.interrupted_by) : ""}});
  }
  return ran;
}

} // namespace

int run_pre_compile(const Options& options, const config::Settings& settings, RunTrace* trace, RunFacts& facts) {
  check_before_anything_runs(options, settings);
  // Read now: a value that means neither yes nor no is an error before the
  // trial, not a surprise after it.
  const bool compile_despite_trial_failure = util::env_flag("NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE");
  double run_start = util::monotonic_seconds();
  const util::WallTime run_started = std::chrono::system_clock::now();
  facts.start_time = util::format_utc(run_started);
  cache::Tiers tiers(settings);
  cache::Cache& cache = tiers.directory();
  if (options.lock_timeout) cache.set_stale_lock_age(*options.lock_timeout);
  if (auto s = cache.ensure_root(); !s) throw EnvironmentError(s.error());
  fs::path compiler = compile::locate_compiler(options.compiler);
  std::string version = compile::compiler_version(compiler, cache.private_dir() / cache::kCompilerVersionsDir);
  facts.compiler_version = version;
  RunFiles files = prepare_workdir(options);
  if (options.step) log_step_task(options);
  util::become_subreaper(); // so no process of the run outlives an interrupt

  Collector collector(cache.root(), version);
  GraphSource source(tiers, version);
  auto cluster = std::make_shared<npc::cluster::Cluster>(join_cluster(options, source));
  const bool retry_failed = settings.cache.retry_failed_compilation;
  double collect_start = util::monotonic_seconds();
  if (mode_runs_trial(options.mode)) {
    if (auto ended = collect_from_trial(options, files, source, collector, facts, compile_despite_trial_failure,
                                        trace, collect_start))
      return *ended;
  } else {
    collect_pending(cache, version, source, collector, retry_failed);
  }
  facts.refused = collector.refused();
  source.log_transfers();
  // Extracted graphs of which none can be compiled: a pre-warm that warms
  // nothing must not pass for one that warmed everything.
  if (collector.entries().empty() && !collector.refused().empty()) {
    spdlog::error("the trial extracted {} graph(s) and none could be taken: {}", collector.refused().size(),
                  collector.refused().front());
    return exit_status(ExitCode::failure);
  }

  if (options.mode == Mode::collect) return print_collected(collector);
  if (options.mode == Mode::check) return report_warm_check(collector.entries(), cache);

  std::vector<fs::path> roots = collector.roots();
  PlannedPool planned = plan_pool(options, collector.take_entries(), cache, source, *cluster, retry_failed);
  Pool& pool = planned.pool;
  const int parallel = planned.parallel;
  std::size_t to_compile = pool.count(ItemState::queued) + pool.count(ItemState::deferred);
  if (trace)
    trace->phase("collect", collect_start, util::monotonic_seconds(),
                 {{"graphs", pool.items().size()}, {"cached", pool.count(ItemState::cached)},
                  {"to_compile", to_compile}, {"refused", facts.refused.size()}});
  if (options.dry_run) {
    print_dry_run(pool);
    return 0;
  }
  spdlog::info("{} graph(s) found: {} already cached, {} to compile, {} at once", pool.items().size(),
               pool.count(ItemState::cached), to_compile, parallel);

  // A host that ran the trial trains next: the results other hosts compile
  // come into its mirror as they land, so its first steps find them there.
  // --command compile, as on the nodes of a compile farm, leaves them in the
  // shared cache: on 16 hosts of 304 graphs, those downloads (a listing,
  // four GETs and a PUT each, on every host) were half of all requests.
  const auto download = mode_runs_trial(options.mode) ? cache::DownloadResult::yes : cache::DownloadResult::no;
  cluster->attach_shared_tier(source.held_look(retry_failed, download));
  RunnerConfig config{sibling_program("neuron_cc_wrapper"), compiler, options.compile_timeout, files.log_dir,
                      retry_failed, cache.stale_lock_age(), tiers.worker_arguments(), cluster, trace};
  if (options.step) {
    config.run = options.step->run_name();
    config.run_by = options.step->label();
  }
  cluster->report_start(task_totals(pool));
  facts.parallel = parallel;
  double compile_start_epoch = epoch_seconds();
  PoolRunResult ran = compile_pool(planned, cache, config, facts);
  facts.wall_seconds = util::monotonic_seconds() - run_start;
  if (ran.interrupted_by != 0) {
    facts.interrupted_by = ran.interrupted_by;
    spdlog::error("interrupted by {} while compiling; entries not finished stay pending for the next run",
                  util::signal_name(ran.interrupted_by));
    return exit_status_for_signal(ran.interrupted_by);
  }
  if (count(pool).compiled > 0) evict_after_run(pool, roots, cache, settings);
  record_precompile(pool, source, cache, roots, run_started, version);
  report_run(options, pool, cache, roots, facts, ran, compile_start_epoch);
  if (settings.count_usage) count_run_usage(pool, cache);
  cluster->report_end(task_totals(pool));
  return exit_status_for_failed_graphs(count(pool).failed);
}

} // namespace npc::launcher
