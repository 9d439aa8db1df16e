// Every fault mode of the stand-in compiler, through the compile entry: each
// ends with a clear message, the documented exit code, a failed entry with
// its log (or a pending one for an interrupt, a SIGKILL or a timeout), and
// never a served partial NEFF.

#include <algorithm>
#include <csignal>
#include <regex>

#include <npc/cache/entry_meta.hpp>
#include <npc/util/process.hpp>

#include "test_support.hpp"

namespace npc::test {
namespace {

class WrapperFaults : public CacheTest {
protected:
  void SetUp() override {
    CacheTest::SetUp();
    graph_ = dir() / "g.hlo";
    write_text(graph_, "HloModule faulty\nENTRY e { ROOT p = f32[8] parameter(0) }\n");
  }
  RunResult compile(std::map<std::string, std::string> env, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"compile", "--graph", graph_.string(), "--output", (dir() / "out.neff").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_tool("neuron_cc_wrapper", args, std::move(env));
  }
  fs::path entry() {
    auto e = entries();
    return e.empty() ? fs::path() : e[0];
  }
  cache::AttemptRecord last_attempt() {
    auto meta = cache::read_entry_meta(entry());
    EXPECT_TRUE(meta.ok());
    return meta->attempts.empty() ? cache::AttemptRecord{} : meta->attempts.back();
  }
  void expect_failed_entry() {
    ASSERT_FALSE(entry().empty());
    EXPECT_TRUE(fs::exists(entry() / "model.log"));
    EXPECT_FALSE(fs::exists(entry() / "model.done"));
    EXPECT_FALSE(fs::exists(entry() / "model.neff"));
    EXPECT_FALSE(fs::exists(dir() / "out.neff"));
    auto verify = run_tool("neuron_cache", {"verify"});
    EXPECT_EQ(verify.exit_code, 0) << verify.describe();
  }
  // Killed or timed out: pending, not a cached failure; the log kept aside.
  void expect_killed_entry() {
    ASSERT_FALSE(entry().empty());
    EXPECT_FALSE(fs::exists(entry() / "model.log"));
    EXPECT_FALSE(fs::exists(entry() / "model.done"));
    EXPECT_FALSE(fs::exists(entry() / "model.neff"));
    EXPECT_TRUE(fs::exists(entry() / "model.hlo_module.pb"));
    EXPECT_NE(read_text(entry() / "npc-killed.log").find("[neuron_cc_wrapper] compiler "), std::string::npos);
    EXPECT_FALSE(fs::exists(dir() / "out.neff"));
    auto verify = run_tool("neuron_cache", {"verify"});
    EXPECT_EQ(verify.exit_code, 0) << verify.describe();
  }
  fs::path graph_;
};

TEST_F(WrapperFaults, Fail) {
  auto r = compile({{"STANDIN_CC_FAULT", "fail"}});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("compiler exit code 1"), std::string::npos) << r.err;
  expect_failed_entry();
  EXPECT_EQ(last_attempt().outcome, "failed");
  EXPECT_EQ(last_attempt().exit_code, 1);
}

TEST_F(WrapperFaults, Exit70) {
  auto r = compile({{"STANDIN_CC_FAULT", "exit70"}});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("compiler exit code 70"), std::string::npos) << r.err;
  expect_failed_entry();
  EXPECT_EQ(last_attempt().exit_code, 70);
}

// SIGKILL comes from outside (the OOM killer): reported by name, the
// attempt recorded, but the entry stays pending so the next call compiles.
TEST_F(WrapperFaults, SigkillIsReportedByNameAndNotCached) {
  auto r = compile({{"STANDIN_CC_FAULT", "sigkill"}, {"STANDIN_CC_FAULT_TIMES", "1"}});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("compiler killed by signal SIGKILL (as the kernel's out-of-memory killer does); "
                       "not cached as a failure: the next run compiles it again; full log: " +
                       (entry() / "npc-killed.log").string()),
            std::string::npos)
      << r.err;
  expect_killed_entry();
  EXPECT_EQ(last_attempt().signal, "SIGKILL");
  auto again = compile({{"STANDIN_CC_FAULT", "sigkill"}, {"STANDIN_CC_FAULT_TIMES", "1"}});
  EXPECT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(compiles(), 2u);
  EXPECT_FALSE(fs::exists(entry() / "npc-killed.log")) << "a success clears the kept log";
}

TEST_F(WrapperFaults, Segv) {
  auto r = compile({{"STANDIN_CC_FAULT", "segv"}});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("killed by signal SIGSEGV"), std::string::npos) << r.err;
  expect_failed_entry();
}

