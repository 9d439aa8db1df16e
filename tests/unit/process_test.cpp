// util/process: spawning children with an explicit argv, environment and
// working directory, and reading how they ended.

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <npc/util/fs.hpp>
#include <npc/util/process.hpp>

#include "test_support.hpp"

namespace npc::util {
namespace {

using namespace std::chrono_literals;

// Every spawn test runs twice: through posix_spawn, and through fork+exec
// with die_with_parent (PR_SET_PDEATHSIG), which must behave the same.
class ProcessTest : public test::TempDirTest, public ::testing::WithParamInterface<bool> {
protected:
  SpawnOptions base_options() const {
    SpawnOptions options;
    options.die_with_parent = GetParam();
    return options;
  }
};

ExitStatus run_to_end(SpawnOptions options) {
  auto child = spawn(options);
  EXPECT_TRUE(child.ok()) << (child.ok() ? "" : child.error());
  if (!child.ok()) return ExitStatus{false, -1, 0, 0};
  return wait_child(child->pid);
}

TEST_P(ProcessTest, SpawnWithEnvironmentAndWorkingDirectory) {
  fs::path work = dir() / "work dir";
  fs::create_directories(work);
  Environment env = Environment::current();
  env.set("NPC_TEST_VALUE", "hello world; $(not expanded)");
  env.set("NPC_TEST_GONE", "still here");
  env.unset("NPC_TEST_GONE");
  SpawnOptions options = base_options();
  options.argv = {"/bin/sh", "-c",
                  "printf '%s|%s|%s' \"$NPC_TEST_VALUE\" \"${NPC_TEST_GONE-unset}\" \"$(pwd -P)\" > out.txt"};
  options.environment = env;
  options.working_dir = work;
  ExitStatus status = run_to_end(options);
  EXPECT_TRUE(status.success()) << status.describe();
  EXPECT_EQ(test::read_text(work / "out.txt"),
            "hello world; $(not expanded)|unset|" + fs::canonical(work).string());
}

TEST_P(ProcessTest, ArgumentsArePassedWithoutAShell) {
  SpawnOptions options = base_options();
  options.argv = {"/bin/sh", "-c", "printf '%s\\n' \"$@\" > args.txt", "sh", "a b", "$HOME", "'q'", ""};
  options.working_dir = dir();
  EXPECT_TRUE(run_to_end(options).success());
  EXPECT_EQ(test::read_text(dir() / "args.txt"), "a b\n$HOME\n'q'\n\n");
}

TEST_P(ProcessTest, ExitCode) {
  SpawnOptions options = base_options();
  options.argv = {"/bin/sh", "-c", "exit 3"};
  ExitStatus status = run_to_end(options);
  EXPECT_FALSE(status.signaled);
  EXPECT_EQ(status.code, 3);
  EXPECT_FALSE(status.success());
  EXPECT_EQ(status.describe(), "exit code 3");
  EXPECT_EQ(status.shell_code(), 3);

  options.argv = {"/bin/sh", "-c", "exit 0"};
  ExitStatus ok = run_to_end(options);
  EXPECT_TRUE(ok.success());
  EXPECT_EQ(ok.describe(), "exit code 0");
}

TEST_P(ProcessTest, KilledBySignal) {
  SpawnOptions options = base_options();
  options.argv = {"/bin/sh", "-c", "kill -9 $$"};
  ExitStatus status = run_to_end(options);
  EXPECT_TRUE(status.signaled);
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_FALSE(status.success());
  EXPECT_EQ(status.describe(), "killed by signal SIGKILL");
  EXPECT_EQ(status.shell_code(), 137);
}

TEST(SignalName, KnownAndUnknown) {
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(77), "signal 77");
}

TEST_P(ProcessTest, ChildHasItsOwnProcessGroupAndDefaultSignals) {
  SpawnOptions options = base_options();
  // SIGTERM ignored here must be back to its default in the child.
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGTERM, &ignore, &old), 0);
  options.argv = {"/bin/sh", "-c", "exec sleep 30"};
  auto child = spawn(options);
  ::sigaction(SIGTERM, &old, nullptr);
  ASSERT_TRUE(child.ok()) << child.error();
  EXPECT_EQ(::getpgid(child->pid), child->pid);
  EXPECT_TRUE(process_alive(child->pid));
  EXPECT_EQ(try_wait_child(child->pid), std::nullopt);
  kill_process_group(child->pid, SIGTERM);
  ExitStatus status = wait_child(child->pid);
  EXPECT_TRUE(status.signaled);
  EXPECT_EQ(status.signal, SIGTERM);
  EXPECT_EQ(status.describe(), "killed by signal SIGTERM");
}

