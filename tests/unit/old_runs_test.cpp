// launcher/old_runs: the workdir keeps the last few runs' files and those of
// launchers running now, and nothing else of earlier runs.

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <npc/launcher/old_runs.hpp>

#include "test_support.hpp"

namespace npc::launcher {
namespace {

class OldRunsTest : public test::TempDirTest {
protected:
  // A run's three names, written `age` seconds ago.
  void add_run(long pid, int age) {
    std::string tag = "pid" + std::to_string(pid);
    for (const auto& name : {"trial_run_" + tag + "_log.txt", "cache_path_" + tag + "_log.txt"}) {
      test::write_text(dir() / name, "log");
      set_age(dir() / name, age);
    }
    test::write_text(dir() / ("compile_logs_" + tag) / "MODULE_a+b.log", "log");
    set_age(dir() / ("compile_logs_" + tag) / "MODULE_a+b.log", age);
    set_age(dir() / ("compile_logs_" + tag), age);
  }
  static void set_age(const fs::path& path, int age) {
    fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::seconds(age));
  }
  // A pid no process has: a child that has exited and been reaped.
  static long dead_pid() {
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    ::waitpid(pid, nullptr, 0);
    return pid;
  }
};

TEST_F(OldRunsTest, KeepsTheNewestRunsAndThoseRunningAndRemovesTheRest) {
  std::vector<long> dead;
  for (int i = 0; i < 8; ++i) {
    dead.push_back(dead_pid());
    add_run(dead.back(), 100 * (i + 1)); // dead[0] newest
  }
  add_run(::getpid(), 10000); // oldest of all, but running
  test::write_text(dir() / "notes.txt", "the user's");
  test::write_text(dir() / "trial_run_pidx_log.txt", "not a run's name");

  auto removed = remove_old_runs(dir(), 5);
  EXPECT_EQ(removed.size(), 3u * 3u) << "the three oldest dead runs, three names each";
  for (int i = 0; i < 8; ++i) {
    bool kept = i < 5;
    std::string tag = "pid" + std::to_string(dead[static_cast<std::size_t>(i)]);
    EXPECT_EQ(fs::exists(dir() / ("trial_run_" + tag + "_log.txt")), kept) << i;
    EXPECT_EQ(fs::exists(dir() / ("cache_path_" + tag + "_log.txt")), kept) << i;
    EXPECT_EQ(fs::exists(dir() / ("compile_logs_" + tag)), kept) << i;
  }
  EXPECT_TRUE(fs::exists(dir() / ("trial_run_pid" + std::to_string(::getpid()) + "_log.txt")));
  EXPECT_TRUE(fs::exists(dir() / "notes.txt"));
  EXPECT_TRUE(fs::exists(dir() / "trial_run_pidx_log.txt"));
}

// A launcher in another PID namespace (a container, a cluster test's host)
// sharing the workdir: its pid means nothing here, no process has it, yet it
// runs. Its log folder's flock says so, from any namespace of the host.
TEST_F(OldRunsTest, ARunHoldingItsFolderLockIsKeptThoughNoProcessHereHasItsPid) {
  const long elsewhere = dead_pid();
  add_run(elsewhere, 10000); // the oldest
  util::UniqueFd held = mark_run_alive(dir() / ("compile_logs_pid" + std::to_string(elsewhere)));
  ASSERT_TRUE(held.valid());
  const long gone = dead_pid();
  add_run(gone, 9000); // older than the kept runs, and its lock free
  for (int i = 0; i < 5; ++i) add_run(dead_pid(), 100 * (i + 1));
  auto removed = remove_old_runs(dir(), 5);
  EXPECT_EQ(removed.size(), 3u) << "the run whose lock is free, three names";
  EXPECT_TRUE(fs::exists(dir() / ("compile_logs_pid" + std::to_string(elsewhere))));
  EXPECT_TRUE(fs::exists(dir() / ("trial_run_pid" + std::to_string(elsewhere) + "_log.txt")));
  EXPECT_FALSE(fs::exists(dir() / ("compile_logs_pid" + std::to_string(gone))));
  // Let go (the run ended): the next look removes it.
  held.reset();
  EXPECT_EQ(remove_old_runs(dir(), 5).size(), 3u);
  EXPECT_FALSE(fs::exists(dir() / ("compile_logs_pid" + std::to_string(elsewhere))));
}

TEST_F(OldRunsTest, NothingToDoInAMissingOrSmallWorkdir) {
  EXPECT_TRUE(remove_old_runs(dir() / "absent").empty());
  add_run(dead_pid(), 5);
  EXPECT_TRUE(remove_old_runs(dir(), 5).empty());
}

} // namespace
} // namespace npc::launcher
