// The stand-in compiler's simulated cost: time, CPU, memory, the OOM-killer
// budget, and the invocation log.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>

#include "sha256.h"
#include "standin_fixture.h"

namespace standin::test {
namespace {

constexpr std::uint64_t kTouchedBytes = 64ULL * 1024 * 1024;
constexpr int kConcurrentCompiles = 8;

class StandinCcResources : public StandinFixture {
 protected:
  void SetUp() override {
    StandinFixture::SetUp();
    graph_text_ = make_graph_text(kGraphBytes);
    graph_ = write_file("graph.hlo", graph_text_);
  }

  RunResult compile_with(const Env& env, const std::string& graph = "") {
    return run_compiler({"compile", graph.empty() ? graph_ : graph, "--output", path("out.neff")}, env);
  }

  // A pid that is certainly not running: a child that has been reaped.
  pid_t dead_pid() {
    Child process = start({"/bin/true"});
    const pid_t pid = process.pid();
    process.wait(kStandinTimeout);
    return pid;
  }

  std::string graph_text_;
  std::string graph_;
};

TEST_F(StandinCcResources, InvocationLogHasOneLinePerCompile) {
  const std::string log = path("invocations.log");
  const std::string other = write_file("other.hlo", make_graph_text(kGraphBytes, "other"));
  EXPECT_EQ(compile_with({{"STANDIN_CC_INVOCATION_LOG", log}}).exit_code, 0);
  EXPECT_EQ(compile_with({{"STANDIN_CC_INVOCATION_LOG", log}}, other).exit_code, 0);
  EXPECT_EQ(compile_with({{"STANDIN_CC_INVOCATION_LOG", log}, {"STANDIN_CC_FAULT", "fail"}}).exit_code, 1);

  const std::vector<std::string> lines = split_lines(read_file(log));
  ASSERT_EQ(lines.size(), 3u);
  std::istringstream first(lines[0]);
  long pid = 0;
  std::string sha;
  std::string graph_path;
  first >> pid >> sha >> graph_path;
  EXPECT_GT(pid, 0);
  EXPECT_EQ(sha, sha256_hex(graph_text_));
  EXPECT_EQ(graph_path, graph_);
  EXPECT_NE(lines[1].find(other), std::string::npos);
}

TEST_F(StandinCcResources, ConcurrentCompilesLogWholeLines) {
  const std::string log = path("invocations.log");
  std::vector<Child> processes;
  for (int i = 0; i < kConcurrentCompiles; ++i) {
    processes.push_back(start_compiler({"compile", graph_, "--output", path("out" + std::to_string(i) + ".neff")},
                                       {{"STANDIN_CC_INVOCATION_LOG", log}}));
  }
  for (Child& process : processes) EXPECT_EQ(process.wait(kStandinTimeout).exit_code, 0);
  const std::vector<std::string> lines = split_lines(read_file(log));
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kConcurrentCompiles));
  const std::string expected_tail = " " + sha256_hex(graph_text_) + " " + graph_;
  for (const std::string& line : lines) {
    EXPECT_EQ(line.substr(line.find(' ')), expected_tail) << line;
  }
}

TEST_F(StandinCcResources, GraphCostOverrideSetsCompileTime) {
  const std::string slow = write_file("slow.hlo", graph_text_ + "\n// standin-cost-ms: 200\n");
  const RunResult result = compile_with({}, slow);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_GE(result.seconds, 0.2);
}

TEST_F(StandinCcResources, CostScalesWithGraphSize) {
  // 1000 bytes at 10000 bytes/s = 100 ms on top of the 1 ms base.
  const RunResult result = compile_with({{"STANDIN_CC_BYTES_PER_SEC", "10000"}});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_GE(result.seconds, 0.1);
}

TEST_F(StandinCcResources, BusyModeBurnsCpuTime) {
  const std::string slow = write_file("slow.hlo", graph_text_ + "\n// standin-cost-ms: 200\n");
  const RunResult result = compile_with({{"STANDIN_CC_MODE", "busy"}}, slow);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_GE(result.cpu_seconds, 0.18);
}

TEST_F(StandinCcResources, PeakBytesOverrideIsResident) {
  const std::string big = write_file(
      "big.hlo", graph_text_ + "\n// standin-peak-bytes: " + std::to_string(kTouchedBytes) + "\n");
  const RunResult result = compile_with({}, big);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_GE(result.peak_rss_bytes, kTouchedBytes);
}

TEST_F(StandinCcResources, MemoryScalesWithGraphUpToTheCap) {
  // 1000 bytes * 1,000,000 would be ~1 GB; the cap holds it to 64 MiB.
  const RunResult result = compile_with({{"STANDIN_CC_MEM_PER_GRAPH_BYTE", "1000000"},
                                             {"STANDIN_CC_MEM_PEAK_BYTES", "64M"}});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_GE(result.peak_rss_bytes, kTouchedBytes);
  EXPECT_LT(result.peak_rss_bytes, 4 * kTouchedBytes);
}

TEST_F(StandinCcResources, LedgerOverBudgetKillsWithSigkill) {
  // This test process is alive and "holds" 1000 bytes of a 1500-byte budget.
  const std::string ledger = write_file("ledger", std::to_string(getpid()) + " 1000\n");
  const RunResult result = compile_with({{"STANDIN_CC_MEMORY_BUDGET", "1500"},
                                             {"STANDIN_CC_MEMORY_LEDGER", ledger},
                                             {"STANDIN_CC_MEM_PER_GRAPH_BYTE", "1"}});
  ASSERT_TRUE(result.signaled) << result.err;
  EXPECT_EQ(result.signal, SIGKILL);
  EXPECT_EQ(read_file(ledger), std::to_string(getpid()) + " 1000\n");
  EXPECT_FALSE(exists(path("out.neff")));
}

TEST_F(StandinCcResources, LedgerDropsDeadProcessesAndReleasesOwnLine) {
  const std::string ledger = write_file("ledger", std::to_string(dead_pid()) + " 999999999\n");
  const RunResult result = compile_with({{"STANDIN_CC_MEMORY_BUDGET", "1M"},
                                             {"STANDIN_CC_MEMORY_LEDGER", ledger},
                                             {"STANDIN_CC_MEM_PER_GRAPH_BYTE", "1"}});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(read_file(ledger), "");
}

}  // namespace
}  // namespace standin::test
