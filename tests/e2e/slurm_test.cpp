// neuron_parallel_compile as the tasks of a real Slurm job step: slurmctld,
// slurmd and munged from Debian on loopback (tests/support/slurm.sh, ctest's
// fixture "slurm"), `srun -O` for more tasks than cores, one cache.

#include <atomic>
#include <csignal>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include <npc/cache/entry_meta.hpp>

#include "test_support.hpp"

namespace npc::test {
namespace {

class SlurmJobStep : public CacheTest {
protected:
  void SetUp() override {
    CacheTest::SetUp();
    if (HasFatalFailure()) return;
    const char* from_env = std::getenv("NPC_TEST_SLURM_DIR");
    fs::path slurm_dir = from_env && *from_env ? fs::path(from_env) : fs::path(NPC_TEST_SLURM_DIR);
    conf_ = slurm_dir / "slurm.conf";
    ASSERT_TRUE(fs::exists(conf_)) << "the test run's Slurm is not running (no " << conf_
                                   << "): run the tests through ctest, whose fixture \"slurm\" starts it, or "
                                   << "start it with 'tests/support/slurm.sh start " << slurm_dir.string() << "'";
  }
  // 8 pending graphs in the cache, as a trial leaves them.
  void collect() {
    std::vector<std::string> trial = {(standin_dir() / "standin_train").string(), "--nproc_per_node", "2",
                                      "--steps_this_run", "10", "--graphs_per_step", "6", "--eval_every", "5",
                                      "--late_graph_step", "20", "--layers", "2", "--hidden", "64", "--workdir",
                                      (dir() / "train").string()};
    std::vector<std::string> args = {"--command", "collect", "--parallel_compile_workdir", (dir() / "wd").string()};
    args.insert(args.end(), trial.begin(), trial.end());
    auto r = run_tool("neuron_parallel_compile", args);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    ASSERT_EQ(entries().size(), 8u);
  }
  // A Slurm client command (srun, sbatch) with the test's environment.
  RunResult slurm(std::vector<std::string> argv, std::map<std::string, std::string> env = {}) {
    env["SLURM_CONF"] = conf_.string();
    RunOptions o = options(env);
    o.cwd = dir();
    o.timeout = std::chrono::milliseconds(120000);
    return run(argv, o);
  }
  std::vector<std::string> compile_command() const {
    return {tool_path("neuron_parallel_compile").string(), "--command", "compile", "--num_parallel", "2",
            "--parallel_compile_workdir", (dir() / "wd").string()};
  }
  std::size_t done_entries() const {
    std::size_t n = 0;
    for (const auto& e : entries()) n += fs::exists(e / "model.done");
    return n;
  }
  std::vector<std::string> results_files() const {
    std::vector<std::string> names;
    for (const auto& f : fs::directory_iterator(dir()))
      if (f.path().filename().string().starts_with("neuron_parallel_compile_results_"))
        names.push_back(f.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path conf_;
};

TEST_F(SlurmJobStep, FourTasksCompileEachGraphOnceAndEachLineNamesItsTask) {
  ASSERT_NO_FATAL_FAILURE(collect());
  std::vector<std::string> argv = {"srun", "-O", "-n", "4", "--"};
  auto command = compile_command();
  argv.insert(argv.end(), command.begin(), command.end());
  auto r = slurm(argv, {{"STANDIN_CC_BASE_MS", "300"},
                        {"NEURON_PARALLEL_COMPILE_DUMP_RESULTS", "1"},
                        {"NEURON_PARALLEL_COMPILE_TRACE", (dir() / "trace.json").string()}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(distinct_graphs_compiled(), 8u);
  EXPECT_EQ(compiles(), 8u) << "a graph was compiled twice";
  EXPECT_EQ(done_entries(), 8u);

  // srun merges the tasks' output: each of our lines says whose it is.
  static const std::regex ours(R"(^neuron_parallel_compile: task ([0-3])/4 ([^ :]+): (.*)$)");
  std::set<std::string> tasks, steps;
  std::vector<std::string> step_totals;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("neuron_parallel_compile")) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, ours)) << line;
    tasks.insert(m[1]);
    static const std::regex step(R"(a task of Slurm step ([0-9]+\.[0-9]+) \(4 tasks\); on the cache's roll as )"
                                 R"(slurm-[0-9]+\.[0-9]+\.task-([0-3]), its share of the graphs comes first)");
    std::smatch s;
    std::string said = m[3];
    if (said.starts_with("Slurm step ")) step_totals.push_back(line);
    if (std::regex_match(said, s, step)) {
      steps.insert(s[1]);
      EXPECT_EQ(s[2], m[1]) << line;
    }
  }
  EXPECT_EQ(tasks, (std::set<std::string>{"0", "1", "2", "3"})) << r.describe();
  EXPECT_EQ(steps.size(), 1u) << "every task names one step\n" << r.describe();
  // Task 0 waits for the others and says what the step did, once.
  ASSERT_EQ(step_totals.size(), 1u) << r.describe();
  static const std::regex totals(R"(neuron_parallel_compile: task 0/4 [^ ]+: Slurm step [0-9]+\.[0-9]+: 8 graphs: )"
                                 R"(8 compiled by [1-4] tasks?, 0 already done, 0 failed, 0 left )"
                                 R"(\(4 of 4 tasks reported\))");
  EXPECT_TRUE(std::regex_match(step_totals.front(), totals)) << step_totals.front();

