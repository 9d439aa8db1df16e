// The test-support library itself. Its helpers decide whether many checks
// elsewhere can fail at all: a process finder that finds nothing, or a write
// that silently does not happen, would make those checks pass vacuously. So
// each helper is shown here to find, fail and report what it must.

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <netinet/in.h>
#include <sys/socket.h>
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "refused_port.hpp"
#include "rgw_tenant.hpp"
#include "test_support.hpp"

namespace npc::test {
namespace {

using namespace std::chrono_literals;

class SupportTest : public TempDirTest {
protected:
  // A shell that sleeps with `marker` as its $0, so its command line holds it.
  // (`; exit` keeps the shell from replacing itself by sleep.)
  Child sleeper(const std::string& marker, const std::string& script = "sleep 30; exit 0") {
    return Child({"/bin/sh", "-c", script, marker}, {}, dir() / marker);
  }
  std::vector<pid_t> pids_with(const std::string& needle) {
    std::vector<pid_t> pids;
    for (const auto& p : processes_with_cmdline(needle)) pids.push_back(p.pid);
    return pids;
  }
};

TEST_F(SupportTest, ProcessesWithCmdlineFindsALiveProcessAndNotOnceItEnded) {
  const std::string marker = "npc-support-marker-" + std::to_string(::getpid());
  Child child = sleeper(marker);
  ASSERT_GT(child.pid(), 0);
  // Until the shell's sleep has been exec'd, the forked child still carries
  // the shell's command line (and the marker): wait for the sleep itself.
  auto sleep_started = [&] {
    for (const auto& p : processes_with_cmdline("sleep 30"))
      if (p.ppid == child.pid() && p.cmdline.find(marker) == std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(wait_until([&] { return sleep_started() && pids_with(marker) == std::vector<pid_t>{child.pid()}; }, 5s))
      << "the sleeping shell was not found; found:\n" << describe(processes_with_cmdline(marker));
  auto found = processes_with_cmdline(marker);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].ppid, ::getpid());
  EXPECT_NE(found[0].cmdline.find("/bin/sh -c sleep 30; exit 0 " + marker), std::string::npos) << found[0].cmdline;
  EXPECT_TRUE(alive(child.pid()));
  child.kill(SIGKILL);
  auto ended = child.wait(10s);
  EXPECT_TRUE(ended.signaled);
  EXPECT_EQ(ended.signal, SIGKILL);
  EXPECT_TRUE(pids_with(marker).empty()) << describe(processes_with_cmdline(marker));
  EXPECT_FALSE(alive(child.pid()));
}

TEST_F(SupportTest, ProcessesWithCmdlineLeavesOutZombies) {
  const std::string marker = "npc-support-zombie-" + std::to_string(::getpid());
  Child child = sleeper(marker, "exit 0");
  ASSERT_GT(child.pid(), 0);
  // Ended but not reaped: a zombie, still in /proc.
  const fs::path proc = "/proc/" + std::to_string(child.pid());
  ASSERT_TRUE(wait_until([&] { return !alive(child.pid()); }, 5s));
  ASSERT_TRUE(fs::exists(proc)) << "reaped already: no zombie to look at";
  EXPECT_NE(read_text(proc / "stat").find(") Z "), std::string::npos) << read_text(proc / "stat");
  EXPECT_TRUE(pids_with(marker).empty()) << describe(processes_with_cmdline(marker));
  EXPECT_EQ(child.wait(5s).exit_code, 0);
}

TEST_F(SupportTest, ProcessesWithCmdlineLeavesOutTheTestProcess) {
  std::string own = cmdline_of(::getpid());
  ASSERT_FALSE(own.empty());
  for (const auto& p : processes_with_cmdline(own)) EXPECT_NE(p.pid, ::getpid());
  EXPECT_NONFATAL_FAILURE(std::ignore = processes_with_cmdline(""), "an empty needle");
}

TEST_F(SupportTest, DescendantsAndChildrenAreTheLiveTree) {
  const std::string marker = "npc-support-tree-" + std::to_string(::getpid());
  Child child = sleeper(marker, "sleep 30 & wait; exit 0");
  ASSERT_GT(child.pid(), 0);
  // The shell's fork shows below it before it has run sleep (its command
  // line is still the shell's until the exec): wait for the exec.
  pid_t sleep_pid = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        auto below = descendants_of(child.pid());
        if (below.size() != 1) return false;
        sleep_pid = below[0];
        return cmdline_of(sleep_pid) == "sleep 30";
      },
      5s))
      << "the shell's sleep was not found below it";
  EXPECT_EQ(children_of(::getpid()), std::vector<pid_t>{child.pid()});
  auto below = descendants_of(::getpid());
  EXPECT_EQ(below.size(), 2u);
  ::kill(sleep_pid, SIGKILL);
  EXPECT_EQ(child.wait(10s).exit_code, 0);
  EXPECT_TRUE(descendants_of(::getpid()).empty());
}

