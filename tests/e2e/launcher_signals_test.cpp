// Ctrl-C in either phase: every process of the run ends within 2 s, the
// launcher exits 130, and the next run finishes every graph (no lock or temp
// file is left that it cannot reclaim).

#include <csignal>
#include <functional>
#include <thread>

#include <npc/util/clock.hpp>
#include <npc/util/process.hpp>

#include "test_support.hpp"

namespace npc::test {
namespace {

class LauncherSignals : public CacheTest {
protected:
  std::vector<std::string> launcher_args(std::vector<std::string> command) {
    std::vector<std::string> args = {"--parallel_compile_workdir", (dir() / "wd").string(), "--num_parallel", "2"};
    args.insert(args.end(), command.begin(), command.end());
    return args;
  }
  std::vector<std::string> train(int steps, int step_ms) {
    return {(standin_dir() / "standin_train").string(), "--nproc_per_node", "2", "--steps_this_run",
            std::to_string(steps), "--graphs_per_step", "3", "--layers", "2", "--hidden", "64",
            "--step_ms", std::to_string(step_ms), "--workdir", (dir() / "train").string()};
  }
  // Every process of the run carries this test's directory in its command line.
  std::string processes_left() { return run({"pgrep", "-a", "-f", dir().string()}).out; }

  bool wait_until(const std::function<bool()>& condition, double seconds) {
    double end = util::monotonic_seconds() + seconds;
    while (util::monotonic_seconds() < end) {
      if (condition()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return condition();
  }
  // Sends SIGINT as a terminal's Ctrl-C would reach the launcher, and checks
  // that it and everything it started are gone within 2 s, with status 130.
  void interrupt_and_check(pid_t launcher) {
    double sent = util::monotonic_seconds();
    ::kill(launcher, SIGINT);
    auto status = util::wait_child(launcher);
    EXPECT_FALSE(status.signaled) << status.describe();
    EXPECT_EQ(status.code, 130);
    bool gone = wait_until([&] { return processes_left().empty(); }, 2.0 - (util::monotonic_seconds() - sent));
    EXPECT_TRUE(gone) << "left running:\n" << processes_left();
    EXPECT_LT(util::monotonic_seconds() - sent, 2.5);
  }
};

TEST_F(LauncherSignals, CtrlCDuringTheTrial) {
  pid_t launcher = start_tool("neuron_parallel_compile", launcher_args(train(100, 100)), {}, dir() / "launcher.log");
  ASSERT_TRUE(wait_until([&] { return !entries().empty(); }, 10)) << read_text(dir() / "launcher.log");
  interrupt_and_check(launcher);
  EXPECT_NE(read_text(dir() / "launcher.log").find("interrupted by SIGINT during the trial run"), std::string::npos)
      << read_text(dir() / "launcher.log");
  EXPECT_EQ(compiles(), 0u);
}

TEST_F(LauncherSignals, CtrlCDuringCompilesThenTheNextRunFinishes) {
  pid_t launcher = start_tool("neuron_parallel_compile", launcher_args(train(10, 0)),
                              {{"STANDIN_CC_FAULT", "hang"}}, dir() / "launcher.log");
  // Both compiles running (the stand-in hangs in each).
  ASSERT_TRUE(wait_until([&] { return compiles() >= 2; }, 10)) << read_text(dir() / "launcher.log");
  interrupt_and_check(launcher);
  EXPECT_NE(read_text(dir() / "launcher.log").find("interrupted by SIGINT while compiling"), std::string::npos)
      << read_text(dir() / "launcher.log");
  for (const auto& e : entries()) {
    EXPECT_FALSE(fs::exists(e / "model.done")) << e;
    EXPECT_FALSE(fs::exists(e / "model.log")) << "an interrupt is not a failure: " << e;
  }

  auto next = run_tool("neuron_parallel_compile", {"--parallel_compile_workdir", (dir() / "wd").string(),
                                                   "--command", "compile"});
  ASSERT_EQ(next.exit_code, 0) << next.describe();
  std::size_t done = 0;
  for (const auto& e : entries()) done += fs::exists(e / "model.done");
  EXPECT_EQ(done, entries().size());
  EXPECT_EQ(entries().size(), 5u); // init, three training graphs, eval
  auto verify = run_tool("neuron_cache", {"verify"});
  EXPECT_EQ(verify.exit_code, 0) << verify.describe();
}

TEST_F(LauncherSignals, SigtermIsPassedOnToo) {
  pid_t launcher = start_tool("neuron_parallel_compile", launcher_args(train(100, 100)), {}, dir() / "launcher.log");
  ASSERT_TRUE(wait_until([&] { return !entries().empty(); }, 10));
  ::kill(launcher, SIGTERM);
  auto status = util::wait_child(launcher);
  EXPECT_EQ(status.code, 128 + SIGTERM) << status.describe();
  EXPECT_TRUE(wait_until([&] { return processes_left().empty(); }, 2.0)) << processes_left();
}

} // namespace
} // namespace npc::test
