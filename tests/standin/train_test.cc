// The stand-in training script, driven with small fake compile entries
// (shell scripts) in place of the project's neuron_cc_wrapper.
#include <signal.h>

#include <gtest/gtest.h>

#include <regex>
#include <thread>

#include "standin_fixture.h"

namespace standin::test {
namespace {

constexpr char kCacheHitLine[] =
    "INFO ||NEURON_CC_WRAPPER||: Using a cached neff at /cache/MODULE_x/model.neff";

class StandinTrain : public StandinFixture {
 protected:
  void SetUp() override {
    StandinFixture::SetUp();
    const std::string cc = kCompilerBinary;
    // The wrapper is called as: <wrapper> compile --graph G --output N.
    compile_wrapper_ = write_script(
        "compile_wrapper.sh", "#!/bin/sh\nexec '" + cc + "' compile --framework=XLA \"$3\" --output \"$5\"\n");
    hit_wrapper_ = write_script("hit_wrapper.sh",
                                "#!/bin/sh\n'" + cc + "' compile \"$3\" --output \"$5\" >/dev/null || exit $?\n" +
                                    "echo '" + kCacheHitLine + "'\n");
    placeholder_wrapper_ = write_script("placeholder_wrapper.sh", "#!/bin/sh\n: > \"$5\"\n");
    failing_wrapper_ = write_script("failing_wrapper.sh", "#!/bin/sh\necho 'wrapper says no' >&2\nexit 3\n");
    wrong_wrapper_ = write_script(
        "wrong_wrapper.sh",
        "#!/bin/sh\necho 'HloModule other' > \"$5.other\"\nexec '" + cc + "' compile \"$5.other\" --output \"$5\"\n");
  }

  RunResult train(const std::vector<std::string>& args, const std::string& wrapper, Env env = {}) {
    std::vector<std::string> argv{kTrainBinary};
    argv.insert(argv.end(), args.begin(), args.end());
    env["NEURON_CC_WRAPPER"] = wrapper;
    for (const auto& [name, value] : fast_compiler_env()) env[name] = value;
    return run(argv, env);
  }

  std::string workdir() const { return path("work"); }