TEST_P(ProcessTest, TryWaitChildSeesTheEnd) {
  SpawnOptions options = base_options();
  options.argv = {"/bin/sh", "-c", "exit 7"};
  auto child = spawn(options);
  ASSERT_TRUE(child.ok()) << child.error();
  std::optional<ExitStatus> status;
  for (int i = 0; i < 500 && !status; ++i) {
    status = try_wait_child(child->pid);
    if (!status) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->code, 7);
  EXPECT_FALSE(status->signaled);
}

TEST_P(ProcessTest, StdinIsDevNull) {
  SpawnOptions options = base_options();
  options.argv = {"/bin/sh", "-c", "wc -c > count.txt"};
  options.working_dir = dir();
  EXPECT_TRUE(run_to_end(options).success());
  EXPECT_EQ(test::read_text(dir() / "count.txt"), "0\n");
}

TEST_P(ProcessTest, OutputToFileAppends) {
  fs::path log = dir() / "child.log";
  test::write_text(log, "first\n");
  SpawnOptions options = base_options();
  options.argv = {"/bin/sh", "-c", "echo out; echo err >&2; echo out2"};
  options.output = OutputTo::file;
  options.output_file = log;
  EXPECT_TRUE(run_to_end(options).success());
  EXPECT_TRUE(run_to_end(options).success());
  EXPECT_EQ(test::read_text(log), "first\nout\nerr\nout2\nout\nerr\nout2\n");
}