TEST_F(SupportTest, RunCapturesOutputStatusAndUsage) {
  auto r = run({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  EXPECT_FALSE(r.signaled);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_GT(r.peak_rss_bytes, 0u);
  EXPECT_GT(r.seconds, 0.0);
  auto killed = run({"/bin/sh", "-c", "kill -TERM $$"});
  EXPECT_TRUE(killed.signaled) << killed.describe();
  EXPECT_EQ(killed.signal, SIGTERM);
  EXPECT_EQ(killed.exit_code, -1);
  static RunResult slow; // EXPECT_NONFATAL_FAILURE's statement sees no locals
  EXPECT_NONFATAL_FAILURE(slow = run({"/bin/sh", "-c", "sleep 30; exit 0"}, {.timeout = 200ms}),
                          "still running after 200 ms; killed");
  EXPECT_TRUE(slow.timed_out);
  EXPECT_TRUE(slow.signaled);
  EXPECT_LT(slow.seconds, 10.0);
}

TEST_F(SupportTest, ProgramsSeeTheTestEnvironmentNotTheDevelopersSettings) {
  ASSERT_EQ(::setenv("NEURON_CC_FLAGS", "--cache_dir=/from/the/shell", 1), 0);
  ASSERT_EQ(::setenv("STANDIN_CC_FAULT", "fail", 1), 0);
  ASSERT_EQ(::setenv("RANK", "3", 1), 0);
  ASSERT_EQ(::setenv("NPC_SUPPORT_KEPT", "kept", 1), 0);
  auto r = run({"/usr/bin/env"}, {.set_env = {{"NEURON_CC", "/x"}}, .unset_env = {"NPC_SUPPORT_GONE"}});
  ::unsetenv("NEURON_CC_FLAGS");
  ::unsetenv("STANDIN_CC_FAULT");
  ::unsetenv("RANK");
  ::unsetenv("NPC_SUPPORT_KEPT");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string lines = "\n" + r.out;
  EXPECT_EQ(lines.find("\nNEURON_CC_FLAGS="), std::string::npos) << r.out;
  EXPECT_EQ(lines.find("\nSTANDIN_CC_FAULT="), std::string::npos) << r.out;
  EXPECT_EQ(lines.find("\nRANK="), std::string::npos) << r.out;
  EXPECT_NE(lines.find("\nNPC_SUPPORT_KEPT=kept\n"), std::string::npos) << r.out;
  EXPECT_NE(lines.find("\nNEURON_CC=/x\n"), std::string::npos) << r.out;
}

TEST_F(SupportTest, WaitUntilReturnsWhenTheConditionHoldsAndFalseAtTheDeadline) {
  int calls = 0;
  EXPECT_TRUE(wait_until([&] { return ++calls == 3; }, 5s, 1ms));
  EXPECT_EQ(calls, 3);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(wait_until([] { return false; }, 50ms));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 50ms);
}

TEST_F(SupportTest, FilesAreWrittenOrTheTestFails) {
  write_text(dir() / "a" / "b.txt", "one\ntwo\n");
  EXPECT_EQ(read_text(dir() / "a" / "b.txt"), "one\ntwo\n");
  EXPECT_EQ(count_lines(dir() / "a" / "b.txt"), 2u);
  EXPECT_EQ(names_in(dir() / "a"), std::vector<std::string>{"b.txt"});
  // printf 'one\ntwo\n' | sha256sum
  EXPECT_EQ(file_sha256(dir() / "a" / "b.txt"), "c3f9c8c283a2b1f2f1896f27a01cbe3cddc0c9d93f752e4639035a0f5b36f6e8");
  EXPECT_EQ(file_sha256(dir() / "missing"), "");
  // A directory where the file should go: the write cannot happen.
  static fs::path in_the_way; // EXPECT_NONFATAL_FAILURE's statement sees no locals
  in_the_way = dir() / "in-the-way";
  fs::create_directories(in_the_way);
  EXPECT_NONFATAL_FAILURE(write_text(in_the_way, "x"), "cannot write");
  write_executable(dir() / "run.sh", "#!/bin/sh\necho ran\n");
  EXPECT_EQ(run({(dir() / "run.sh").string()}).out, "ran\n");
}

// Where a stopped server was: a connect is refused at once, while the port
// stays taken.
TEST(RefusedPortTest, RefusesAConnectAtOnceAndKeepsThePort) {
  npc::test::RefusedPort port;
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_GT(port.port(), 0);
  EXPECT_EQ(port.endpoint(), "http://127.0.0.1:" + std::to_string(port.port()));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port.port()));
  int connected = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  int error = errno;
  ::close(fd);
  EXPECT_EQ(connected, -1);
  EXPECT_EQ(error, ECONNREFUSED);
  // Nobody else can bind it while it is held.
  int other = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(other, 0);
  EXPECT_NE(::bind(other, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ::close(other);
}

// Without the run's gateway, an S3 test fails saying how to start one.
TEST_F(SupportTest, ATenantWithoutAGatewaySaysHowToStartOne) {
  ASSERT_EQ(::setenv("NPC_TEST_RGW_DIR", dir().c_str(), 1), 0);
  npc::test::RgwTenant tenant;
  auto created = tenant.create("test-bucket");
  ::unsetenv("NPC_TEST_RGW_DIR");
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error(), "the test run's RADOS Gateway is not running (no " + (dir() / "endpoint").string() +
                                 "): run the tests through ctest, whose fixture \"rgw\" starts it, or start it "
                                 "with 'tests/support/rgw.sh start " + dir().string() + "'");
}

TEST(TrainTotalField, ReadsTheTotalLineOnly) {
  std::string out = "standin_train: rank 0/2: steps=3 graphs=2 jit_compiles=5 cache_hits=0\n"
                    "standin_train: total: ranks=2 graphs=2 jit_compiles=7 cache_hits=1 compile_wait_s=0.1\n";
  EXPECT_EQ(train_total_field(out, "jit_compiles"), 7);
  EXPECT_EQ(train_total_field(out, "cache_hits"), 1);
  EXPECT_EQ(train_total_field(out, "missing"), -1);
  EXPECT_EQ(train_total_field("standin_train: rank 0/1: jit_compiles=5\n", "jit_compiles"), -1);
}

} // namespace
} // namespace npc::test
