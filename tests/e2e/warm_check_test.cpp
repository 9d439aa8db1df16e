// neuron_parallel_compile --command check on the stand-ins: the trial runs,
// nothing compiles, and the exit status says how many graphs the training
// run would compile, each listed with why.

#include "test_support.hpp"

namespace npc::test {
namespace {

class WarmCheck : public CacheTest {
protected:
  // init + 2 train + eval = 4 graphs in 10 steps; a late graph at step 20.
  // `protocol`: the stand-in's (wrapper, torch-neuronx, torch-neuronx-legacy).
  std::vector<std::string> train(int steps, const std::string& protocol) {
    std::vector<std::string> args = {tool_path("standin_train").string(), "--protocol", protocol, "--nproc_per_node",
                                     "2", "--steps_this_run", std::to_string(steps), "--graphs_per_step", "2",
                                     "--eval_every", "5", "--late_graph_step", "20", "--layers", "2", "--hidden",
                                     "64", "--workdir", (dir() / "train").string()};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    return args;
  }
  std::vector<std::string> extra_args; // more of the training script's options
  RunResult launch(const std::string& command, int steps, std::map<std::string, std::string> env = {},
                   const std::string& protocol = "wrapper") {
    std::vector<std::string> args = {"--command", command, "--parallel_compile_workdir=" + (dir() / "wd").string()};
    for (auto& a : train(steps, protocol)) args.push_back(a);
    return run_tool("neuron_parallel_compile", args, std::move(env));
  }
  // The check's lines naming graphs: "  neuronxcc-.../MODULE_...: why".
  static std::vector<std::string> graph_lines(const std::string& out) {
    std::vector<std::string> lines;
    std::size_t at = 0;
    while ((at = out.find("\n  neuronxcc-", at)) != std::string::npos) {
      std::size_t end = out.find('\n', at + 1);
      lines.push_back(out.substr(at + 3, end - at - 3));
      at = end;
    }
    return lines;
  }
};

TEST_F(WarmCheck, AWarmCacheExitsZeroAndCompilesNothing) {
  ASSERT_EQ(launch("all", 10).exit_code, 0);
  ASSERT_EQ(compiles(), 4u);
  auto check = launch("check", 10);
  EXPECT_EQ(check.exit_code, 0) << check.describe();
  EXPECT_NE(check.out.find("no graph would compile in the training run: every graph the trial ran is compiled in " +
                           cache_root().string() + "\n"),
            std::string::npos)
      << check.out;
  EXPECT_EQ(compiles(), 4u);
}

TEST_F(WarmCheck, EachGraphThatWouldCompileIsListedAndCountedInTheExitStatus) {
  ASSERT_EQ(launch("all", 10).exit_code, 0);
  // A longer run: the late graph, never compiled.
  auto longer = launch("check", 25);
  EXPECT_EQ(longer.exit_code, 1) << longer.describe();
  EXPECT_NE(longer.out.find("1 graph(s) the trial ran would compile in the training run:\n"),
            std::string::npos)
      << longer.out;
  auto lines = graph_lines(longer.out);
  ASSERT_EQ(lines.size(), 1u) << longer.out;
  EXPECT_NE(lines[0].find(": not compiled in this cache; nearest the last pre-compile's MODULE_"), std::string::npos)
      << lines[0];
  EXPECT_TRUE(lines[0].ends_with(": a step the trial did not run (an evaluation step, or one past the trial's last)?"))
      << lines[0];

  // A last partial batch: the trial's full-batch graph is the nearest.
  extra_args = {"--last_batch", "3"};
  auto partial = launch("check", 10);
  extra_args.clear();
  EXPECT_EQ(partial.exit_code, 1) << partial.describe();
  lines = graph_lines(partial.out);
  ASSERT_EQ(lines.size(), 1u) << partial.out;
  EXPECT_TRUE(lines[0].ends_with(": parameter 0 is f32[3,64] here, f32[8,64] there: a smaller last batch?"))
      << lines[0];

  // Other flags: each graph is compiled under the trial's, one word apart.
  auto flags = launch("check", 10, {{"NEURON_CC_FLAGS", "--cache_dir=" + cache_root().string() + " -O1"}});
  EXPECT_EQ(flags.exit_code, 4) << flags.describe();
  lines = graph_lines(flags.out);
  ASSERT_EQ(lines.size(), 4u) << flags.out;
  for (const auto& line : lines) {
    EXPECT_NE(line.find(": the same graph is compiled under other flags (MODULE_"), std::string::npos) << line;
    EXPECT_TRUE(line.ends_with("; flags here, not there: -O1")) << line;
  }

  // Another compiler version: another compiler binary, as an upgrade brings.
  const fs::path upgraded = dir() / "upgraded" / "neuronx-cc";
  fs::create_directories(upgraded.parent_path());
  fs::copy_file(env_.at("NEURON_CC"), upgraded);
  auto version = launch("check", 10, {{"NEURON_CC", upgraded.string()}, {"STANDIN_CC_VERSION", "2.15.0.0+standin"}});
  EXPECT_EQ(version.exit_code, 4) << version.describe();
  lines = graph_lines(version.out);
  ASSERT_EQ(lines.size(), 4u) << version.out;
  for (const auto& line : lines)
    EXPECT_NE(line.find(": the same graph is compiled under compiler " + std::string(kStandinVersion) + " ("),
              std::string::npos)
        << line;
  EXPECT_EQ(compiles(), 4u) << "a check compiles nothing";
}

// Under current torch-neuronx, and older releases, whose cache is
// DIR/neuron-compile-cache: the check looks where the framework's trial put
// the graphs.
TEST_F(WarmCheck, TheCheckJudgesTheGraphsOfEachFrameworkProtocol) {
  for (const std::string protocol : {"torch-neuronx", "torch-neuronx-legacy"}) {
    SCOPED_TRACE(protocol);
    fs::remove_all(cache_root());
    ASSERT_EQ(launch("all", 10, {}, protocol).exit_code, 0);
    auto warm = launch("check", 10, {}, protocol);
    EXPECT_EQ(warm.exit_code, 0) << warm.describe();
    EXPECT_TRUE(graph_lines(warm.out).empty()) << warm.out;
    auto longer = launch("check", 25, {}, protocol);
    EXPECT_EQ(longer.exit_code, 1) << longer.describe();
    const auto lines = graph_lines(longer.out);
    ASSERT_EQ(lines.size(), 1u) << longer.out;
    EXPECT_NE(lines[0].find(": not compiled in this cache; nearest the last pre-compile's MODULE_"),
              std::string::npos)
        << lines[0];
  }
}

TEST_F(WarmCheck, ACachedFailureIsSaidAsSuch) {
  ASSERT_EQ(launch("all", 10, {{"STANDIN_CC_FAULT", "fail"}}).exit_code, 4);
  auto check = launch("check", 10);
  EXPECT_EQ(check.exit_code, 4) << check.describe();
  const auto lines = graph_lines(check.out);
  ASSERT_EQ(lines.size(), 4u) << check.out;
  for (const auto& line : lines)
    EXPECT_NE(line.find(": failed before (a cached failure)"), std::string::npos) << line;
}

// A graph another process compiles now is said so, with its holder.
TEST_F(WarmCheck, AGraphBeingCompiledNamesItsHolder) {
  ASSERT_EQ(launch("collect", 10).exit_code, 0);
  const auto found = entries();
  ASSERT_EQ(found.size(), 4u);
  // The framework's lock file, as torch-neuronx leaves it while it compiles.
  write_text(found[0] / "model.hlo_module.pb.lock", "");
  auto check = launch("check", 10);
  EXPECT_EQ(check.exit_code, 4) << check.describe();
  const auto lines = graph_lines(check.out);
  ASSERT_EQ(lines.size(), 4u) << check.out;
  std::size_t held = 0;
  for (const auto& line : lines) held += line.find(": being compiled now, held by whoever made the lock ") != std::string::npos;
  EXPECT_EQ(held, 1u) << check.out;
}

TEST_F(WarmCheck, ADryRunOfACheckIsRefused) {
  auto r = run_tool("neuron_parallel_compile", {"--command", "check", "--dry-run", "true"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("--command check compiles nothing already"), std::string::npos) << r.err;
}

} // namespace
} // namespace npc::test
