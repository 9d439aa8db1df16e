#include <npc/launcher/gather.hpp>

#include <chrono>
#include <set>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/launcher/old_runs.hpp>
#include <npc/launcher/trial.hpp>
#include <npc/storage/open.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/process.hpp>
#include <npc/util/shell_words.hpp>

namespace npc::launcher {

namespace {

// The original's: /tmp/$USER/parallel_compile_workdir ("no-user" without USER).
fs::path default_workdir() {
  auto user = util::env("USER");
  return fs::path("/tmp") / (user && !user->empty() ? *user : std::string("no-user")) / "parallel_compile_workdir";
}

} // namespace

// The original's names, per launcher pid, so that launchers sharing a
// workdir do not mix their files. Unlike the original, which empties the
// workdir at every start, we remove only our own files: a workdir is often
// shared, or named by the user.
RunFiles prepare_workdir(const Options& options) {
  RunFiles files;
  files.workdir = fs::absolute(options.workdir.value_or(default_workdir()));
  auto unusable = [](const std::string& why) {
    return EnvironmentError("--parallel_compile_workdir: " + why + " (name a writable directory)");
  };
  if (auto s = util::ensure_dir(files.workdir, 0755); !s) throw unusable(s.error());
  std::string tag = "pid" + std::to_string(::getpid());
  files.path_log = files.workdir / ("cache_path_" + tag + "_log.txt");
  files.trial_log = files.workdir / ("trial_run_" + tag + "_log.txt");
  files.log_dir = files.workdir / ("compile_logs_" + tag);
  std::ignore = ::unlink(files.path_log.c_str());
  // Creating our log directory is the writability check: it fails on a
  // read-only or full filesystem even for root, whom access() lets pass.
  if (auto s = util::ensure_dir(files.log_dir, 0755); !s) throw unusable(s.error());
  files.alive = mark_run_alive(files.log_dir);
  // Ours is the newest run now: it counts among those kept.
  std::ignore = remove_old_runs(files.workdir);
  return files;
}

std::optional<int> collect_from_trial(const Options& options, const RunFiles& files, GraphSource& source,
                                      Collector& collector, RunFacts& facts, bool compile_despite_trial_failure,
                                      RunTrace* trace, double& collect_start) {
  util::Environment environment = util::Environment::current();
  environment.set("NEURON_EXTRACT_GRAPHS_ONLY", "1");
  environment.set("NEURON_PARALLEL_COMPILE", "1");
  environment.set("NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG", files.path_log.string());
  // File times lag the clock by up to a timer tick: a graph written just as
  // the trial started must still count as written by it.
  constexpr auto kFileTimeSlack = std::chrono::seconds(1);
  const auto trial_started = fs::file_time_type::clock::now() - kFileTimeSlack;
  const double trial_start = util::monotonic_seconds();
  TrialResult trial = run_trial(options.command, environment, files.trial_log);
  collect_start = util::monotonic_seconds();
  if (trace)
    trace->phase("trial", trial_start, collect_start,
                 {{"command", util::join_shell_words(options.command)},
                  {"status", trial.interrupted_by != 0 ? "interrupted by " + util::signal_name(trial.interrupted_by)
                                                       : trial.status.describe()},
                  {"log", files.trial_log.string()}});
  if (trial.interrupted_by != 0) {
    facts.interrupted_by = trial.interrupted_by;
    spdlog::error("interrupted by {} during the trial run; nothing compiled", util::signal_name(trial.interrupted_by));
    return exit_status_for_signal(trial.interrupted_by);
  }
  // The graphs the trial named, in order. The roots first: the framework
  // names the one it used there.
  std::vector<NamedGraph> named;
  for (const auto& line : read_path_log(files.path_log)) {
    if (source.brings(line)) named.push_back({line, "the cache-path log"});
    else collector.add_path_log_line(line);
  }
  // Each rank names its graphs: the same URL is brought once.
  std::set<std::string> seen;
  for (const auto& one : named) seen.insert(one.text);
  for (const auto& path : trial.reported_paths)
    if (!storage::is_url(path) || seen.insert(path).second) named.push_back({path, "the trial's output"});
  source.collect(collector, named);
  collector.say_repeated_refusals();
  if (trial.unreadable_extraction_lines > 0) {
    std::string roots;
    for (const auto& r : collector.roots()) roots += (roots.empty() ? "" : ", ") + r.string();
    std::size_t found = collector.add_pending_written_since(trial_started);
    spdlog::warn("{} extraction line(s) of the trial's output name no graph path (a newline in the cache "
                 "path?); took the {} pending graph(s) the trial wrote under {}",
                 trial.unreadable_extraction_lines, found, roots);
    if (collector.entries().empty()) {
      spdlog::error("the trial announced extracted graphs whose paths could not be read, and no pending "
                    "entry it wrote was found under {}; nothing compiled. Use a cache path without a "
                    "newline, or run --command compile to compile every pending entry",
                    roots);
      return exit_status(ExitCode::failure);
    }
  }
  if (!trial.status.success()) {
    facts.trial_status = trial.status.describe();
    // No graph to compile: neither an offer to compile it nor a word of
    // compiling it.
    const std::size_t extracted = collector.entries().size();
    const std::string none_taken =
        collector.refused().empty()
            ? "before extracting any graph"
            : "and none of the " + std::to_string(collector.refused().size()) + " graph(s) it extracted could be taken";
    if (!compile_despite_trial_failure) {
      if (extracted == 0)
        spdlog::error("the training command failed ({}) {}; nothing compiled", trial.status.describe(), none_taken);
      else
        spdlog::error("the training command failed ({}); nothing compiled. Set "
                      "NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE=1 to compile the {} graph(s) it extracted",
                      trial.status.describe(), extracted);
      return exit_status(ExitCode::failure);
    }
    if (extracted == 0)
      spdlog::warn("the training command failed ({}) {}; nothing to compile", trial.status.describe(), none_taken);
    else
      spdlog::warn("the training command failed ({}); compiling the {} graph(s) it extracted, as "
                   "NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE is set",
                   trial.status.describe(), extracted);
  }
  return std::nullopt;
}

void collect_pending(const cache::Cache& cache, const std::string& version, GraphSource& source,
                     Collector& collector, bool with_failed) {
  source.collect_shared_pending(collector, with_failed);
  std::size_t incomplete = 0;
  std::optional<fs::path> an_incomplete;
  for (const auto& e : cache.list_version(version)) {
    if (e.state == cache::EntryState::incomplete) {
      ++incomplete;
      if (!an_incomplete) an_incomplete = e.dir;
    } else if (e.state != cache::EntryState::done) {
      collector.add_entry_dir(e.dir);
    }
  }
  if (incomplete > 0)
    spdlog::warn("{} incomplete entr{} (a graph without its compile_flags.json, or neither, as a writer that died "
                 "leaves it) not compiled, e.g. {}: the next extraction of the graph completes it, "
                 "`neuron_cache rm` removes it",
                 incomplete, incomplete == 1 ? "y" : "ies", an_incomplete->string());
}

} // namespace npc::launcher
