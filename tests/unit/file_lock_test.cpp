// util/file_lock: flock-based locks with a holder record, within one process
// and across forked processes.

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <npc/util/file_lock.hpp>
#include <npc/util/fs.hpp>

#include "test_support.hpp"

namespace npc::util {
namespace {

using namespace std::chrono_literals;

// A forked child that takes a lock and holds it until killed. The parent
// reads one byte from the pipe once the child holds it.
class LockHoldingChild {
public:
  explicit LockHoldingChild(const fs::path& path) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[0]);
      auto lock = FileLock::try_acquire(path, LockHolder::self("holding-child"));
      char ok = (lock.ok() && lock->has_value()) ? 'y' : 'n';
      if (::write(fds[1], &ok, 1) != 1) ::_exit(2);
      for (;;) ::pause();
    }
    ::close(fds[1]);
    char ok = 0;
    if (pid_ > 0 && ::read(fds[0], &ok, 1) == 1) holds_ = ok == 'y';
    ::close(fds[0]);
  }
  ~LockHoldingChild() { kill_and_wait(); }
  LockHoldingChild(const LockHoldingChild&) = delete;
  LockHoldingChild& operator=(const LockHoldingChild&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] bool holds() const { return holds_; }
  // SIGKILL, then reap; returns the wait status.
  int kill_and_wait() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

private:
  pid_t pid_ = -1;
  bool holds_ = false;
};

class FileLockTest : public test::TempDirTest {
protected:
  fs::path lock_path() const { return dir() / "x.lock"; }
};

TEST_F(FileLockTest, SecondTryInTheSameProcessFindsItHeld) {
  auto first = FileLock::try_acquire(lock_path(), LockHolder::self("first"));
  ASSERT_TRUE(first.ok()) << first.error();
  ASSERT_TRUE(first->has_value());
  EXPECT_TRUE((*first)->held());
  EXPECT_EQ((*first)->path(), lock_path());
  auto second = FileLock::try_acquire(lock_path(), LockHolder::self("second"));
  ASSERT_TRUE(second.ok()) << second.error();
  EXPECT_FALSE(second->has_value());
  // The record names the first holder.
  auto holder = LockHolder::parse(test::read_text(lock_path()));
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->tool, "first");
  EXPECT_EQ(holder->pid, ::getpid());
}

TEST_F(FileLockTest, RecordIsTheSerializedHolder) {
  LockHolder me{.pid = 4242, .host = "host-a", .boot_id = {}, .process_start = 0, .start_unix = 1700000000, .tool = "tool-b"};
  auto lock = FileLock::try_acquire(lock_path(), me);
  ASSERT_TRUE(lock.ok() && lock->has_value());
  EXPECT_EQ(test::read_text(lock_path()), "pid=4242 host=host-a start=1700000000 tool=tool-b\n");
}

TEST_F(FileLockTest, ReleaseUnlinksAndFreesTheLock) {
  auto first = FileLock::try_acquire(lock_path(), LockHolder::self("t"));
  ASSERT_TRUE(first.ok() && first->has_value());
  (*first)->release();
  EXPECT_FALSE((*first)->held());
  EXPECT_FALSE(fs::exists(lock_path()));
  (*first)->release(); // twice is harmless
  auto again = FileLock::try_acquire(lock_path(), LockHolder::self("t"));
  ASSERT_TRUE(again.ok() && again->has_value());
}

TEST_F(FileLockTest, DestructorReleases) {
  {
    auto lock = FileLock::try_acquire(lock_path(), LockHolder::self("t"));
    ASSERT_TRUE(lock.ok() && lock->has_value());
    EXPECT_TRUE(fs::exists(lock_path()));
  }
  EXPECT_FALSE(fs::exists(lock_path()));
  EXPECT_EQ(probe_lock(lock_path()), LockState::absent);
}

