// util/temp_cleanup: what a process is writing under a temporary name goes
// when a terminating signal ends it, and the exit status still names the signal.

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <npc/util/fs.hpp>
#include <npc/util/temp_cleanup.hpp>

#include "test_support.hpp"

namespace npc::util {
namespace {

class TempCleanupTest : public test::TempDirTest {
protected:
  // Runs `body` in a child, which then raises `signal`; returns its status.
  template <typename Body>
  int status_of_child(Body body, int signal) {
    pid_t pid = ::fork();
    if (pid == 0) {
      body();
      ::raise(signal);
      ::_exit(99); // the signal did not end us
    }
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    return status;
  }
};

TEST_F(TempCleanupTest, ASignalRemovesRegisteredFilesAndFoldersOnly) {
  fs::path file = dir() / ".tmp-out.tar.1.abc";
  fs::path folder = dir() / ".tmp-work-xyz";
  fs::path released = dir() / ".tmp-kept";
  fs::path unregistered = dir() / "user-file";
  int status = status_of_child(
      [&] {
        test::write_text(file, "partial");
        test::write_text(released, "published meanwhile");
        test::write_text(unregistered, "not ours");
        std::ignore = ensure_dir(folder / "a" / "b");
        for (int i = 0; i < 300; ++i) test::write_text(folder / "a" / ("f" + std::to_string(i)), "x");
        test::write_text(folder / "a" / "b" / "deep", "x");
        static TempCleanup file_cleanup(file);
        static TempCleanup folder_cleanup(folder);
        static TempCleanup released_cleanup(released);
        released_cleanup.release();
      },
      SIGTERM);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(folder));
  EXPECT_TRUE(fs::exists(released));
  EXPECT_TRUE(fs::exists(unregistered));
}

TEST_F(TempCleanupTest, AnAtomicFileNotCommittedGoesOnSigint) {
  fs::path final_path = dir() / "report.json";
  fs::path temp;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  int status = status_of_child(
      [&] {
        static AtomicFile out(final_path);
        if (!out.open()) ::_exit(98);
        std::ignore = out.write("{\"half\":");
        std::string name = out.temp_path().string();
        std::ignore = ::write(pipe_fds[1], name.data(), name.size());
      },
      SIGINT);
  ::close(pipe_fds[1]);
  char buffer[4096];
  ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
  ::close(pipe_fds[0]);
  ASSERT_GT(n, 0);
  temp = std::string(buffer, static_cast<std::size_t>(n));
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_EQ(temp.parent_path(), dir());
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_FALSE(fs::exists(final_path));
  EXPECT_TRUE(test::names_in(dir()).empty());
}

} // namespace
} // namespace npc::util