TEST_F(WrapperFaults, HangIsKilledByTheTimeout) {
  auto start = std::chrono::steady_clock::now();
  auto r = compile({{"STANDIN_CC_FAULT", "hang"}}, {"--timeout", "0.5"});
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("compiler timed out after 0.5s"), std::string::npos) << r.err;
  EXPECT_LT(took, std::chrono::seconds(5));
  expect_killed_entry();
  EXPECT_EQ(last_attempt().outcome, "timeout");
  // The hung compiler's whole group is gone: no stand-in left running.
  ASSERT_EQ(compiler_pids().size(), 1u) << "the compiler never ran: nothing hung to be killed";
  EXPECT_FALSE(alive(compiler_pids()[0])) << "the hung compiler " << compiler_pids()[0] << " still runs";
  auto left = processes_with_cmdline(cache_root().string());
  EXPECT_TRUE(left.empty()) << "still running:\n" << describe(left);
}

// The compiler says it ran out of space while writing its NEFF: the truncated
// output is never published, and running out of space is the machine's
// fault, not the graph's: the entry stays pending (no model.log), the attempt
// is recorded as no_space, exit 3, and the next call compiles it without
// --retry_failed_compilation.
TEST_F(WrapperFaults, TruncatedOutputIsNeverPublished) {
  auto r = compile({{"STANDIN_CC_FAULT", "truncate"}});
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  std::smatch free;
  ASSERT_TRUE(std::regex_search(r.err, free, std::regex(" has ([0-9]+) bytes free now"))) << r.err;
  EXPECT_EQ(r.err, "neuron_cc_wrapper: error: compilation of " + entry().string() +
                       " stopped: No space left on device was reported during the compile (the filesystem of " +
                       entry().string() + " has " + free[1].str() +
                       " bytes free now; the compiler's temporary directory, TMPDIR, may be the full one); free "
                       "space and run again: the graph stays pending, no failure is cached\n");
  expect_killed_entry();
  EXPECT_EQ(last_attempt().outcome, "no_space");
  // No temp work dir left in the entry.
  for (const auto& f : fs::directory_iterator(entry())) EXPECT_FALSE(f.path().filename().string().starts_with(".tmp-"));
  auto again = compile({});
  EXPECT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_TRUE(fs::exists(entry() / "model.done"));
  EXPECT_EQ(compiles(), 2u);
}

TEST_F(WrapperFaults, TransientFaultSucceedsOnRetry) {
  std::map<std::string, std::string> env = {{"STANDIN_CC_FAULT", "exit70"}, {"STANDIN_CC_FAULT_TIMES", "1"}};
  EXPECT_EQ(compile(env).exit_code, 1);
  auto r = compile(env, {"--retry_failed_compilation"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(fs::exists(entry() / "model.done"));
  EXPECT_EQ(compiles(), 2u);
}

TEST_F(WrapperFaults, InterruptLeavesThePendingEntryAndNoLock) {
  pid_t pid = start_tool("neuron_cc_wrapper",
                         {"compile", "--graph", graph_.string(), "--output", (dir() / "out.neff").string()},
                         {{"STANDIN_CC_FAULT", "hang"}}, dir() / "wrapper.log");
  // Wait until the compiler runs, then interrupt the wrapper as Ctrl-C would.
  ASSERT_TRUE(wait_until([&] { return compiles() > 0; }, std::chrono::seconds(10))) << read_text(dir() / "wrapper.log");
  ASSERT_EQ(compiler_pids().size(), 1u);
  const pid_t compiler = compiler_pids()[0];
  // The check below looks for processes naming the cache: it must see the
  // hung compiler now, or finding none afterwards would prove nothing.
  auto running = processes_with_cmdline(cache_root().string());
  ASSERT_TRUE(std::any_of(running.begin(), running.end(), [&](const ProcessInfo& p) { return p.pid == compiler; }))
      << "the running compiler " << compiler << " (" << cmdline_of(compiler) << ") is not among the processes naming "
      << cache_root() << ":\n" << describe(running);
  ::kill(pid, SIGINT);
  auto status = util::wait_child(pid);
  EXPECT_FALSE(status.signaled);
  EXPECT_EQ(status.code, 130);
  ASSERT_FALSE(entry().empty());
  EXPECT_TRUE(fs::exists(entry() / "model.hlo_module.pb"));
  EXPECT_FALSE(fs::exists(entry() / "model.log")); // an interrupt is not a cached failure
  EXPECT_FALSE(fs::exists(entry() / "model.done"));
  EXPECT_FALSE(fs::exists(entry() / "npc-compile.lock"));
  EXPECT_FALSE(alive(compiler)) << "the compiler outlived the interrupted wrapper";
  auto left = processes_with_cmdline(cache_root().string());
  EXPECT_TRUE(left.empty()) << "still running:\n" << describe(left);
  // The next caller compiles it.
  auto r = compile({});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
}

} // namespace
} // namespace npc::test