TEST_F(FileLockTest, MovedLockIsReleasedOnce) {
  auto lock = FileLock::try_acquire(lock_path(), LockHolder::self("t"));
  ASSERT_TRUE(lock.ok() && lock->has_value());
  FileLock moved = std::move(**lock);
  EXPECT_FALSE((*lock)->held());
  EXPECT_TRUE(moved.held());
  EXPECT_EQ(probe_lock(lock_path()), LockState::held);
  moved.release();
  EXPECT_EQ(probe_lock(lock_path()), LockState::absent);
}

TEST_F(FileLockTest, MissingDirectoryIsAnError) {
  auto lock = FileLock::try_acquire(dir() / "no-such-dir" / "x.lock", LockHolder::self("t"));
  ASSERT_FALSE(lock.ok());
  EXPECT_NE(lock.error().find("no-such-dir"), std::string::npos) << lock.error();
}

TEST(LockHolder, SerializeParseRoundTrip) {
  LockHolder holder{.pid = 1234, .host = "host-a.example", .boot_id = {}, .process_start = 0, .start_unix = 1700000000, .tool = "neuron_cc_wrapper"};
  EXPECT_EQ(holder.serialize(), "pid=1234 host=host-a.example start=1700000000 tool=neuron_cc_wrapper");
  auto parsed = LockHolder::parse(holder.serialize());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->pid, 1234);
  EXPECT_EQ(parsed->host, "host-a.example");
  EXPECT_EQ(parsed->start_unix, 1700000000);
  EXPECT_EQ(parsed->tool, "neuron_cc_wrapper");
  // Only the first line counts.
  auto with_tail = LockHolder::parse(holder.serialize() + "\ngarbage here\n");
  ASSERT_TRUE(with_tail.has_value());
  EXPECT_EQ(with_tail->pid, 1234);
}

TEST(LockHolder, DescribeNamesPidHostToolAndTime) {
  LockHolder holder{.pid = 1234, .host = "host-a", .boot_id = {}, .process_start = 0, .start_unix = 1700000000, .tool = "neuron_cc_wrapper"};
  EXPECT_EQ(holder.describe(), "pid 1234 on host-a (neuron_cc_wrapper), since 2023-11-14T22:13:20Z");
  holder.tool = "";
  EXPECT_EQ(holder.describe(), "pid 1234 on host-a, since 2023-11-14T22:13:20Z");
}

TEST(LockHolder, SelfIsThisProcess) {
  LockHolder me = LockHolder::self("me");
  EXPECT_EQ(me.pid, ::getpid());
  EXPECT_EQ(me.tool, "me");
  EXPECT_FALSE(me.host.empty());
  EXPECT_NEAR(static_cast<double>(me.start_unix), static_cast<double>(std::time(nullptr)), 5.0);
}

// A holder that has exited but is not reaped yet (a zombie: its parent is
// slow, or was killed and the reaper has not come by) holds nothing: its
// pid still answers kill(pid, 0), but its lock must not wait for the reap.
TEST(LockHolder, AZombieHolderIsDead) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    LockHolder me = LockHolder::self("zombie");
    _exit(me.process_start != 0 ? 0 : 1);
  }
  LockHolder holder;
  holder.pid = child;
  holder.host = this_host();
  holder.boot_id = this_boot_id();
  // Its start time, read while it may still run or already be a zombie.
  auto zombie = [&] {
    auto stat = read_file("/proc/" + std::to_string(child) + "/stat");
    return stat && stat->find(") Z ") != std::string::npos;
  };
  ASSERT_TRUE(npc::test::wait_until(zombie, std::chrono::seconds(10))) << "the child never became a zombie";
  EXPECT_EQ(::kill(child, 0), 0) << "a zombie answers kill(pid, 0)";
  EXPECT_FALSE(process_start_ticks(child).has_value());
  holder.process_start = 12345; // any: a zombie is dead whatever its start
  EXPECT_EQ(liveness(holder), Liveness::dead);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(LockHolder, GarbageIsRejected) {
  for (const char* text : {"", "hello", "pid=abc", "pid=0", "pid=-5", "pid=12x", "host=x tool=y",
                           "pid=1 start=abc", "pid=1 start=5s", "pid=1 junk", "pid=99999999999",
                           "\npid=1"})
    EXPECT_FALSE(LockHolder::parse(text).has_value()) << "[" << text << "]";
}

