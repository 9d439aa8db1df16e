// neuron_parallel_compile on an S3 cache (a real s3rver on loopback): the
// trial extracts its graphs into S3, the launcher brings them into this
// node's mirror, compiles there and uploads each entry, model.done last;
// another node's launcher downloads instead of compiling; --command compile
// takes the pending graphs of S3; two launchers at once compile each graph
// once.

#include <regex>

#include <npc/util/process.hpp>

#include "s3_fixture.hpp"

namespace npc::test {
namespace {

class S3Launcher : public S3CacheTest {
protected:
  // init + 2 train + eval = 4 graphs in a 10-step trial.
  std::vector<std::string> train(int steps = 10) {
    return {(standin_dir() / "standin_train").string(), "--nproc_per_node", "2", "--steps_this_run",
            std::to_string(steps), "--graphs_per_step", "2", "--eval_every", "5", "--layers", "2", "--hidden", "64",
            "--workdir", (dir() / "train").string()};
  }
  std::vector<std::string> launcher_args(const std::string& node, std::vector<std::string> ours,
                                         const std::vector<std::string>& command) {
    ours.insert(ours.begin(), "--parallel_compile_workdir=" + (dir() / ("wd-" + node)).string());
    ours.insert(ours.end(), command.begin(), command.end());
    return ours;
  }
  RunResult launch(const std::string& node, std::vector<std::string> ours, const std::vector<std::string>& command = {},
                   std::map<std::string, std::string> env = {}) {
    env["NEURON_COMPILE_CACHE_MIRROR"] = (dir() / node).string();
    return run_tool("neuron_parallel_compile", launcher_args(node, std::move(ours), command), std::move(env));
  }
  std::size_t done_in_mirror(const std::string& node) {
    std::size_t n = 0;
    for (const auto& e : names_in(mirror_version_dir(node))) n += fs::exists(mirror_version_dir(node) / e / "model.done");
    return n;
  }
};

TEST_F(S3Launcher, ATrialOnS3IsCompiledInTheMirrorAndUploadedThenAnotherNodeDownloadsIt) {
  auto run = launch("node-a", {}, train());
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(compiles(), 4u);
  EXPECT_NE(run.out.find("Extracting graphs (s3://test-bucket/team/neuronxcc-"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("4 graphs found, 0 already cached, 4 compiled, 0 failed, 0 retried"), std::string::npos)
      << run.err;
  EXPECT_EQ(objects(), done_entries(4)); // no lock left, every entry whole
  EXPECT_EQ(done_in_mirror("node-a"), 4u);

  // Node B: every result is in S3 already.
  auto other = launch("node-b", {}, train());
  ASSERT_EQ(other.exit_code, 0) << other.describe();
  EXPECT_EQ(compiles(), 4u);
  EXPECT_NE(other.err.find("4 result(s) already in s3://test-bucket/team downloaded into " +
                           (dir() / "node-b" / "s3" / "test-bucket" / "team").string()),
            std::string::npos)
      << other.err;
  EXPECT_NE(other.err.find("4 graphs found, 4 already cached, 0 compiled"), std::string::npos) << other.err;
  EXPECT_EQ(done_in_mirror("node-b"), 4u);
  for (const auto& e : names_in(mirror_version_dir("node-a")))
    EXPECT_EQ(read_text(mirror_version_dir("node-b") / e / "model.neff"),
              read_text(mirror_version_dir("node-a") / e / "model.neff"))
        << e;

  // Node B's training run then compiles nothing, with S3 gone: its mirror serves.
  server_.stop();
  std::vector<std::string> command = train();
  command.erase(command.begin());
  auto training = run_tool("standin_train", command, {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / "node-b").string()}});
  ASSERT_EQ(training.exit_code, 0) << training.describe();
  EXPECT_EQ(train_total_field(training.out, "jit_compiles"), 0) << training.out;
  EXPECT_EQ(compiles(), 4u);
}

TEST_F(S3Launcher, CommandCompileTakesThePendingGraphsOfS3) {
  // Node A only extracts: S3 then holds 4 pending graphs.
  auto collected = launch("node-a", {"--command", "collect"}, train());
  ASSERT_EQ(collected.exit_code, 0) << collected.describe();
  EXPECT_EQ(compiles(), 0u);
  EXPECT_NE(collected.out.find("collected 4 graph(s) into " + (dir() / "node-a" / "s3" / "test-bucket" / "team").string()),
            std::string::npos)
      << collected.out;
  auto pending = objects();
  EXPECT_EQ(pending.size(), 8u); // graph and flags of each
  // The scan counts S3's entries, not a mirror's: node C has none.
  EXPECT_EQ(launch("node-c", {"--command", "scan"}).out,
            std::string("neuronxcc-") + kStandinVersion + ": 0 done, 4 pending, 0 locked (s3://test-bucket/team)\n");

  // Node B compiles them from S3 without a trial.
  auto run = launch("node-b", {"--command", "compile"});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(compiles(), 4u);
  EXPECT_EQ(objects(), done_entries(4));
  EXPECT_EQ(done_in_mirror("node-b"), 4u);
  EXPECT_EQ(launch("node-b", {"--command", "scan-with-failed"}).out,
            std::string("neuronxcc-") + kStandinVersion + ": 4 done, 0 failed, 0 pending, 0 locked (s3://test-bucket/team)\n");
  // Nothing left to do the next time.
  auto again = launch("node-c", {"--command", "compile"});
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(compiles(), 4u);
}

TEST_F(S3Launcher, TwoLaunchersAtOnceCompileEachGraphOnce) {
  const std::map<std::string, std::string> slow = {{"STANDIN_CC_BASE_MS", "400"}};
  std::vector<pid_t> launchers;
  for (const std::string node : {"node-a", "node-b"}) {
    auto env = slow;
    env["NEURON_COMPILE_CACHE_MIRROR"] = (dir() / node).string();
    launchers.push_back(start_tool("neuron_parallel_compile", launcher_args(node, {"--num_parallel", "2"}, train()),
                                   env, dir() / (node + ".log")));
  }
  for (pid_t pid : launchers) {
    auto status = util::wait_child(pid);
    EXPECT_TRUE(status.success()) << status.describe() << read_text(dir() / "node-a.log")
                                  << read_text(dir() / "node-b.log");
  }
  // Each launcher counts what it compiled itself: 4 between them.
  std::size_t compiled_by_launchers = 0;
  const std::regex summary(R"((\d+) graphs found, (\d+) already cached, (\d+) compiled,)");
  for (const std::string node : {"node-a", "node-b"}) {
    std::smatch m;
    const std::string log = read_text(dir() / (node + ".log"));
    ASSERT_TRUE(std::regex_search(log, m, summary)) << log;
    EXPECT_EQ(m[1], "4") << log;
    compiled_by_launchers += std::stoul(m[3]);
  }
  EXPECT_EQ(compiled_by_launchers, 4u) << read_text(dir() / "node-a.log") << read_text(dir() / "node-b.log");
  EXPECT_EQ(distinct_graphs_compiled(), 4u);
  EXPECT_EQ(compiles(), 4u) << "a graph was compiled twice\n" << read_text(dir() / "node-a.log") << read_text(dir() / "node-b.log");
  EXPECT_EQ(objects(), done_entries(4));
  EXPECT_EQ(done_in_mirror("node-a"), 4u);
  EXPECT_EQ(done_in_mirror("node-b"), 4u);
}

TEST_F(S3Launcher, TheGraphsOfAnotherS3CacheAreRefusedByName) {
  // The training script sets its own cache inside, as scripts do: another
  // prefix than the launcher's.
  std::vector<std::string> command = train();
  command.insert(command.end(), {"--script_cache_dir", "s3://test-bucket/elsewhere"});
  auto run = launch("node-a", {}, command);
  EXPECT_EQ(run.exit_code, 1) << run.describe();
  EXPECT_EQ(compiles(), 0u);
  EXPECT_NE(run.err.find("the trial extracted 4 graph(s) and none could be taken: 's3://test-bucket/elsewhere/"
                         "neuronxcc-"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("): not in the S3 cache s3://test-bucket/team (the launcher "
                         "compiles into the cache NEURON_COMPILE_CACHE_URL or --cache_dir names)"),
            std::string::npos)
      << run.err;
}

} // namespace
} // namespace npc::test
