// neuron_parallel_compile beside older torch-neuronx releases (the developer
// guide's protocol): --cache_dir=DIR puts the cache at DIR/neuron-compile-cache,
// and the cache-path log names nothing, so each graph's root is learned from
// its path on the "Extracting graphs (...)" line. Every flow of such a release
// (torchrun, retries, a failed trial compiled anyway, Ctrl-C and the run
// after it), on a fresh cache and on one a real run has already used.

#include <csignal>

#include "test_support.hpp"

#include <npc/util/process.hpp>

namespace npc::test {
namespace {

using namespace std::chrono_literals;

enum class CacheState { fresh, used };

// init + 2 train + eval in a 10-step trial; a 1-step real run makes the
// first three.
constexpr std::size_t kLegacyGraphs = 4;
constexpr std::size_t kGraphsOfOneStep = 3;

class OlderReleases : public CacheTest, public ::testing::WithParamInterface<CacheState> {
protected:
  void SetUp() override {
    CacheTest::SetUp();
    if (HasFatalFailure()) return;
    env_["NEURON_CC_FLAGS"] = "--cache_dir=" + user_dir().string();
    if (GetParam() == CacheState::used) {
      // A real run of one step, just in time, before any pre-compile.
      auto real = run(train({"--steps_this_run", "1"}), options());
      ASSERT_EQ(real.exit_code, 0) << real.describe();
      ASSERT_EQ(done_entries(), kGraphsOfOneStep);
      compiles_before = compiles();
    }
  }

  // What the user passes as --cache_dir; the release keeps its cache below.
  fs::path user_dir() const { return dir() / "cc"; }
  fs::path older_root() const { return user_dir() / "neuron-compile-cache"; }
  fs::path version_dir(const fs::path& root) const { return root / (std::string("neuronxcc-") + kStandinVersion); }
  std::vector<std::string> entry_names(const fs::path& root) const { return names_in(version_dir(root)); }
  std::size_t done_entries() const {
    std::size_t done = 0;
    for (const auto& name : entry_names(older_root()))
      done += fs::exists(version_dir(older_root()) / name / "model.done") &&
              fs::exists(version_dir(older_root()) / name / "model.neff");
    return done;
  }
  // Graphs this flow's trial extracts: what the used cache does not hold yet.
  std::size_t to_compile() const {
    return GetParam() == CacheState::used ? kLegacyGraphs - kGraphsOfOneStep : kLegacyGraphs;
  }

  std::vector<std::string> train(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {(standin_dir() / "standin_train").string(), "--protocol", "torch-neuronx-legacy",
                                     "--nproc_per_node", "2", "--steps_this_run", "10", "--graphs_per_step", "2",
                                     "--eval_every", "5", "--layers", "2", "--hidden", "64", "--workdir",
                                     (dir() / "train").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  std::vector<std::string> launcher_args(const std::vector<std::string>& command) const {
    std::vector<std::string> args = {"--parallel_compile_workdir=" + (dir() / "wd").string(), "--num_parallel=2"};
    args.insert(args.end(), command.begin(), command.end());
    return args;
  }
  RunResult launch(const std::vector<std::string>& command, std::map<std::string, std::string> env = {}) const {
    return run_tool("neuron_parallel_compile", launcher_args(command), std::move(env));
  }

  // Every graph done where the release keeps it, nothing beside it, and the
  // real run that follows compiles nothing.
  void expect_every_graph_precompiled() const {
    EXPECT_EQ(entry_names(older_root()).size(), kLegacyGraphs);
    EXPECT_EQ(done_entries(), kLegacyGraphs);
    EXPECT_TRUE(entry_names(user_dir()).empty()) << "entries beside the release's cache";
    for (const auto& name : entry_names(older_root()))
      EXPECT_FALSE(fs::exists(version_dir(older_root()) / name / "model.hlo_module.pb.lock")) << name;
    std::size_t before = compiles();
    auto real = run(train(), options());
    ASSERT_EQ(real.exit_code, 0) << real.describe();
    EXPECT_EQ(train_total_field(real.out, "jit_compiles"), 0) << real.out;
    EXPECT_EQ(compiles(), before);
  }
  void expect_totals(const RunResult& r, std::size_t graphs, std::size_t failed) const {
    EXPECT_NE(r.err.find("Total graphs: " + std::to_string(graphs) + "\n"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Total successful compilations: " + std::to_string(graphs - failed) + "\n"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("Total failed compilations: " + std::to_string(failed) + "\n"), std::string::npos) << r.err;
  }

  std::size_t compiles_before = 0;
};

TEST_P(OlderReleases, TorchrunCompilesEveryGraphWhereTheReleaseKeepsIt) {
  auto r = launch(train());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles() - compiles_before, to_compile());
  EXPECT_EQ(r.err.find("refusing graph"), std::string::npos) << r.err;
  expect_totals(r, to_compile(), 0);
  expect_every_graph_precompiled();
}

TEST_P(OlderReleases, AFailedCompileIsRetried) {
  auto r = launch(train(), {{"STANDIN_CC_FAULT", "fail"},
                            {"STANDIN_CC_FAULT_TIMES", "1"},
                            {"NEURON_PARALLEL_COMPILE_MAX_RETRIES", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(compiles() - compiles_before, 2 * to_compile());
  expect_totals(r, to_compile(), 0);
  expect_every_graph_precompiled();
}

TEST_P(OlderReleases, AFailedTrialIsCompiledWhenTheUserAsksForIt) {
  // The trial dies in step 7, after the eval graph of step 5.
  auto r = launch(train({"--crash_at_step", "7"}), {{"NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("the training command failed"), std::string::npos) << r.err;
  EXPECT_EQ(compiles() - compiles_before, to_compile());
  expect_totals(r, to_compile(), 0);
  expect_every_graph_precompiled();
}

TEST_P(OlderReleases, CtrlCWhileCompilingThenTheNextRunFinishes) {
  pid_t launcher = start_tool("neuron_parallel_compile", launcher_args(train()), {{"STANDIN_CC_FAULT", "hang"}},
                              dir() / "launcher.log");
  ASSERT_TRUE(wait_until([&] { return compiles() > compiles_before; }, 20s)) << read_text(dir() / "launcher.log");
  ASSERT_EQ(::kill(launcher, SIGINT), 0);
  auto status = util::wait_child(launcher);
  EXPECT_EQ(status.code, 130) << status.describe() << read_text(dir() / "launcher.log");
  EXPECT_NE(read_text(dir() / "launcher.log").find("interrupted by SIGINT while compiling"), std::string::npos)
      << read_text(dir() / "launcher.log");
  EXPECT_EQ(done_entries(), kLegacyGraphs - to_compile());

  std::size_t interrupted = compiles();
  auto next = launch(train());
  ASSERT_EQ(next.exit_code, 0) << next.describe();
  EXPECT_EQ(compiles() - interrupted, to_compile());
  expect_totals(next, to_compile(), 0);
  expect_every_graph_precompiled();
}

INSTANTIATE_TEST_SUITE_P(Cache, OlderReleases, ::testing::Values(CacheState::fresh, CacheState::used),
                         [](const auto& info) { return info.param == CacheState::fresh ? "Fresh" : "Used"; });

} // namespace
} // namespace npc::test