TEST_F(FileLockTest, ProbeAbsentFreeHeld) {
  std::optional<LockHolder> holder;
  EXPECT_EQ(probe_lock(lock_path(), &holder), LockState::absent);
  EXPECT_FALSE(holder.has_value());

  test::write_text(lock_path(), "pid=777 host=gone start=5 tool=dead\n");
  EXPECT_EQ(probe_lock(lock_path(), &holder), LockState::free);
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->pid, 777);
  EXPECT_EQ(holder->host, "gone");
  fs::remove(lock_path());

  auto lock = FileLock::try_acquire(lock_path(), LockHolder::self("holder-tool"));
  ASSERT_TRUE(lock.ok() && lock->has_value());
  holder.reset();
  EXPECT_EQ(probe_lock(lock_path(), &holder), LockState::held);
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->pid, ::getpid());
  EXPECT_EQ(holder->tool, "holder-tool");
  // Probing does not take or disturb the lock.
  EXPECT_EQ(probe_lock(lock_path()), LockState::held);
  auto other = FileLock::try_acquire(lock_path(), LockHolder::self("other"));
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
}

TEST_F(FileLockTest, RemoveLockFile) {
  EXPECT_FALSE(remove_lock_file(lock_path(), false)); // nothing there
  test::write_text(lock_path(), "pid=777 host=gone start=5 tool=dead\n");
  EXPECT_TRUE(remove_lock_file(lock_path(), false));
  EXPECT_FALSE(fs::exists(lock_path()));

  auto lock = FileLock::try_acquire(lock_path(), LockHolder::self("t"));
  ASSERT_TRUE(lock.ok() && lock->has_value());
  EXPECT_FALSE(remove_lock_file(lock_path(), false));
  EXPECT_TRUE(fs::exists(lock_path()));
  EXPECT_TRUE(remove_lock_file(lock_path(), true));
  EXPECT_FALSE(fs::exists(lock_path()));
}

// A FIFO at a lock's path (put there by hand or another tool) is never
// opened for a blocking read: judged held, as any file that is no lock, and
// removed only when forced.
TEST_F(FileLockTest, AFifoAtTheLockPathIsNeverWaitedOn) {
  ASSERT_EQ(::mkfifo(lock_path().c_str(), 0600), 0);
  std::optional<LockHolder> holder;
  EXPECT_EQ(probe_lock(lock_path(), &holder), LockState::held);
  EXPECT_FALSE(holder.has_value());
  EXPECT_FALSE(remove_lock_file(lock_path(), false));
  EXPECT_TRUE(fs::exists(fs::symlink_status(lock_path())));
  EXPECT_TRUE(remove_lock_file(lock_path(), true));
  EXPECT_FALSE(fs::exists(fs::symlink_status(lock_path())));
}

TEST_F(FileLockTest, LockOfAChildKilledBySigkillIsFreeAtOnce) {
  LockHoldingChild child(lock_path());
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE(child.holds());
  std::optional<LockHolder> holder;
  EXPECT_EQ(probe_lock(lock_path(), &holder), LockState::held);
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->pid, child.pid());
  EXPECT_EQ(holder->tool, "holding-child");

  int status = child.kill_and_wait();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  // The dead holder's file is still there, but nobody holds it.
  EXPECT_EQ(probe_lock(lock_path()), LockState::free);
  auto start = std::chrono::steady_clock::now();
  auto lock = FileLock::acquire(lock_path(), LockHolder::self("parent"), 2s);
  auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(lock.ok()) << lock.error();
  EXPECT_TRUE(lock->held());
  EXPECT_LT(waited, 200ms);
}

