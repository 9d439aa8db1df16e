// Ctrl-C in either phase: every process of the run ends within 2 s, the
// launcher exits 130, and the next run finishes every graph (no lock or temp
// file is left that it cannot reclaim).

#include <algorithm>
#include <csignal>

#include <npc/util/clock.hpp>
#include <npc/util/process.hpp>

#include "test_support.hpp"

namespace npc::test {
namespace {

using namespace std::chrono_literals;

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
  std::vector<ProcessInfo> processes_left() const { return processes_with_cmdline(dir().string()); }

  // The launcher runs, and so does something it started: the check that all
  // of them are gone after the signal could not fail if it saw none now.
  void expect_run_visible(pid_t launcher) const {
    auto now = processes_left();
    bool launcher_seen = false, child_seen = false;
    for (const auto& p : now) (p.pid == launcher ? launcher_seen : child_seen) = true;
    EXPECT_TRUE(launcher_seen && child_seen)
        << "the launcher " << launcher << " and what it started should be running:\n" << describe(now);
  }

  // Sends `signal` as a terminal would to the launcher, and checks that it
  // and everything it started are gone within 2 s, with `expected_status`.
  void signal_and_check(pid_t launcher, int signal, int expected_status) {
    expect_run_visible(launcher);
    double sent = util::monotonic_seconds();
    ::kill(launcher, signal);
    auto status = util::wait_child(launcher);
    EXPECT_FALSE(status.signaled) << status.describe();
    EXPECT_EQ(status.code, expected_status);
    double left = 2.0 - (util::monotonic_seconds() - sent);
    bool gone = wait_until([&] { return processes_left().empty(); },
                           std::chrono::milliseconds(static_cast<long>(std::max(left, 0.0) * 1000)), 20ms);
    EXPECT_TRUE(gone) << "left running:\n" << describe(processes_left());
    EXPECT_LT(util::monotonic_seconds() - sent, 2.5);
  }
};

TEST_F(LauncherSignals, CtrlCDuringTheTrial) {
  pid_t launcher = start_tool("neuron_parallel_compile", launcher_args(train(100, 100)), {}, dir() / "launcher.log");
  ASSERT_TRUE(wait_until([&] { return !entries().empty(); }, 10s)) << read_text(dir() / "launcher.log");
  signal_and_check(launcher, SIGINT, 130);
  EXPECT_NE(read_text(dir() / "launcher.log").find("interrupted by SIGINT during the trial run"), std::string::npos)
      << read_text(dir() / "launcher.log");
  EXPECT_EQ(compiles(), 0u);
}

TEST_F(LauncherSignals, CtrlCDuringCompilesThenTheNextRunFinishes) {
  pid_t launcher = start_tool("neuron_parallel_compile", launcher_args(train(10, 0)),
                              {{"STANDIN_CC_FAULT", "hang"}}, dir() / "launcher.log");
  // Both compiles running (the stand-in hangs in each).
  ASSERT_TRUE(wait_until([&] { return compiles() >= 2; }, 10s)) << read_text(dir() / "launcher.log");
  signal_and_check(launcher, SIGINT, 130);
  EXPECT_NE(read_text(dir() / "launcher.log").find("interrupted by SIGINT while compiling"), std::string::npos)
      << read_text(dir() / "launcher.log");
  // The trial extracted every graph before the compiles began.
  ASSERT_EQ(entries().size(), 5u); // init, three training graphs, eval
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

// An interrupted run keeps its signal's status, which the shell acts on,
// when its trace cannot be written (a full disk; /dev/full through a link):
// the lost trace is a line of its own.
TEST_F(LauncherSignals, CtrlCKeepsItsStatusWhenTheTraceIsLost) {
  fs::create_symlink("/dev/full", dir() / "full");
  pid_t launcher = start_tool("neuron_parallel_compile", launcher_args(train(100, 100)),
                              {{"NEURON_PARALLEL_COMPILE_TRACE", (dir() / "full").string()}}, dir() / "launcher.log");
  ASSERT_TRUE(wait_until([&] { return !entries().empty(); }, 10s)) << read_text(dir() / "launcher.log");
  signal_and_check(launcher, SIGINT, 130);
  const std::string log = read_text(dir() / "launcher.log");
  EXPECT_NE(log.find("neuron_parallel_compile: error: interrupted by SIGINT during the trial run; nothing compiled\n"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("neuron_parallel_compile: error: --trace: cannot write " + (dir() / "full").string() +
                     ": No space left on device\n"),
            std::string::npos)
      << log;
}

TEST_F(LauncherSignals, SigtermIsPassedOnToo) {
  pid_t launcher = start_tool("neuron_parallel_compile", launcher_args(train(100, 100)), {}, dir() / "launcher.log");
  ASSERT_TRUE(wait_until([&] { return !entries().empty(); }, 10s)) << read_text(dir() / "launcher.log");
  signal_and_check(launcher, SIGTERM, 128 + SIGTERM);
}

} // namespace
} // namespace npc::test