  // One results file per task, named by node and task; each task saw every
  // graph end well (compiled by it or by another task).
  auto results = results_files();
  ASSERT_EQ(results.size(), 4u) << r.describe();
  for (int task = 0; task < 4; ++task) {
    std::regex named("neuron_parallel_compile_results_[^ ]+\\.task" + std::to_string(task) + "_[0-9.]+\\.json");
    EXPECT_TRUE(std::regex_match(results[static_cast<std::size_t>(task)], named)) << results[task];
    auto j = nlohmann::json::parse(read_text(dir() / results[static_cast<std::size_t>(task)]));
    EXPECT_EQ(j["compilation_summary"], nlohmann::json({{"true", 8}})) << results[task];
  }

  // One trace per task, named by node and task as the results are; merged,
  // they hold each of the 8 compiles once, each task a process of its own.
  std::vector<std::string> traces;
  for (const auto& f : fs::directory_iterator(dir()))
    if (std::regex_match(f.path().filename().string(), std::regex(R"(trace\.[^ ]+\.task[0-3]\.json)")))
      traces.push_back(f.path().string());
  std::sort(traces.begin(), traces.end());
  ASSERT_EQ(traces.size(), 4u) << r.describe();
  EXPECT_FALSE(fs::exists(dir() / "trace.json"));
  std::vector<std::string> merge = {"merge-traces", "-o", (dir() / "step.json").string()};
  merge.insert(merge.end(), traces.begin(), traces.end());
  auto merged = run_tool("neuron_cache", merge);
  ASSERT_EQ(merged.exit_code, 0) << merged.describe();
  auto step = nlohmann::json::parse(read_text(dir() / "step.json"));
  std::set<std::string> compiled;
  std::set<int> processes;
  std::size_t compiled_spans = 0;
  for (const auto& e : step["traceEvents"]) {
    processes.insert(e["pid"].get<int>());
    if (e["ph"] == "X" && e.value("cat", "") == "compile" && e["args"]["outcome"] == "compiled") {
      compiled.insert(e["name"].get<std::string>());
      ++compiled_spans;
    }
  }
  EXPECT_EQ(processes, (std::set<int>{1, 2, 3, 4}));
  EXPECT_EQ(compiled.size(), 8u);
  EXPECT_EQ(compiled_spans, 8u) << "a graph compiled twice in the step's trace";
}

// The start of the graph of `entry` up to its module's name: bytes only that
// graph holds.
std::string module_line(const fs::path& entry) {
  return graph_module_marker(read_text(entry / "model.hlo_module.pb"));
}

// A graph whose compile hangs is timed out by one task and failed for the
// whole step: the others do not compile it again one after another as its
// lock comes free (each after the holder's timeout: hours on a real step).
// A compile error likewise, though the tasks retry cached failures.
TEST_F(SlurmJobStep, AGraphThatFailsOrTimesOutIsFailedForTheWholeStepAndCompiledOnce) {
  ASSERT_NO_FATAL_FAILURE(collect());
  // A graph the fault strikes alone.
  std::vector<std::string> graphs;
  for (const auto& e : entries()) graphs.push_back(read_text(e / "model.hlo_module.pb"));
  const std::size_t index = first_uniquely_marked(graphs);
  ASSERT_LT(index, graphs.size()) << "no graph with a module marker of its own";
  const fs::path faulty = entries()[index];
  for (const char* fault : {"hang", "fail"}) {
    SCOPED_TRACE(fault);
    std::error_code ec;
    fs::remove(invocation_log(), ec);
    std::vector<std::string> argv = {"srun", "-O", "-n", "4", "--"};
    auto command = compile_command();
    command.insert(command.end(), {"--compile-timeout", "2"});
    argv.insert(argv.end(), command.begin(), command.end());
    auto r = slurm(argv, {{"STANDIN_CC_BASE_MS", "300"},
                          {"NEURON_CC_FLAGS", "--cache_dir=" + cache_root().string() + " --retry_failed_compilation"},
                          {"STANDIN_CC_FAULT", fault},
                          {"STANDIN_CC_FAULT_MATCH", module_line(faulty)}});
    // Each task exits with the graphs it counts failed: the one.
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    // The first round compiles the 7 others; each round, the faulty one once.
    EXPECT_EQ(compiles(), std::string(fault) == "hang" ? 8u : 1u) << "the failed graph compiled again in the step\n"
                                                                   << r.describe();
    EXPECT_EQ(done_entries(), 7u);
    auto meta = cache::read_entry_meta(faulty);
    ASSERT_TRUE(meta.ok()) << meta.error();
    ASSERT_FALSE(meta->attempts.empty());
    const cache::AttemptRecord& last = meta->attempts.back();
    EXPECT_EQ(last.outcome, std::string(fault) == "hang" ? "timeout" : "failed");
    EXPECT_TRUE(last.run.starts_with("slurm step ")) << last.run;
    EXPECT_TRUE(last.last);
    // Every task counts it failed; the others say who failed it and how.
    std::size_t failed_lines = 0, told_by_another = 0;
    std::istringstream lines(r.err);
    for (std::string line; std::getline(lines, line);) {
      if (line.find(": Total failed compilations: 1") != std::string::npos) ++failed_lines;
      if (line.find("FAILED " + faulty.filename().string().substr(0, 20)) != std::string::npos &&
          line.find(" in " + last.by + " (" + last.run + ")") != std::string::npos)
        ++told_by_another;
    }
    EXPECT_EQ(failed_lines, 4u) << r.describe();
    EXPECT_EQ(told_by_another, 3u) << r.describe();
    // The first round finds the 8 pending graphs, the second the one left.
    const std::string graphs = std::string(fault) == "hang" ? "8 graphs: 7" : "1 graphs: 0";
    const std::regex totals("Slurm step [0-9]+\\.[0-9]+: " + graphs +
                            R"( compiled by [0-4] tasks?, 0 already done, 1 failed, 0 left \(4 of 4 tasks reported\))");
    EXPECT_TRUE(std::regex_search(r.err, totals)) << r.describe();
  }
}

// One task of the step dies with everything it started (SIGKILL of its
// launcher and its workers, as when its node is lost) while it compiles: the
// other tasks take over the graphs it held (its locks' owner is gone, which
// this host sees at once) and its share, every graph ends compiled, each
// survivor exits 0, and task 0 counts the step without waiting for the dead.
TEST_F(SlurmJobStep, ATaskKilledMidStepLeavesNoGraphUncompiled) {
  ASSERT_NO_FATAL_FAILURE(collect());
  // Each task says its launcher's pid, which exec keeps.
  std::vector<std::string> argv = {"srun", "-O", "-n", "4", "--", "/bin/sh", "-c",
                                   "echo $$ > \"$0/task-$SLURM_PROCID.pid\" && exec \"$@\"", dir().string()};
  auto command = compile_command();
  argv.insert(argv.end(), command.begin(), command.end());
  std::atomic<std::size_t> killed{0};
  std::thread killer([&] {
    const fs::path pid_file = dir() / "task-1.pid";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    pid_t launcher = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      if (launcher == 0 && fs::exists(pid_file)) {
        std::string text = read_text(pid_file);
        if (!text.empty() && text.back() == '\n') launcher = static_cast<pid_t>(std::stol(text));
      }
      // Once a worker of it compiles (holding its graph's lock).
      if (launcher > 0 && !descendants_of(launcher).empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (launcher == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int round = 0; round < 3; ++round) {
      std::vector<pid_t> all = descendants_of(launcher);
      all.push_back(launcher);
      for (pid_t pid : all)
        if (::kill(pid, SIGKILL) == 0) ++killed;
    }
  });
  auto r = slurm(argv, {{"STANDIN_CC_BASE_MS", "1500"}});
  killer.join();
  ASSERT_GE(killed.load(), 2u) << "task 1 and a worker of it were killed\n" << r.describe();
  EXPECT_NE(r.exit_code, 0) << "srun says a task was killed\n" << r.describe();
  EXPECT_EQ(distinct_graphs_compiled(), 8u) << r.describe();
  EXPECT_EQ(done_entries(), 8u) << r.describe();
  for (const std::string task : {"0", "2", "3"}) {
    EXPECT_NE(r.err.find("task " + task + "/4 vm: Total failed compilations: 0\n"), std::string::npos)
        << task << "\n" << r.describe();
  }
  EXPECT_EQ(r.err.find("task 1/4 vm: Total graphs"), std::string::npos) << r.describe();
  EXPECT_EQ(r.err.find("LEFT "), std::string::npos) << r.describe();
  const std::regex totals(R"(task 0/4 [^ ]+: Slurm step [0-9]+\.[0-9]+: 8 graphs: 8 compiled by [1-3] tasks?, )"
                          R"(0 already done, 0 failed, 0 left \(3 of 4 tasks reported\))");
  EXPECT_TRUE(std::regex_search(r.err, totals)) << r.describe();
}

// sbatch's batch script is one process, not a task: a launcher there
// compiles everything and names no task, though SLURM_PROCID and
// SLURM_NTASKS are set.
TEST_F(SlurmJobStep, ALauncherInABatchScriptIsNoTask) {
  ASSERT_NO_FATAL_FAILURE(collect());
  std::string command;
  for (const auto& word : compile_command()) command += "'" + word + "' ";
  auto r = slurm({"sbatch", "--wait", "-O", "-n", "4", "-o", (dir() / "batch.out").string(), "--wrap",
                  "echo \"procid=$SLURM_PROCID ntasks=$SLURM_NTASKS\"; " + command});
  ASSERT_EQ(r.exit_code, 0) << r.describe() << read_text(dir() / "batch.out");
  std::string out = read_text(dir() / "batch.out");
  EXPECT_NE(out.find("procid=0 ntasks=4\n"), std::string::npos) << out;
  EXPECT_EQ(out.find(" task "), std::string::npos) << out;
  EXPECT_NE(out.find("neuron_parallel_compile: Total graphs: 8\n"), std::string::npos) << out;
  EXPECT_EQ(compiles(), 8u);
  EXPECT_EQ(done_entries(), 8u);
}

} // namespace
} // namespace npc::test
