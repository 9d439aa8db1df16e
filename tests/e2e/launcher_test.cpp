// neuron_parallel_compile against the stand-in training script and compiler.

#include <regex>
#include <set>
#include <sstream>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <npc/cache/entry_meta.hpp>
#include <npc/util/process.hpp>
#include <npc/util/sha256.hpp>

#include "test_support.hpp"

namespace npc::test {
namespace {

class Launcher : public CacheTest {
protected:
  // init + 2 train + eval = 4 graphs in a 10-step trial; a late graph at 20.
  std::vector<std::string> train(int steps, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {(standin_dir() / "standin_train").string(), "--nproc_per_node", "2",
                                     "--steps_this_run", std::to_string(steps), "--graphs_per_step", "2",
                                     "--eval_every", "5", "--late_graph_step", "20", "--layers", "2",
                                     "--hidden", "64", "--workdir", (dir() / "train").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  RunResult launch(std::vector<std::string> ours, const std::vector<std::string>& command = {},
                   std::map<std::string, std::string> env = {}) {
    ours.insert(ours.begin(), "--parallel_compile_workdir=" + (dir() / "wd").string());
    ours.insert(ours.end(), command.begin(), command.end());
    return run_tool("neuron_parallel_compile", ours, std::move(env));
  }
  nlohmann::json report() { return nlohmann::json::parse(read_text(dir() / "report.json")); }
  std::size_t done_entries() {
    std::size_t n = 0;
    for (const auto& e : entries()) n += fs::exists(e / "model.done");
    return n;
  }
};

// Scripts grep the original's totals: --log_level WARNING keeps them and
// the failures, and hides the routine line of each graph.
TEST_F(Launcher, LogLevelWarningKeepsTheTotalsAndFailuresAndHidesRoutineLines) {
  auto r = launch({"--log_level", "WARNING"}, train(10),
                  {{"STANDIN_CC_FAULT", "fail"}, {"STANDIN_CC_FAULT_MATCH", "SyncTensorsGraph.27"}}); // the eval graph
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("neuron_parallel_compile: Total graphs: 4\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("neuron_parallel_compile: Total successful compilations: 3\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("neuron_parallel_compile: Total failed compilations: 1\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("neuron_parallel_compile: FAILED MODULE_"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("neuron_parallel_compile: compiled MODULE_"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("graphs found"), std::string::npos) << r.err;
}

TEST_F(Launcher, ARemovedCurrentDirectoryIsOneClearLineAndExitThree) {
  fs::create_directories(dir() / "gone");
  auto r = run({"/bin/sh", "-c", "cd '" + (dir() / "gone").string() + "' && rmdir '" + (dir() / "gone").string() +
                                     "' && exec '" + program("neuron_parallel_compile").string() +
                                     "' --command scan"},
               options());
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  EXPECT_EQ(r.err, "neuron_parallel_compile: error: the current directory no longer exists (it was removed); cd to "
                   "a directory that exists and run again\n");
}

TEST_F(Launcher, CompileSaysWhichIncompleteEntriesItLeaves) {
  for (const char* name : {"MODULE_1+2", "MODULE_3+4"})
    write_text(cache_root() / (std::string("neuronxcc-") + kStandinVersion) / name / "model.hlo_module.pb",
               "HloModule left\n");
  auto r = launch({"--command", "compile"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("warning: 2 incomplete entries (a graph without its compile_flags.json, or neither, as a "
                       "writer that died leaves it) not compiled, e.g. " +
                       (cache_root() / (std::string("neuronxcc-") + kStandinVersion) / "MODULE_").string()),
            std::string::npos)
      << r.err;
  EXPECT_EQ(compiles(), 0u);
}

// The workdir keeps the last runs' logs, not every run's for ever.
TEST_F(Launcher, TheWorkdirKeepsTheLastFiveRuns) {
  for (int run = 0; run < 7; ++run) ASSERT_EQ(launch({"--command", "compile"}).exit_code, 0);
  std::size_t trial_logs = 0, compile_log_dirs = 0, other = 0;
  for (const auto& name : names_in(dir() / "wd")) {
    if (std::regex_match(name, std::regex("cache_path_pid[0-9]+_log\\.txt"))) continue; // compile writes none
    if (std::regex_match(name, std::regex("compile_logs_pid[0-9]+"))) ++compile_log_dirs;
    else if (std::regex_match(name, std::regex("trial_run_pid[0-9]+_log\\.txt"))) ++trial_logs;
    else ++other;
  }
  EXPECT_EQ(compile_log_dirs, 5u);
  EXPECT_EQ(other, 0u);
  EXPECT_LE(trial_logs, 5u);
}

TEST_F(Launcher, ColdPrecompileThenTrainingCompilesNothing) {
  auto r = launch({"--report", (dir() / "report.json").string()}, train(10));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), 4u);
  EXPECT_EQ(entries().size(), 4u);
  EXPECT_EQ(done_entries(), 4u);
  EXPECT_NE(r.err.find("4 graphs found, 0 already cached, 4 compiled, 0 failed, 0 retried"), std::string::npos) << r.err;
  // The trial's own output passed through.
  EXPECT_NE(r.out.find("Extracting graphs ("), std::string::npos);
  EXPECT_NE(r.out.find("standin_train: total: ranks=2 graphs=4 jit_compiles=0"), std::string::npos) << r.out;
  auto j = report();
  EXPECT_EQ(j["compilation_summary"]["total_graphs"], 4);
  EXPECT_EQ(j["compilation_summary"]["compiled"], 4);
  EXPECT_EQ(j["compilation_summary"]["failed"], 0);
  ASSERT_EQ(j["compilation_report"].size(), 4u);
  for (const auto& [graph, item] : j["compilation_report"].items()) {
    EXPECT_TRUE(fs::exists(graph)) << graph;
    EXPECT_EQ(item["status"], "compiled");
    EXPECT_EQ(item["retry"], 0);
    EXPECT_GT(item["compile_time"].get<double>(), 0);
    EXPECT_GT(item["peak_rss_bytes"].get<std::uint64_t>(), 0u);
    EXPECT_EQ(item["exit"], "exit code 0");
  }
  EXPECT_TRUE(j.contains("start_time"));
  EXPECT_TRUE(j.contains("compilation_time"));

  auto real = run(train(10), options());
  ASSERT_EQ(real.exit_code, 0) << real.describe();
  EXPECT_EQ(train_total_field(real.out, "jit_compiles"), 0) << real.out;
  EXPECT_EQ(compiles(), 4u);

  // A second pre-compile finds everything cached.
  auto again = launch({}, train(10));
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_NE(again.err.find("4 graphs found, 4 already cached, 0 compiled"), std::string::npos) << again.err;
  EXPECT_EQ(compiles(), 4u);
}

TEST_F(Launcher, UserCommandReceivesItsArgumentsIntact) {
  fs::path out = dir() / "args.txt";
  auto r = launch({"--num_parallel", "2"},
                  {"/bin/sh", "-c", "printf '%s\\n' \"$@\" > " + out.string(), "sh", "--log_level", "X",
                   "--world_size", "4", "--num_parallel", "3", "--", "--report", "a b"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text(out), "--log_level\nX\n--world_size\n4\n--num_parallel\n3\n--\n--report\na b\n");
  EXPECT_NE(r.err.find("0 graphs found"), std::string::npos) << r.err;
}

TEST_F(Launcher, TrialEnvironmentHasTheExtractionVariables) {
  fs::path out = dir() / "env.txt";
  auto r = launch({}, {"/bin/sh", "-c", "env > " + out.string()}, {{"MY_VAR", "kept"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::string env = read_text(out);
  EXPECT_NE(env.find("\nNEURON_EXTRACT_GRAPHS_ONLY=1\n"), std::string::npos);
  EXPECT_NE(env.find("\nNEURON_PARALLEL_COMPILE=1\n"), std::string::npos);
  EXPECT_NE(env.find("\nNEURON_PARALLEL_COMPILE_CACHE_PATH_LOG=" + (dir() / "wd").string() + "/cache_path_pid"),
            std::string::npos) << env;
  EXPECT_NE(env.find("\nMY_VAR=kept\n"), std::string::npos);
}

TEST_F(Launcher, RetriesSucceedWhenFaultsAreFewerThanRetries) {
  auto r = launch({"--max-retries", "2", "--report", (dir() / "report.json").string()}, train(10),
                  {{"STANDIN_CC_FAULT", "exit70"}, {"STANDIN_CC_FAULT_TIMES", "2"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(done_entries(), 4u);
  EXPECT_EQ(compiles(), 12u); // 2 failures + 1 success per graph
  auto j = report();
  EXPECT_EQ(j["compilation_summary"]["retried"], 4);
  for (const auto& [graph, item] : j["compilation_report"].items()) EXPECT_EQ(item["retry"], 2) << graph;
}

TEST_F(Launcher, RetriesFromTheEnvironmentVariable) {
  auto r = launch({}, train(10),
                  {{"STANDIN_CC_FAULT", "exit70"}, {"STANDIN_CC_FAULT_TIMES", "1"},
                   {"NEURON_PARALLEL_COMPILE_MAX_RETRIES", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), 8u);
}

TEST_F(Launcher, FailsCleanlyWhenFaultsOutlastRetries) {
  auto r = launch({"--max-retries", "1", "--report", (dir() / "report.json").string()}, train(10),
                  {{"STANDIN_CC_FAULT", "exit70"}, {"STANDIN_CC_FAULT_TIMES", "5"}});
  EXPECT_EQ(r.exit_code, 4) << r.describe(); // the number of graphs that failed
  EXPECT_EQ(compiles(), 8u);
  ASSERT_EQ(entries().size(), 4u);
  EXPECT_EQ(done_entries(), 0u);
  for (const auto& e : entries()) {
    EXPECT_TRUE(fs::exists(e / "model.log")) << e;
    EXPECT_NE(r.err.find("FAILED " + e.string() + ": compiler exit code 70 (2 attempt(s)); log " +
                         (e / "model.log").string()), std::string::npos) << r.err;
  }
  EXPECT_NE(r.err.find("4 graphs found, 0 already cached, 0 compiled, 4 failed, 4 retried"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  | "), std::string::npos) << "last lines of the log";
  EXPECT_EQ(report()["compilation_summary"]["failed"], 4);

  // A cached failure is not recompiled by the next run...
  auto again = launch({}, train(10));
  EXPECT_EQ(again.exit_code, 4);
  EXPECT_EQ(compiles(), 8u);
  for (const auto& e : entries())
    EXPECT_NE(again.err.find("FAILED " + e.string() + ": failure cached by an earlier compile; log " +
                             (e / "model.log").string() +
                             " (compile it again with --retry_failed_compilation in NEURON_CC_FLAGS, or forget the "
                             "failure with neuron_cache clear-failed)"),
              std::string::npos)
        << again.err;
  // ...unless asked.
  env_["NEURON_CC_FLAGS"] += " --retry_failed_compilation";
  auto retried = launch({}, train(10));
  EXPECT_EQ(retried.exit_code, 0) << retried.describe();
  EXPECT_EQ(done_entries(), 4u);
}

TEST_F(Launcher, TimeoutKillsTheCompileAndCountsAsAFailedAttempt) {
  auto r = launch({"--compile-timeout", "0.3"}, train(10), {{"STANDIN_CC_FAULT", "hang"}});
  EXPECT_EQ(r.exit_code, 4) << r.describe();
  // One attempt each: a timeout is a failed attempt, not a memory kill.
  EXPECT_NE(r.err.find("compiler timed out after 0.3s (1 attempt(s))"), std::string::npos) << r.err;
  EXPECT_EQ(compiles(), 4u);
  ASSERT_EQ(entries().size(), 4u);
  EXPECT_EQ(done_entries(), 0u);
  // Every hung compiler was killed, and nothing of the run is left.
  ASSERT_EQ(compiler_pids().size(), 4u);
  for (pid_t pid : compiler_pids()) EXPECT_FALSE(alive(pid)) << "hung compiler " << pid << " still runs";
  auto left = processes_with_cmdline(dir().string());
  EXPECT_TRUE(left.empty()) << "still running:\n" << describe(left);
  // Not cached as failures: left pending, with the log kept aside.
  for (const auto& e : entries()) {
    EXPECT_FALSE(fs::exists(e / "model.log")) << e;
    EXPECT_NE(r.err.find("FAILED " + e.string() + ": compiler timed out after 0.3s (1 attempt(s)); log " +
                         (e / "npc-killed.log").string()), std::string::npos) << r.err;
  }
  auto next = launch({}, train(10));
  EXPECT_EQ(next.exit_code, 0) << next.describe();
  EXPECT_EQ(done_entries(), 4u);
}

TEST_F(Launcher, SigkilledCompileIsRetriedWithLessParallelism) {
  auto r = launch({"--num_parallel", "2"}, train(10),
                  {{"STANDIN_CC_FAULT", "sigkill"}, {"STANDIN_CC_FAULT_TIMES", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(done_entries(), 4u);
  EXPECT_EQ(compiles(), 8u);
  EXPECT_NE(r.err.find("killed by signal SIGKILL); retrying with 1 at once"), std::string::npos) << r.err;
}

TEST_F(Launcher, TrainingScriptCrashStopsWithItsStatus) {
  auto r = launch({}, train(10, {"--crash_at_step", "3"}));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("the training command failed (exit code 1); nothing compiled"), std::string::npos) << r.err;
  EXPECT_EQ(compiles(), 0u);
}

TEST_F(Launcher, TrainingScriptCrashIgnoredCompilesWhatWasExtracted) {
  auto r = launch({}, train(10, {"--crash_at_step", "3"}), {{"NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE", "1"}});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("the training command failed (exit code 1); compiling the 3 graph(s) it extracted"),
            std::string::npos) << r.err;
  // Exactly what the trial extracted before it crashed: init and two train
  // graphs (the eval graph was never reached), each compiled once and done.
  ASSERT_EQ(entries().size(), 3u);
  EXPECT_EQ(done_entries(), 3u);
  EXPECT_EQ(compiles(), 3u);
  std::set<std::string> extracted;
  for (const auto& e : entries()) extracted.insert(util::sha256_hex(read_text(e / "model.hlo_module.pb")));
  std::set<std::string> compiled;
  std::istringstream log(read_text(invocation_log()));
  for (std::string pid, sha, path; log >> pid >> sha >> path;) compiled.insert(sha);
  EXPECT_EQ(compiled, extracted) << "the graphs compiled are not the graphs extracted";
}

TEST_F(Launcher, TrialKilledBySignalIsAFailedTrial) {
  auto r = launch({}, {"/bin/sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("killed by signal SIGTERM"), std::string::npos) << r.err;
}

TEST_F(Launcher, MissingCommandIsAClearUsageErrorBeforeAnythingIsCreated) {
  auto r = launch({}, {"no-such-training-command"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("cannot run the training command: no-such-training-command was not found on PATH"),
            std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir() / "wd")) << "the workdir was created for a command that cannot run";
}

TEST_F(Launcher, NoCacheIsIgnoredWithAWarningAsTheOriginalDoes) {
  env_["NEURON_CC_FLAGS"] += " --no_cache";
  auto r = launch({}, train(10));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("NEURON_CC_FLAGS has --no_cache; ignored"), std::string::npos) << r.err;
  EXPECT_EQ(compiles(), 4u);
}

TEST_F(Launcher, AnEvictionThatUndoesThePrecompileIsAWarning) {
  env_["NEURON_CC_FLAGS"] += " --cache_size=1k --cache_ttl=0";
  auto r = launch({}, train(10));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles(), 4u);
  std::size_t kept = done_entries();
  ASSERT_LT(kept, 4u) << "1k holds no compiled graph: the eviction must remove some";
  EXPECT_NE(r.err.find("warning: the cache size limit evicted " + std::to_string(4 - kept) +
                       " of the 4 graph(s) this run compiled: the training run will compile them again. Raise "
                       "--cache_size (now 1000 bytes) or --cache_ttl (now 0 days) in NEURON_CC_FLAGS"),
            std::string::npos)
      << r.err;

  // A limit that holds them all says nothing of the kind.
  env_["NEURON_CC_FLAGS"] += " --cache_size=10G";
  auto roomy = launch({}, train(10));
  ASSERT_EQ(roomy.exit_code, 0) << roomy.describe();
  EXPECT_EQ(roomy.err.find("this run compiled"), std::string::npos) << roomy.err;
}

TEST_F(Launcher, CollectThenCompileModes) {
  auto collect = launch({"--command", "collect"}, train(10));
  ASSERT_EQ(collect.exit_code, 0) << collect.describe();
  EXPECT_EQ(compiles(), 0u);
  EXPECT_EQ(entries().size(), 4u);
  EXPECT_NE(collect.out.find("collected 4 graph(s)"), std::string::npos) << collect.out;

  auto scan = launch({"--command", "scan"});
  ASSERT_EQ(scan.exit_code, 0) << scan.describe();
  EXPECT_EQ(scan.out, std::string("neuronxcc-") + kStandinVersion + ": 0 done, 4 pending, 0 locked\n");

  auto dry = launch({"--command", "compile", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.describe();
  EXPECT_EQ(std::count(dry.out.begin(), dry.out.end(), '\n'), 5) << dry.out; // header + 4
  EXPECT_NE(dry.out.find("would compile"), std::string::npos);
  // An empty cache has no history: no time predicted, never a confident zero.
  EXPECT_EQ(dry.out.find("0.0s"), std::string::npos) << dry.out;
  std::size_t unknown = 0;
  for (auto at = dry.out.find("would compile  unknown"); at != std::string::npos;
       at = dry.out.find("would compile  unknown", at + 1))
    ++unknown;
  EXPECT_EQ(unknown, 4u) << dry.out;
  EXPECT_EQ(compiles(), 0u);

  auto compile = launch({"--command", "compile"});
  ASSERT_EQ(compile.exit_code, 0) << compile.describe();
  EXPECT_EQ(compiles(), 4u);
  EXPECT_EQ(done_entries(), 4u);

  auto scanned = launch({"--command", "scan-with-failed"});
  EXPECT_EQ(scanned.out, std::string("neuronxcc-") + kStandinVersion + ": 4 done, 0 failed, 0 pending, 0 locked\n");

  auto clear = launch({"--command", "clear-neffs"});
  ASSERT_EQ(clear.exit_code, 0) << clear.describe();
  EXPECT_EQ(done_entries(), 0u);
  EXPECT_EQ(entries().size(), 4u);
  EXPECT_EQ(launch({"--command", "compile"}).exit_code, 0);
  EXPECT_EQ(compiles(), 8u);

  auto clean = launch({"--command", "clean"});
  ASSERT_EQ(clean.exit_code, 0) << clean.describe();
  EXPECT_EQ(entries().size(), 0u);
  EXPECT_FALSE(fs::exists(dir() / "wd"));
}

TEST_F(Launcher, ScanCountsFailedAsDoneUnlessAskedApart) {
  ASSERT_EQ(launch({}, train(10), {{"STANDIN_CC_FAULT", "fail"}, {"STANDIN_CC_FAULT_MATCH", "SyncTensorsGraph."}}).exit_code, 4);
  EXPECT_EQ(launch({"--command", "scan"}).out,
            std::string("neuronxcc-") + kStandinVersion + ": 4 done, 0 pending, 0 locked\n");
  EXPECT_EQ(launch({"--command", "scan-with-failed"}).out,
            std::string("neuronxcc-") + kStandinVersion + ": 0 done, 4 failed, 0 pending, 0 locked\n");
}

TEST_F(Launcher, ClearLocksRemovesLocksLeftByDeadProcesses) {
  ASSERT_EQ(launch({"--command", "collect"}, train(10)).exit_code, 0);
  for (const auto& e : entries()) write_text(e / "npc-compile.lock", "pid=999999 host=gone start=1 tool=x\n");
  auto r = launch({"--command", "clear-locks"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "4 stale lock files removed\n");
  for (const auto& e : entries()) EXPECT_FALSE(fs::exists(e / "npc-compile.lock"));
}

TEST_F(Launcher, TwoLaunchersOnOneCacheCompileEachGraphOnce) {
  ASSERT_EQ(launch({"--command", "collect"}, train(10, {"--graphs_per_step", "6"})).exit_code, 0);
  std::size_t graphs = entries().size();
  ASSERT_EQ(graphs, 8u);
  std::map<std::string, std::string> slow = {{"STANDIN_CC_BASE_MS", "150"}};
  std::vector<pid_t> launchers;
  for (int node = 0; node < 2; ++node)
    launchers.push_back(start_tool("neuron_parallel_compile",
                                   {"--command", "compile", "--node_id", std::to_string(node), "--world_size", "2",
                                    "--num_parallel", "2", "--parallel_compile_workdir", (dir() / "wd").string()},
                                   slow, dir() / ("node" + std::to_string(node) + ".log")));
  for (pid_t pid : launchers) {
    auto status = util::wait_child(pid);
    EXPECT_TRUE(status.success()) << status.describe();
  }
  EXPECT_EQ(distinct_graphs_compiled(), graphs);
  EXPECT_EQ(compiles(), graphs) << "a graph was compiled twice";
  EXPECT_EQ(done_entries(), graphs);
}

TEST_F(Launcher, ResultsFromTheDumpVariableInTheCurrentDirectory) {
  auto r = launch({}, train(10), {{"NEURON_PARALLEL_COMPILE_DUMP_RESULTS", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::vector<fs::path> results;
  for (const auto& f : fs::directory_iterator(dir()))
    if (f.path().filename().string().starts_with("neuron_parallel_compile_results_")) results.push_back(f);
  ASSERT_EQ(results.size(), 1u);
  auto j = nlohmann::json::parse(read_text(results[0]));
  EXPECT_EQ(j["compilation_summary"], nlohmann::json({{"true", 4}}));
}

// A task of a Slurm step (srun): every line of ours in the job's merged log
// names the task, the results file carries node and task, and the task's
// share comes from the step. Each launcher still compiles every graph it
// found that nobody else holds: here it is alone.
TEST_F(Launcher, UnderSrunEveryLineNamesTheTaskAndTheResultsFileCarriesIt) {
  const std::map<std::string, std::string> step = {
      {"SLURM_JOB_ID", "4711"},      {"SLURM_STEP_ID", "0"},
      {"SLURM_PROCID", "1"},         {"SLURM_STEP_NUM_TASKS", "2"},
      {"SLURMD_NODENAME", "node-b"}, {"NEURON_PARALLEL_COMPILE_DUMP_RESULTS", "1"}};
  auto r = launch({}, train(10), step);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  std::size_t ours = 0;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("neuron_parallel_compile")) continue;
    ++ours;
    EXPECT_EQ(line.rfind("neuron_parallel_compile: task 1/2 node-b: ", 0), 0u) << line;
  }
  EXPECT_GE(ours, 3u) << r.describe();
  EXPECT_NE(r.err.find("neuron_parallel_compile: task 1/2 node-b: Total graphs: 4\n"), std::string::npos)
      << r.describe();
  EXPECT_NE(r.err.find("a task of Slurm step 4711.0 (2 tasks); on the cache's roll as slurm-4711.0.task-1, its "
                       "share of the graphs comes first"),
            std::string::npos)
      << r.describe();
  std::vector<std::string> results;
  for (const auto& f : fs::directory_iterator(dir())) {
    std::string name = f.path().filename().string();
    if (name.find("neuron_parallel_compile_results_") != std::string::npos) results.push_back(name);
  }
  std::sort(results.begin(), results.end());
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].rfind("neuron_parallel_compile_results_node-b.task1_", 0), 0u) << results[0];
  EXPECT_EQ(results[1].rfind("total_neuron_parallel_compile_results_node-b.task1_", 0), 0u) << results[1];
  auto j = nlohmann::json::parse(read_text(dir() / results[0]));
  EXPECT_EQ(j["compilation_summary"], nlohmann::json({{"true", 4}}));
  EXPECT_EQ(done_entries(), 4u);
}

// sbatch's batch script is one process: SLURM_PROCID=0 and SLURM_NTASKS=4
// there name no task of a step, and the options given win over a step's.
TEST_F(Launcher, ABatchScriptIsNoTaskAndGivenOptionsWinOverTheStep) {
  auto batch = launch({}, train(10),
                      {{"SLURM_JOB_ID", "4711"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"},
                       {"SLURMD_NODENAME", "node-a"}});
  ASSERT_EQ(batch.exit_code, 0) << batch.describe();
  EXPECT_EQ(batch.err.find("task 0/4"), std::string::npos) << batch.describe();
  EXPECT_NE(batch.err.find("neuron_parallel_compile: Total graphs: 4\n"), std::string::npos) << batch.describe();

  auto given = launch({"--command", "compile", "--node_id", "0", "--world_size", "1"}, {},
                      {{"SLURM_JOB_ID", "4711"}, {"SLURM_STEP_ID", "1"}, {"SLURM_PROCID", "3"},
                       {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURMD_NODENAME", "node-a"}});
  ASSERT_EQ(given.exit_code, 0) << given.describe();
  EXPECT_NE(given.err.find("neuron_parallel_compile: task 3/4 node-a: a task of Slurm step 4711.1 (4 tasks)\n"),
            std::string::npos)
      << given.describe();
}

TEST_F(Launcher, BadOptionsAreUsageErrors) {
  struct Case { std::vector<std::string> args; std::string message; };
  std::vector<Case> cases = {
      {{"--bogus", "train.py"}, "unknown option '--bogus' before the command"},
      {{"--command", "explode"}, "--command has the bad value 'explode'"},
      {{"--num_parallel", "0", "x"}, "--num_parallel"},
      {{"--node_id", "2", "--world_size", "2", "x"}, "--node_id 2 must be below --world_size 2"},
      {{"--max-retries", "-1", "x"}, "--max-retries has the bad value '-1'"},
      {{"--memory-per-compile", "lots", "x"}, "--memory-per-compile has the bad value 'lots'"},
      {{"--compile-timeout", "0", "x"}, "--compile-timeout has the bad value '0'"},
      {{}, "no command to run"},
      {{"--command", "scan", "x"}, "--command scan runs no training command"},
  };
  for (const auto& c : cases) {
    auto r = run_tool("neuron_parallel_compile", c.args);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.message << "\n" << r.describe();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.describe();
  }
  auto env_bad = run_tool("neuron_parallel_compile", {"x"}, {{"NEURON_PARALLEL_COMPILE_MAX_RETRIES", "many"}});
  EXPECT_EQ(env_bad.exit_code, 2);
  EXPECT_NE(env_bad.err.find("NEURON_PARALLEL_COMPILE_MAX_RETRIES has the bad value 'many'"), std::string::npos);
  auto help = run_tool("neuron_parallel_compile", {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--num_parallel"), std::string::npos);
  auto version = run_tool("neuron_parallel_compile", {"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out.rfind("neuron_parallel_compile ", 0), 0u);
}

// --- the trace (--trace) and the cache's counters ------------------------------

std::vector<nlohmann::json> events_where(const nlohmann::json& trace, const std::string& phase,
                                         const std::string& category) {
  std::vector<nlohmann::json> found;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == phase && e.value("cat", "") == category) found.push_back(e);
  return found;
}

// Four graphs, each failing once then compiled, two at once: the trial, the
// collection and the compile phase on the launcher's lane, in that order;
// each of the 8 attempts on one of two slots, none overlapping another on
// its slot, all inside the compile phase.
TEST_F(Launcher, TheTraceShowsThePhasesAndEachAttemptOnItsSlot) {
  const fs::path trace_file = dir() / "trace.json";
  auto r = launch({"--trace", trace_file.string(), "--num_parallel", "2", "--max-retries", "1"}, train(10),
                  {{"STANDIN_CC_FAULT", "exit70"}, {"STANDIN_CC_FAULT_TIMES", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("trace written to " + trace_file.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("neuron_parallel_compile: slowest compiles (share of the compile phase's "), std::string::npos)
      << r.err;
  auto trace = nlohmann::json::parse(read_text(trace_file));
  EXPECT_EQ(trace["otherData"]["tool"], "neuron_parallel_compile");
  EXPECT_EQ(trace["otherData"]["parallel"], 2);
  auto phases = events_where(trace, "X", "phase");
  ASSERT_EQ(phases.size(), 3u);
  EXPECT_EQ(phases[0]["name"], "trial");
  EXPECT_EQ(phases[0]["args"]["status"], "exit code 0");
  EXPECT_EQ(phases[1]["name"], "collect");
  EXPECT_EQ(phases[1]["args"]["to_compile"], 4);
  EXPECT_EQ(phases[2]["name"], "compile");
  EXPECT_EQ(phases[2]["args"]["compiled"], 4);
  for (std::size_t k = 1; k < phases.size(); ++k)
    EXPECT_GE(phases[k]["ts"].get<std::int64_t>(),
              phases[k - 1]["ts"].get<std::int64_t>() + phases[k - 1]["dur"].get<std::int64_t>());
  const std::int64_t compile_start = phases[2]["ts"], compile_end = compile_start + phases[2]["dur"].get<std::int64_t>();

  auto attempts = events_where(trace, "X", "compile");
  ASSERT_EQ(attempts.size(), 8u);
  std::map<std::string, std::vector<std::string>> outcomes; // per graph, in order
  std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>> by_slot;
  for (const auto& a : attempts) {
    outcomes[a["name"]].push_back(a["args"]["outcome"].get<std::string>() + " " + a["args"]["exit"].get<std::string>() +
                                  " retry " + std::to_string(a["args"]["retry"].get<int>()));
    const std::int64_t start = a["ts"], end = start + a["dur"].get<std::int64_t>();
    EXPECT_GE(start, compile_start);
    EXPECT_LE(end, compile_end);
    by_slot[a["tid"]].emplace_back(start, end);
  }
  ASSERT_EQ(outcomes.size(), 4u);
  for (const auto& [graph, seen] : outcomes) {
    EXPECT_TRUE(fs::exists(entries().front().parent_path() / graph)) << graph;
    EXPECT_EQ(seen, (std::vector<std::string>{"failed exit code 70 retry 0", "compiled exit code 0 retry 1"})) << graph;
  }
  std::set<int> slots;
  for (auto& [slot, spans] : by_slot) {
    slots.insert(slot);
    std::sort(spans.begin(), spans.end());
    for (std::size_t k = 1; k < spans.size(); ++k) EXPECT_GE(spans[k].first, spans[k - 1].second) << "slot " << slot;
  }
  EXPECT_EQ(slots, (std::set<int>{1, 2}));
  EXPECT_FALSE(events_where(trace, "C", "").empty()) << "the memory and running counters";

  // tools/trace_picture.py draws it: a box per attempt, coloured by how it
  // ended (the docs' picture is made so).
  auto drawn = run({"python3", (source_dir() / "tools" / "trace_picture.py").string(), trace_file.string(),
                    (dir() / "trace.svg").string()},
                   options());
  ASSERT_EQ(drawn.exit_code, 0) << drawn.describe();
  const std::string svg = read_text(dir() / "trace.svg");
  auto count = [&](const std::string& part) {
    std::size_t n = 0;
    for (auto at = svg.find(part); at != std::string::npos; at = svg.find(part, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("fill=\"#4c9f50\" stroke"), 4u) << "compiled attempts";
  EXPECT_EQ(count("fill=\"#d9534f\" stroke"), 4u) << "failed attempts";
  EXPECT_EQ(count("fill=\"#5b8def\" stroke"), 3u) << "phases";
}

// From the environment, as a script sets it; a trial that fails still
// leaves its trace, with the trial's status and no compile phase.
TEST_F(Launcher, TheTraceFromTheEnvironmentIsWrittenWhenTheTrialFails) {
  const fs::path trace_file = dir() / "env-trace.json";
  auto r = launch({}, train(10, {"--crash_at_step", "3"}), {{"NEURON_PARALLEL_COMPILE_TRACE", trace_file.string()}});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  auto trace = nlohmann::json::parse(read_text(trace_file));
  auto phases = events_where(trace, "X", "phase");
  ASSERT_EQ(phases.size(), 1u);
  EXPECT_EQ(phases[0]["name"], "trial");
  EXPECT_EQ(phases[0]["args"]["status"], "exit code 1");
  EXPECT_TRUE(events_where(trace, "X", "compile").empty());
}

// A trace that cannot be written at all (no such folder, a folder) is found
// before the trial, and said once: one fault, one line.
TEST_F(Launcher, ATraceThatCannotBeWrittenIsFoundBeforeTheTrial) {
  const fs::path missing = dir() / "no-such-dir" / "t.json";
  auto r = launch({"--trace", missing.string()}, train(10));
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  EXPECT_EQ(r.err, "neuron_parallel_compile: error: --trace: cannot write " + missing.string() +
                       ": No such file or directory (name a file in a writable directory)\n");
  EXPECT_EQ(compiles(), 0u);
  EXPECT_FALSE(fs::exists(dir() / "train"));

  fs::create_directories(dir() / "a-folder");
  auto folder = launch({}, train(10), {{"NEURON_PARALLEL_COMPILE_TRACE", (dir() / "a-folder").string()}});
  EXPECT_EQ(folder.exit_code, 3) << folder.describe();
  EXPECT_EQ(folder.err, "neuron_parallel_compile: error: --trace: cannot write " + (dir() / "a-folder").string() +
                            ": Is a directory (name a file in a writable directory)\n");
  EXPECT_EQ(compiles(), 0u);
  EXPECT_FALSE(fs::exists(dir() / "train"));
}

// A trace whose write fails at the end (a full disk; /dev/full here,
// through a link, so that nothing can ever replace the device) is exit 3
// in one line, as a --report is; the compiles were done.
TEST_F(Launcher, ATraceThatFailsToBeWrittenAtTheEndIsExitThree) {
  fs::create_symlink("/dev/full", dir() / "full");
  auto r = launch({}, train(10), {{"NEURON_PARALLEL_COMPILE_TRACE", (dir() / "full").string()}});
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  EXPECT_EQ(compiles(), 4u);
  EXPECT_EQ(done_entries(), 4u);
  const std::string error = "neuron_parallel_compile: error: --trace: cannot write " + (dir() / "full").string() +
                            ": No space left on device\n";
  ASSERT_GE(r.err.size(), error.size()) << r.err;
  EXPECT_EQ(r.err.substr(r.err.size() - error.size()), error) << "the last line";
  EXPECT_EQ(r.err.find("--trace"), r.err.rfind("--trace")) << "said once: " << r.err;
  EXPECT_EQ(r.err.find("trace written"), std::string::npos) << r.err;
}

// A maintenance mode is a phase of the trace, named after it, with what it
// found; a dry run's trace has its collect phase.
TEST_F(Launcher, TheTraceOfAScanAndOfADryRunHaveTheirPhases) {
  ASSERT_EQ(launch({"--command", "collect"}, train(10)).exit_code, 0);
  const fs::path scan_trace = dir() / "scan.json";
  auto scan = launch({"--command", "scan", "--trace", scan_trace.string()});
  ASSERT_EQ(scan.exit_code, 0) << scan.describe();
  EXPECT_EQ(scan.out, std::string("neuronxcc-") + kStandinVersion + ": 0 done, 4 pending, 0 locked\n");
  EXPECT_NE(scan.err.find("trace written to " + scan_trace.string()), std::string::npos) << scan.err;
  auto trace = nlohmann::json::parse(read_text(scan_trace));
  EXPECT_EQ(trace["otherData"]["command"], "scan");
  EXPECT_EQ(trace["otherData"]["compiler_version"], kStandinVersion);
  auto phases = events_where(trace, "X", "phase");
  ASSERT_EQ(phases.size(), 1u);
  EXPECT_EQ(phases[0]["name"], "scan");
  EXPECT_EQ(phases[0]["args"], (nlohmann::json{{"cache", cache_root().string()},
                                                {"version", kStandinVersion},
                                                {"done", 0},
                                                {"pending", 4},
                                                {"locked", 0}}));

  const fs::path dry_trace = dir() / "dry.json";
  auto dry = launch({"--command", "compile", "--dry-run", "--trace", dry_trace.string()});
  ASSERT_EQ(dry.exit_code, 0) << dry.describe();
  phases = events_where(nlohmann::json::parse(read_text(dry_trace)), "X", "phase");
  ASSERT_EQ(phases.size(), 1u);
  EXPECT_EQ(phases[0]["name"], "collect");
  EXPECT_EQ(phases[0]["args"]["to_compile"], 4);
  EXPECT_EQ(compiles(), 0u);
}

// A run that had nothing to compile says so, and nothing of an efficiency.
TEST_F(Launcher, ARunWithNothingToCompileSaysSo) {
  ASSERT_EQ(launch({}, train(10)).exit_code, 0);
  auto again = launch({}, train(10));
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(compiles(), 4u);
  EXPECT_TRUE(std::regex_search(again.err, std::regex("\nneuron_parallel_compile: wall time [0-9.hms]+; nothing to "
                                                      "compile\n")))
      << again.err;
  EXPECT_EQ(again.err.find("efficiency"), std::string::npos) << again.err;
}

// A trial that fails before extracting any graph says so, and offers to
// compile nothing.
TEST_F(Launcher, ATrialThatFailsBeforeExtractingAnyGraphSaysSo) {
  auto r = launch({}, {"/bin/false"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("neuron_parallel_compile: error: the training command failed (exit code 1) before extracting "
                       "any graph; nothing compiled\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE"), std::string::npos) << r.err;

  auto ignored = launch({}, {"/bin/false"}, {{"NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE", "1"}});
  EXPECT_EQ(ignored.exit_code, 0) << ignored.describe();
  EXPECT_NE(ignored.err.find("neuron_parallel_compile: warning: the training command failed (exit code 1) before "
                             "extracting any graph; nothing to compile\n"),
            std::string::npos)
      << ignored.err;
  EXPECT_EQ(ignored.err.find("compiling the"), std::string::npos) << ignored.err;
  EXPECT_EQ(compiles(), 0u);
}

// Two hosts' traces (two launchers' here) merge into one file, each a process.
TEST_F(Launcher, TracesOfTwoLaunchersMergeIntoOne) {
  ASSERT_EQ(launch({"--trace", (dir() / "a.json").string()}, train(10)).exit_code, 0);
  ASSERT_EQ(launch({"--trace", (dir() / "b.json").string()}, train(10)).exit_code, 0);
  auto merged = run_tool("neuron_cache", {"merge-traces", "-o", (dir() / "all.json").string(),
                                          (dir() / "a.json").string(), (dir() / "b.json").string()});
  ASSERT_EQ(merged.exit_code, 0) << merged.describe();
  EXPECT_EQ(merged.out, "merged 2 trace(s) into " + (dir() / "all.json").string() + "\n");
  auto all = nlohmann::json::parse(read_text(dir() / "all.json"));
  const auto a = nlohmann::json::parse(read_text(dir() / "a.json"));
  const auto b = nlohmann::json::parse(read_text(dir() / "b.json"));
  ASSERT_EQ(all["traceEvents"].size(), a["traceEvents"].size() + b["traceEvents"].size());
  std::set<int> pids;
  for (const auto& e : all["traceEvents"]) pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, (std::set<int>{1, 2}));
  auto bad = run_tool("neuron_cache", {"merge-traces", "-o", (dir() / "x.json").string(), (dir() / "wd").string()});
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_FALSE(fs::exists(dir() / "x.json"));
}

nlohmann::json usage_of(const RunResult& stats, const std::string& program) {
  auto doc = nlohmann::json::parse(stats.out);
  return doc["usage"]["programs"].value(program, nlohmann::json::object());
}

// The cache counts what each program got from it: the pre-compile's misses,
// the training's hits through neuron_cc_wrapper, the second pre-compile's
// hits with the compile time they saved (what the entries' records say).
TEST_F(Launcher, TheCacheCountsHitsMissesAndTheTimeSaved) {
  ASSERT_EQ(launch({}, train(10)).exit_code, 0);
  auto stats = run_tool("neuron_cache", {"--json", "stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.describe();
  auto launcher = usage_of(stats, "neuron_parallel_compile");
  EXPECT_EQ(launcher["misses"], 4);
  EXPECT_EQ(launcher["hits"], 0);
  EXPECT_GT(launcher["compile_seconds"].get<double>(), 0);

  auto training = run(train(10), options());
  ASSERT_EQ(training.exit_code, 0) << training.describe();
  const int training_hits = train_total_field(training.out, "cache_hits");
  ASSERT_GT(training_hits, 0) << training.out;
  ASSERT_EQ(launch({}, train(10)).exit_code, 0);
  double recorded = 0;
  for (const auto& e : entries()) {
    auto meta = cache::read_entry_meta(e);
    ASSERT_TRUE(meta.ok() && meta->last_success()) << e;
    recorded += meta->last_success()->wall_seconds;
  }
  stats = run_tool("neuron_cache", {"--json", "stats"});
  launcher = usage_of(stats, "neuron_parallel_compile");
  EXPECT_EQ(launcher["hits"], 4);
  EXPECT_EQ(launcher["misses"], 4);
  EXPECT_NEAR(launcher["saved_seconds"].get<double>(), recorded, 1e-6);
  auto wrapper = usage_of(stats, "neuron_cc_wrapper");
  EXPECT_EQ(wrapper["hits"], training_hits);
  EXPECT_EQ(wrapper["misses"], 0);
  EXPECT_EQ(wrapper["hits_without_time"], 0);
  auto doc = nlohmann::json::parse(stats.out);
  EXPECT_EQ(doc["usage"]["total"]["hits"], 4 + training_hits);

  auto text = run_tool("neuron_cache", {"stats"});
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_NE(text.out.find("PROGRAM                  HITS"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("neuron_parallel_compile  4     4       0       50%"), std::string::npos) << text.out;

  auto zero = run_tool("neuron_cache", {"stats", "--zero"});
  ASSERT_EQ(zero.exit_code, 0) << zero.describe();
  EXPECT_EQ(zero.out, "usage counters of " + (cache_root() / ".npc").string() + " zeroed\n");
  stats = run_tool("neuron_cache", {"--json", "stats"});
  doc = nlohmann::json::parse(stats.out);
  EXPECT_EQ(doc["usage"]["total"]["hits"], 0);
  EXPECT_EQ(doc["usage"]["total"]["misses"], 0);
  EXPECT_TRUE(doc["usage"]["zeroed_at"].is_string());
  EXPECT_EQ(doc["entries"], 4) << "the entries are the cache's, not the counters'";
}

} // namespace
} // namespace npc::test
