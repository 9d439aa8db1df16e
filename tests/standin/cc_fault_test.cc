// Faults injected into the stand-in compiler through STANDIN_CC_FAULT*.
#include <signal.h>

#include <gtest/gtest.h>

#include <thread>

#include "standin_fixture.h"

namespace standin::test {
namespace {

constexpr std::chrono::milliseconds kHangProbe{300};

class StandinCcFault : public StandinFixture {
 protected:
  void SetUp() override {
    StandinFixture::SetUp();
    graph_ = write_file("graph.hlo", make_graph_text(kGraphBytes));
    output_ = path("out.neff");
  }

  RunResult compile_with(const Env& env, const std::string& graph = "") {
    return run_compiler({"compile", "--framework=XLA", graph.empty() ? graph_ : graph, "--output", output_}, env);
  }

  std::string graph_;
  std::string output_;
};

TEST_F(StandinCcFault, FailExitsWith1AndNoNeff) {
  const RunResult result = compile_with({{"STANDIN_CC_FAULT", "fail"}});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("Compiler status ERROR"), std::string::npos) << result.err;
  EXPECT_FALSE(exists(output_));
}

TEST_F(StandinCcFault, Exit70ExitsWith70) {
  const RunResult result = compile_with({{"STANDIN_CC_FAULT", "exit70"}});
  EXPECT_EQ(result.exit_code, 70);
  EXPECT_FALSE(exists(output_));
}

TEST_F(StandinCcFault, SigkillIsKilledBySignal) {
  const RunResult result = compile_with({{"STANDIN_CC_FAULT", "sigkill"}});
  ASSERT_TRUE(result.signaled);
  EXPECT_EQ(result.signal, SIGKILL);
  EXPECT_FALSE(exists(output_));
}

TEST_F(StandinCcFault, SegvIsKilledBySegfault) {
  const RunResult result = compile_with({{"STANDIN_CC_FAULT", "segv"}});
  ASSERT_TRUE(result.signaled);
  EXPECT_EQ(result.signal, SIGSEGV);
  EXPECT_FALSE(exists(output_));
}

TEST_F(StandinCcFault, HangKeepsRunningUntilKilled) {
  Child process = start_compiler({"compile", graph_, "--output", output_}, {{"STANDIN_CC_FAULT", "hang"}});
  std::this_thread::sleep_for(kHangProbe);
  EXPECT_TRUE(process.running());
  process.kill(SIGKILL);
  const RunResult result = process.wait(kStandinTimeout);
  EXPECT_TRUE(result.signaled);
  EXPECT_FALSE(exists(output_));
}

TEST_F(StandinCcFault, TruncateWritesHalfTheNeffAndFailsLikeAFullDisk) {
  ASSERT_EQ(compile_with({}).exit_code, 0);
  const std::string full = read_file(output_);
  const RunResult result = compile_with({{"STANDIN_CC_FAULT", "truncate"}});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_NE(result.err.find("No space left on device"), std::string::npos) << result.err;
  const std::string truncated = read_file(output_);
  EXPECT_EQ(truncated, full.substr(0, full.size() / 2));
}

TEST_F(StandinCcFault, FaultTimesFailsOnlyTheFirstAttempts) {
  const Env env{{"STANDIN_CC_FAULT", "fail"}, {"STANDIN_CC_FAULT_TIMES", "2"},
                {"STANDIN_CC_STATE_DIR", dir()}};
  EXPECT_EQ(compile_with(env).exit_code, 1);
  EXPECT_EQ(compile_with(env).exit_code, 1);
  EXPECT_EQ(compile_with(env).exit_code, 0);
  EXPECT_EQ(compile_with(env).exit_code, 0);

  // Attempts are counted per graph: another graph starts again at 1.
  const std::string other = write_file("other.hlo", make_graph_text(kGraphBytes, "other"));
  EXPECT_EQ(compile_with(env, other).exit_code, 1);
}

TEST_F(StandinCcFault, FaultTimesAlwaysFailsEveryAttempt) {
  const Env env{{"STANDIN_CC_FAULT", "exit70"}, {"STANDIN_CC_FAULT_TIMES", "always"}};
  for (int attempt = 0; attempt < 3; ++attempt) EXPECT_EQ(compile_with(env).exit_code, 70);
}

TEST_F(StandinCcFault, FaultTimesNeedsAStateDirectory) {
  const RunResult result = compile_with({{"STANDIN_CC_FAULT", "fail"}, {"STANDIN_CC_FAULT_TIMES", "1"}});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("STANDIN_CC_STATE_DIR"), std::string::npos) << result.err;
}

TEST_F(StandinCcFault, FaultMatchLimitsTheFaultToMatchingGraphs) {
  const std::string marked = write_file("marked.hlo", make_graph_text(kGraphBytes) + "\n// poison-me\n");
  const Env env{{"STANDIN_CC_FAULT", "fail"}, {"STANDIN_CC_FAULT_MATCH", "poison-me"}};
  EXPECT_EQ(compile_with(env).exit_code, 0);
  EXPECT_EQ(compile_with(env, marked).exit_code, 1);
}

TEST_F(StandinCcFault, UnknownFaultIsAUsageError) {
  EXPECT_EQ(compile_with({{"STANDIN_CC_FAULT", "explode"}}).exit_code, 2);
}

}  // namespace
}  // namespace standin::test