TEST_F(FileLockTest, AcquireTimeoutNamesTheHolder) {
  LockHoldingChild child(lock_path());
  ASSERT_TRUE(child.holds());
  int waits = 0;
  std::optional<LockHolder> seen;
  auto start = std::chrono::steady_clock::now();
  auto lock = FileLock::acquire(lock_path(), LockHolder::self("parent"), 1000ms,
                                [&](const std::optional<LockHolder>& holder) {
                                  ++waits;
                                  seen = holder;
                                });
  auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(lock.ok());
  EXPECT_GE(waited, 1000ms);
  EXPECT_LT(waited, 2500ms); // the last backoff sleep is at most 100 ms; the rest is slack for a loaded machine
  const std::string& message = lock.error();
  EXPECT_NE(message.find("timed out after 1.0s"), std::string::npos) << message;
  EXPECT_NE(message.find(lock_path().string()), std::string::npos) << message;
  EXPECT_NE(message.find("pid " + std::to_string(child.pid())), std::string::npos) << message;
  EXPECT_NE(message.find("(holding-child)"), std::string::npos) << message;
  EXPECT_EQ(waits, 1);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->pid, child.pid());
}

// Regression (fixed): FileLock::acquire reports the timeout as timeout.count() / 1000 whole
// seconds, so a wait shorter than one second is reported as "timed out after
// 0s" (and 1.9 s as "1s"). Suggested fix: format the milliseconds (e.g. with
// util::format_seconds(timeout.count() / 1000.0)).
TEST_F(FileLockTest, SubSecondTimeoutIsNotReportedAsZeroSeconds) {
  LockHoldingChild child(lock_path());
  ASSERT_TRUE(child.holds());
  auto lock = FileLock::acquire(lock_path(), LockHolder::self("parent"), 300ms);
  ASSERT_FALSE(lock.ok());
  EXPECT_EQ(lock.error().find("after 0s"), std::string::npos) << lock.error();
}

TEST_F(FileLockTest, AcquireWaitsForARelease) {
  auto first = FileLock::try_acquire(lock_path(), LockHolder::self("first"));
  ASSERT_TRUE(first.ok() && first->has_value());
  std::thread releaser([&] {
    std::this_thread::sleep_for(150ms);
    (*first)->release();
  });
  auto start = std::chrono::steady_clock::now();
  auto second = FileLock::acquire(lock_path(), LockHolder::self("second"), 5s);
  auto waited = std::chrono::steady_clock::now() - start;
  releaser.join();
  ASSERT_TRUE(second.ok()) << second.error();
  EXPECT_GE(waited, 140ms);
  EXPECT_LT(waited, 2s);
  auto holder = LockHolder::parse(test::read_text(lock_path()));
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->tool, "second");
}

// 16 processes each increment a shared counter 50 times under the lock; the
// counter is read and rewritten (temp + rename) inside the critical section,
// so any overlap loses an increment.
TEST_F(FileLockTest, SixteenProcessesCountToEightHundred) {
  constexpr int kChildren = 16, kRounds = 50;
  const fs::path counter = dir() / "counter";
  test::write_text(counter, "0");
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      for (int round = 0; round < kRounds && code == 0; ++round) {
        auto lock = FileLock::acquire(lock_path(), LockHolder::self("counter"), 30s);
        if (!lock) {
          code = 3;
          break;
        }
        auto text = read_file(counter);
        if (!text) {
          code = 4;
          break;
        }
        long value = std::stol(*text);
        if (!write_file_atomic(counter, std::to_string(value + 1))) code = 5;
        lock->release();
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "child " << pid << " status " << status;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child " << pid;
  }
  EXPECT_EQ(test::read_text(counter), std::to_string(kChildren * kRounds));
  EXPECT_FALSE(fs::exists(lock_path()));
  // Only the counter is left: no temp file and no lock file.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir()), fs::directory_iterator()), 1);
}

} // namespace
} // namespace npc::util