  std::string compile_wrapper_;
  std::string hit_wrapper_;
  std::string placeholder_wrapper_;
  std::string failing_wrapper_;
  std::string wrong_wrapper_;
};

// By default the graphs are binary HloModuleProtos, as torch-neuronx writes
// them, byte-identical on every rank and compiled alike.
TEST_F(StandinTrain, RanksEmitByteIdenticalGraphs) {
  const RunResult result =
      train({"--nproc_per_node", "2", "--steps_this_run=6", "--workdir", workdir()}, compile_wrapper_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(lines_with(result.out, "total: ranks=2 graphs=3 jit_compiles=6 ").size(), 1u) << result.out;
  const std::string rank0 = workdir() + "/rank-0";
  const std::string rank1 = workdir() + "/rank-1";
  const std::vector<std::string> names = list_dir(rank0);
  ASSERT_EQ(names, list_dir(rank1));
  int graphs = 0;
  for (const std::string& name : names) {
    if (name.size() < 4 || name.substr(name.size() - 4) != ".hlo") continue;
    ++graphs;
    const std::string bytes = read_file(rank0 + "/" + name);
    EXPECT_EQ(bytes, read_file(rank1 + "/" + name)) << name;
    ASSERT_FALSE(bytes.empty());
    EXPECT_EQ(bytes[0], '\x0a') << name << ": field 1 (the module's name) first";
    EXPECT_NE(bytes.find("SyncTensorsGraph."), std::string::npos) << name;
    EXPECT_EQ(bytes.find("HloModule "), std::string::npos) << name;
    if (name.rfind("MODULE_train", 0) == 0) {
      EXPECT_NE(bytes.find("all-reduce"), std::string::npos) << name << " should be tensor-parallel";
    }
  }
  EXPECT_EQ(graphs, 3);  // init, train, eval
}

// --graph_format text: HLO text, byte-identical on every rank.
TEST_F(StandinTrain, TextGraphsAreWrittenAlikeOnEveryRank) {
  const RunResult result = train(
      {"--nproc_per_node", "2", "--steps_this_run=6", "--graph_format", "text", "--workdir", workdir()},
      compile_wrapper_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  int graphs = 0;
  for (const std::string& name : list_dir(workdir() + "/rank-0")) {
    if (name.size() < 4 || name.substr(name.size() - 4) != ".hlo") continue;
    ++graphs;
    const std::string text = read_file(workdir() + "/rank-0/" + name);
    EXPECT_EQ(text, read_file(workdir() + "/rank-1/" + name)) << name;
    EXPECT_EQ(text.rfind("HloModule ", 0), 0u) << name;
    EXPECT_NE(text.find("ENTRY "), std::string::npos) << name;
    if (name.rfind("MODULE_train", 0) == 0) {
      EXPECT_NE(text.find("replica_groups={{0,1}}"), std::string::npos) << name << " should be tensor-parallel";
    }
  }
  EXPECT_EQ(graphs, 3);  // init, train, eval

  const RunResult bad = train({"--graph_format", "json", "--workdir", workdir()}, compile_wrapper_);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("argument --graph_format: invalid choice: 'json'"), std::string::npos) << bad.err;
}

TEST_F(StandinTrain, CountsDistinctGraphsAndPrintsSummaries) {
  const std::string log = path("invocations.log");
  const std::vector<std::string> common{"--nproc_per_node=2", "--eval_every", "5", "--graphs_per_step", "2",
                                        "--late_graph_step", "20", "--workdir", workdir()};
  std::vector<std::string> short_run = common;
  short_run.insert(short_run.end(), {"--steps_this_run", "10"});
  const RunResult first = train(short_run, compile_wrapper_, {{"STANDIN_CC_INVOCATION_LOG", log}});
  ASSERT_EQ(first.exit_code, 0) << first.err;

  const std::regex rank_line(
      R"(^standin_train: rank [01]/2: steps=10 graphs=4 jit_compiles=4 cache_hits=0 compile_wait_s=\d+\.\d{3}$)");
  const std::vector<std::string> ranks = lines_with(first.out, "standin_train: rank ");
  ASSERT_EQ(ranks.size(), 2u) << first.out;
  for (const std::string& line : ranks) EXPECT_TRUE(std::regex_match(line, rank_line)) << line;
  const std::vector<std::string> totals = lines_with(first.out, "standin_train: total:");
  ASSERT_EQ(totals.size(), 1u) << first.out;
  EXPECT_TRUE(std::regex_match(
      totals[0], std::regex(R"(^standin_train: total: ranks=2 graphs=4 jit_compiles=8 cache_hits=0 compile_wait_s=\d+\.\d{3}$)")))
      << totals[0];
  // Each process compiles each distinct graph once, then reuses it.
  EXPECT_EQ(split_lines(read_file(log)).size(), 8u);

  // A longer run reaches the late graph.
  std::vector<std::string> long_run = common;
  long_run.insert(long_run.end(), {"--steps_this_run", "25"});
  const RunResult second = train(long_run, compile_wrapper_);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(lines_with(second.out, "total: ranks=2 graphs=5 jit_compiles=10 ").size(), 1u) << second.out;
}

// --last_batch: the last step trains on fewer rows, a graph of its own; the
// steps before it are the full-batch run's.
TEST_F(StandinTrain, ALastPartialBatchIsAGraphOfItsOwnOnTheLastStep) {
  // HLO text, to read the parameter's shape.
  const RunResult result = train({"--steps_this_run", "3", "--eval_every", "0", "--hidden", "64", "--last_batch",
                                  "3", "--graph_format", "text", "--workdir", workdir()},
                                 compile_wrapper_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(lines_with(result.out, "rank 0/1: steps=3 graphs=3 jit_compiles=3 ").size(), 1u) << result.out;
  std::vector<std::string> partial;
  for (const std::string& name : list_dir(workdir() + "/rank-0"))
    if (name.rfind("MODULE_partial3_", 0) == 0 && name.size() > 4 && name.substr(name.size() - 4) == ".hlo")
      partial.push_back(name);
  ASSERT_EQ(partial.size(), 1u);
  EXPECT_NE(read_file(workdir() + "/rank-0/" + partial[0]).find("entry_computation_layout={(f32[3,64]{1,0}"),
            std::string::npos);

  const RunResult bad = train({"--last_batch", "-1", "--workdir", workdir()}, compile_wrapper_);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

TEST_F(StandinTrain, CacheHitsAreRecognisedFromWrapperOutput) {
  const RunResult result = train({"--steps_this_run", "3", "--workdir", workdir()}, hit_wrapper_);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(lines_with(result.out, "rank 0/1: steps=3 graphs=2 jit_compiles=0 cache_hits=2 ").size(), 1u)
      << result.out;
  EXPECT_EQ(lines_with(result.out, "Using a cached neff at ").size(), 2u) << "wrapper output is echoed";
}

TEST_F(StandinTrain, CrashAtStepExitsWithTraceback) {
  const RunResult result = train({"--steps_this_run", "10", "--crash_at_step", "3"}, compile_wrapper_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("Traceback (most recent call last):"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("step 3"), std::string::npos) << result.err;
  EXPECT_TRUE(lines_with(result.out, "standin_train: rank").empty()) << result.out;
}

TEST_F(StandinTrain, ExtractionModeDoesNotCheckOutputs) {
  const RunResult result =
      train({"--steps_this_run", "6"}, placeholder_wrapper_, {{"NEURON_EXTRACT_GRAPHS_ONLY", "True"}});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(lines_with(result.out, "rank 0/1: steps=6 graphs=3 jit_compiles=0 cache_hits=0 ").size(), 1u)
      << result.out;
}

TEST_F(StandinTrain, PlaceholderOutputFailsOutsideExtractionMode) {
  const RunResult result = train({"--steps_this_run", "2"}, placeholder_wrapper_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("no graph-sha256 header"), std::string::npos) << result.err;
}

TEST_F(StandinTrain, NeffOfAnotherGraphIsAnError) {
  const RunResult result = train({"--steps_this_run", "2"}, wrong_wrapper_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("was compiled from graph sha256"), std::string::npos) << result.err;
}

TEST_F(StandinTrain, WrapperFailureIsReportedWithItsOutput) {
  const RunResult result = train({"--steps_this_run", "2"}, failing_wrapper_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.out.find("wrapper says no"), std::string::npos) << result.out;
  EXPECT_TRUE(std::regex_search(result.err, std::regex(R"(standin_train: compile failed for \S+MODULE_init_\w+\.hlo \(exit 3\))")))
      << result.err;
}

TEST_F(StandinTrain, MissingWrapperIsAUsageError) {
  std::vector<std::string> argv{kTrainBinary, "--steps_this_run", "1"};
  const RunResult result = run(argv, {{"PATH", path("no-such-dir")}});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("neuron_cc_wrapper"), std::string::npos) << result.err;
}

TEST_F(StandinTrain, WrapperIsFoundOnPath) {
  const std::string bin = path("bin");
  ASSERT_EQ(run({"/bin/mkdir", bin}).exit_code, 0);
  ASSERT_EQ(run({"/bin/cp", compile_wrapper_, bin + "/neuron_cc_wrapper"}).exit_code, 0);
  std::vector<std::string> argv{kTrainBinary, "--steps_this_run", "1"};
  const RunResult result = run(argv, {{"PATH", bin + ":/usr/bin:/bin"}});
  EXPECT_EQ(result.exit_code, 0) << result.err;
}

TEST_F(StandinTrain, UnderTorchrunItIsOneRankAndDoesNotSpawn) {
  const RunResult result = train({"--nproc_per_node", "4", "--steps_this_run", "2", "--workdir", workdir()},
                                     compile_wrapper_, {{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(lines_with(result.out, "standin_train: rank 1/2: steps=2 graphs=2 ").size(), 1u) << result.out;
  EXPECT_TRUE(lines_with(result.out, "standin_train: total:").empty()) << result.out;
  EXPECT_EQ(list_dir(workdir()), std::vector<std::string>{"rank-1"});
}

// Two nodes' trials on one machine may be given one --workdir: a run's rank
// replaces its summary by renaming a whole new file into place, so another
// run reading the old one (here: a hard link held to it) never sees it
// truncated or half rewritten.
TEST_F(StandinTrain, ASummaryIsReplacedWholeNeverRewrittenInPlace) {
  const std::vector<std::string> two_ranks{"--nproc_per_node", "2", "--workdir", workdir()};
  std::vector<std::string> first = two_ranks;
  first.insert(first.end(), {"--steps_this_run", "2"});
  ASSERT_EQ(train(first, compile_wrapper_).exit_code, 0);
  const std::string summary = workdir() + "/rank-0/summary.txt";
  const std::string held = path("held-summary.txt");
  ASSERT_EQ(run({"/bin/ln", summary, held}).exit_code, 0);
  const std::string before = read_file(held);
  ASSERT_EQ(before.rfind("steps 2\n", 0), 0u) << before;

  std::vector<std::string> second = two_ranks;
  second.insert(second.end(), {"--steps_this_run", "3"});
  ASSERT_EQ(train(second, compile_wrapper_).exit_code, 0);
  EXPECT_EQ(read_file(held), before);
  EXPECT_EQ(read_file(summary).rfind("steps 3\n", 0), 0u) << read_file(summary);
  for (const std::string rank : {"rank-0", "rank-1"})
    for (const std::string& name : list_dir(workdir() + "/" + rank))
      EXPECT_EQ(name.find(".tmp"), std::string::npos) << rank << "/" << name;
}

TEST_F(StandinTrain, FailingRankStatusIsPropagated) {
  const RunResult result =
      train({"--nproc_per_node", "2", "--steps_this_run", "4", "--crash_at_step", "1"}, compile_wrapper_);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(lines_with(result.out, "standin_train: total:").empty()) << result.out;
}

TEST_F(StandinTrain, TemporaryWorkdirIsRemoved) {
  const std::string tmp = path("tmp");
  ASSERT_EQ(run({"/bin/mkdir", tmp}).exit_code, 0);
  const RunResult result =
      train({"--nproc_per_node", "2", "--steps_this_run", "2"}, compile_wrapper_, {{"TMPDIR", tmp}});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(list_dir(tmp).empty());
}

TEST_F(StandinTrain, TerminatingTheLauncherStopsItsRanks) {
  const std::string tmp = path("tmp");
  ASSERT_EQ(run({"/bin/mkdir", tmp}).exit_code, 0);
  Env env = fast_compiler_env();
  env["NEURON_CC_WRAPPER"] = compile_wrapper_;
  env["TMPDIR"] = tmp;
  Child launcher = start({kTrainBinary, "--nproc_per_node", "2", "--steps_this_run", "1000", "--step_ms", "10"}, env);
  // The ranks carry the launcher's temporary work directory (under tmp) in
  // their command lines: both must be seen running, or there is nothing here
  // for SIGTERM to stop.
  const auto ranks = [&] { return npc::test::processes_with_cmdline(tmp + "/standin_train."); };
  ASSERT_TRUE(npc::test::wait_until([&] { return ranks().size() == 2; }, kStandinTimeout))
      << "the two ranks were never seen running:\n" << npc::test::describe(ranks());
  ASSERT_EQ(list_dir(tmp).size(), 1u) << "the launcher's temporary work directory";
  ASSERT_TRUE(launcher.running());
  const auto signalled = std::chrono::steady_clock::now();
  launcher.kill(SIGTERM);
  const RunResult result = launcher.wait(kStandinTimeout);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM) << result.err;
  // The ranks were stopped, not left to finish their 1000 steps of 10 ms.
  EXPECT_LT(std::chrono::steady_clock::now() - signalled, std::chrono::seconds(5));
  // The launcher reaps its ranks before it exits; a compile a rank had
  // started may take a moment more to end (a rank killed by SIGTERM does not
  // wait for its child, as a Python process would not).
  EXPECT_TRUE(npc::test::wait_until([&] { return ranks().empty(); }, std::chrono::seconds(5)))
      << "ranks still running 5 s after their launcher ended:\n" << npc::test::describe(ranks());
  EXPECT_TRUE(list_dir(tmp).empty());
}

TEST_F(StandinTrain, GraphSizeGrowsWithLayersAndHidden) {
  ASSERT_EQ(train({"--steps_this_run", "1", "--layers", "2", "--hidden", "64", "--workdir", path("small")},
                  compile_wrapper_).exit_code, 0);
  ASSERT_EQ(train({"--steps_this_run", "1", "--layers", "8", "--hidden", "512", "--workdir", path("large")},
                  compile_wrapper_).exit_code, 0);
  const auto train_graph_size = [&](const std::string& root) {
    for (const std::string& name : list_dir(root + "/rank-0")) {
      if (name.rfind("MODULE_train0_", 0) == 0 && name.find(".hlo") != std::string::npos) {
        return read_file(root + "/rank-0/" + name).size();
      }
    }
    return std::size_t{0};
  };
  const std::size_t small = train_graph_size(path("small"));
  const std::size_t large = train_graph_size(path("large"));
  EXPECT_GT(small, 0u);
  EXPECT_GT(large, 8 * small);
}

TEST_F(StandinTrain, UnknownOptionIsAUsageError) {
  const RunResult result = train({"--bogus", "1"}, compile_wrapper_);
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("unrecognized arguments: --bogus"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace standin::test