TEST_P(ProcessTest, OutputToPipe) {
  SpawnOptions options = base_options();
  options.argv = {"/bin/sh", "-c", "echo out; echo err >&2"};
  options.output = OutputTo::pipe;
  auto child = spawn(options);
  ASSERT_TRUE(child.ok()) << child.error();
  ASSERT_GE(child->output_fd, 0);
  std::string text;
  char buffer[256];
  ssize_t n = 0;
  while ((n = ::read(child->output_fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(n));
  ::close(child->output_fd);
  EXPECT_TRUE(wait_child(child->pid).success());
  EXPECT_EQ(text, "out\nerr\n");
}

TEST_P(ProcessTest, ProgramIsLookedUpOnTheChildsPath) {
  fs::path bin = dir() / "bin";
  fs::create_directories(bin);
  test::write_text(bin / "npc-test-hello", "#!/bin/sh\necho hello > \"$1\"\n");
  fs::permissions(bin / "npc-test-hello", fs::perms::owner_all);
  Environment env = Environment::current();
  env.set("PATH", "/nonexistent:" + bin.string() + ":/bin:/usr/bin");
  SpawnOptions options = base_options();
  options.argv = {"npc-test-hello", (dir() / "said.txt").string()};
  options.environment = env;
  EXPECT_TRUE(run_to_end(options).success());
  EXPECT_EQ(test::read_text(dir() / "said.txt"), "hello\n");
}

TEST(FindExecutable, SearchesPathEntriesInOrder) {
  auto sh = find_executable("sh", std::string("/nonexistent-dir:/bin:/usr/bin"));
  ASSERT_TRUE(sh.ok()) << sh.error();
  EXPECT_EQ(*sh, fs::path("/bin/sh"));
  auto direct = find_executable("/bin/sh", std::nullopt);
  ASSERT_TRUE(direct.ok()) << direct.error();
  EXPECT_EQ(*direct, fs::path("/bin/sh"));
}

TEST(FindExecutable, FailureNamesPath) {
  auto missing = find_executable("npc-no-such-program", std::string("/nope/a:/nope/b"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(), "npc-no-such-program was not found on PATH (/nope/a:/nope/b)");
  auto with_slash = find_executable("/nope/npc-no-such-program", std::string("/bin"));
  ASSERT_FALSE(with_slash.ok());
  EXPECT_NE(with_slash.error().find("/nope/npc-no-such-program"), std::string::npos) << with_slash.error();
  // A file that is not executable is not found.
  auto not_exec = find_executable("passwd", std::string("/etc"));
  EXPECT_FALSE(not_exec.ok());
}

TEST_P(ProcessTest, SpawningAMissingProgramFailsNamingPath) {
  Environment env = Environment::current();
  env.set("PATH", "/nope/x");
  SpawnOptions options = base_options();
  options.argv = {"npc-no-such-program"};
  options.environment = env;
  auto child = spawn(options);
  ASSERT_FALSE(child.ok());
  EXPECT_NE(child.error().find("PATH"), std::string::npos) << child.error();
  EXPECT_NE(child.error().find("/nope/x"), std::string::npos) << child.error();
  SpawnOptions empty;
  EXPECT_FALSE(spawn(empty).ok());
}

TEST_P(ProcessTest, MissingWorkingDirectoryIsNotRunIn) {
  SpawnOptions options = base_options();
  options.argv = {"/bin/sh", "-c", "touch ran.txt"};
  options.working_dir = dir() / "missing";
  auto child = spawn(options);
  if (child.ok()) {
    ExitStatus status = wait_child(child->pid);
    EXPECT_FALSE(status.success()) << status.describe();
  }
  EXPECT_FALSE(fs::exists(dir() / "missing"));
  EXPECT_FALSE(fs::exists(dir() / "ran.txt"));
}

TEST(EnvironmentTest, SetGetUnsetEntries) {
  Environment env;
  EXPECT_TRUE(env.entries().empty());
  env.set("B", "2");
  env.set("A", "1=one");
  env.set("B", "two");
  EXPECT_EQ(env.get("A"), std::string("1=one"));
  EXPECT_EQ(env.get("B"), std::string("two"));
  EXPECT_EQ(env.get("C"), std::nullopt);
  EXPECT_EQ(env.entries(), (std::vector<std::string>{"A=1=one", "B=two"}));
  env.unset("A");
  EXPECT_EQ(env.entries(), std::vector<std::string>{"B=two"});
}

TEST(ProcessAlive, DeadAndInvalid) {
  EXPECT_TRUE(process_alive(::getpid()));
  EXPECT_FALSE(process_alive(0));
  EXPECT_FALSE(process_alive(-1));
}

INSTANTIATE_TEST_SUITE_P(Spawn, ProcessTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "fork_exec" : "posix_spawn"; });

// The point of fork+exec: the kernel kills the child when its parent dies.
TEST(DieWithParent, ChildIsKilledWhenItsParentDies) {
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  pid_t parent = ::fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    ::close(report[0]);
    SpawnOptions options;
    options.argv = {"/bin/sleep", "30"};
    options.die_with_parent = true;
    auto child = spawn(options);
    pid_t pid = child.ok() ? child->pid : -1;
    std::ignore = ::write(report[1], &pid, sizeof pid);
    ::pause(); // until killed
    ::_exit(0);
  }
  ::close(report[1]);
  pid_t grandchild = -1;
  ASSERT_EQ(::read(report[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  ::close(report[0]);
  ASSERT_GT(grandchild, 0);
  ASSERT_TRUE(process_alive(grandchild));
  ::kill(parent, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(parent, &status, 0), parent);
  // The orphan is reparented (to init or a subreaper) and reaped there; it
  // must be gone or a zombie within moments.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::string stat = test::read_text("/proc/" + std::to_string(grandchild) + "/stat");
    gone = stat.empty() || stat.find(") Z ") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(gone) << "the child outlived its parent's SIGKILL";
  std::ignore = ::waitpid(grandchild, &status, WNOHANG); // ours only if we are a subreaper
}

} // namespace
} // namespace npc::util
