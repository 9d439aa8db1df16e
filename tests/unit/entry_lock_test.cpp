// cache/entry_lock: judging torch-neuronx's model.hlo_module.pb.lock, breaking
// only what was judged stale, and exclusion across many processes at once.

#include <atomic>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <npc/cache/entry_lock.hpp>
#include <npc/cache/layout.hpp>

#include "test_support.hpp"

namespace npc::cache {
namespace {

using namespace std::chrono_literals;

class EntryLockTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    entry_ = dir() / "neuronxcc-1.0" / "MODULE_1+d41d8cd9";
    fs::create_directories(entry_);
  }
  fs::path lock() const { return entry_ / kFrameworkLockFile; }
  void age(const fs::path& path, int seconds) const {
    struct timespec t[2] = {{::time(nullptr) - seconds, 0}, {::time(nullptr) - seconds, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0);
  }
  FrameworkLockFacts judge(std::chrono::seconds stale_age = 3600s) const {
    return judge_framework_lock(lock(), stale_age, std::chrono::system_clock::now());
  }
  static pid_t dead_pid() {
    pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    ::waitpid(pid, nullptr, 0);
    return pid;
  }
  fs::path entry_;
};

TEST_F(EntryLockTest, JudgesEachKindOfLock) {
  EXPECT_EQ(judge().state, FrameworkLockState::absent);
  test::write_text(lock(), ""); // the framework's: no owner facts
  EXPECT_EQ(judge().state, FrameworkLockState::held);
  EXPECT_FALSE(judge().owner.has_value());
  age(lock(), 7200);
  EXPECT_EQ(judge().state, FrameworkLockState::stale_old);
  EXPECT_EQ(judge(3h).state, FrameworkLockState::held);

  util::LockHolder me = util::LockHolder::self("test");
  test::write_text(lock(), me.serialize() + "\n");
  age(lock(), 7200);
  EXPECT_EQ(judge().state, FrameworkLockState::held_alive) << "a live owner's lock is never stale, however old";

  util::LockHolder gone = me;
  gone.pid = dead_pid();
  test::write_text(lock(), gone.serialize() + "\n");
  EXPECT_EQ(judge().state, FrameworkLockState::stale_dead);

  util::LockHolder reused = me; // our pid, but another process start
  reused.process_start = me.process_start + 1;
  test::write_text(lock(), reused.serialize() + "\n");
  EXPECT_EQ(judge().state, FrameworkLockState::stale_dead);

  util::LockHolder rebooted = me;
  rebooted.boot_id = "00000000-0000-0000-0000-000000000000";
  test::write_text(lock(), rebooted.serialize() + "\n");
  EXPECT_EQ(judge().state, FrameworkLockState::stale_dead);

  util::LockHolder remote = me;
  remote.host = "another-host";
  test::write_text(lock(), remote.serialize() + "\n");
  EXPECT_EQ(judge().state, FrameworkLockState::held) << "another host's owner cannot be checked";
  age(lock(), 7200);
  EXPECT_EQ(judge().state, FrameworkLockState::stale_old);
}

TEST_F(EntryLockTest, BadLockContentsAreNoOwnerFacts) {
  for (std::string garbage : {std::string("\x00\x01\x02", 3), std::string(100000, 'x'), std::string("pid=abc"),
                              std::string("pid=-5 host=h"), std::string("pid=1 host=a\x7f" "b")}) {
    test::write_text(lock(), garbage);
    auto facts = judge();
    EXPECT_EQ(facts.state, FrameworkLockState::held);
    EXPECT_FALSE(facts.owner.has_value());
  }
  fs::remove(lock());
  fs::create_directory(lock()); // a directory where the lock belongs
  EXPECT_EQ(judge().state, FrameworkLockState::held);
  age(lock(), 7200);
  EXPECT_EQ(judge().state, FrameworkLockState::stale_old);
  EXPECT_TRUE(break_framework_lock(lock(), judge()));
  EXPECT_FALSE(fs::exists(lock()));
}

TEST_F(EntryLockTest, TakingWritesOwnerFactsAndReleasingRemovesOnlyOurs) {
  EntryLock held;
  auto attempt = EntryLock::try_acquire(entry_, util::LockHolder::self("test"), 3600s, held);
  ASSERT_TRUE(attempt.ok()) << attempt.error();
  EXPECT_EQ(attempt->outcome, EntryLock::Outcome::taken);
  auto owner = util::LockHolder::parse(test::read_text(lock()));
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->pid, ::getpid());
  EXPECT_EQ(owner->boot_id, util::this_boot_id());
  // Someone replaced it (clear-locks, then a framework's own lock).
  fs::remove(lock());
  test::write_text(lock(), "");
  held.release();
  EXPECT_TRUE(fs::exists(lock())) << "released somebody else's lock";
}

TEST_F(EntryLockTest, AFreshFrameworkLockKeepsUsOutAndAStaleOneIsTakenOver) {
  test::write_text(lock(), "");
  EntryLock held;
  auto attempt = EntryLock::try_acquire(entry_, util::LockHolder::self("test"), 3600s, held);
  ASSERT_TRUE(attempt.ok());
  EXPECT_EQ(attempt->outcome, EntryLock::Outcome::held_elsewhere);
  EXPECT_EQ(attempt->blocking.state, FrameworkLockState::held);
  EXPECT_FALSE(held.held());
  EXPECT_TRUE(fs::exists(lock()));
  age(lock(), 7200);
  attempt = EntryLock::try_acquire(entry_, util::LockHolder::self("test"), 3600s, held);
  ASSERT_TRUE(attempt.ok());
  EXPECT_EQ(attempt->outcome, EntryLock::Outcome::taken);
  EXPECT_TRUE(util::LockHolder::parse(test::read_text(lock())).has_value()) << "the lock is ours now";
  held.release();
  EXPECT_FALSE(fs::exists(lock()));
}

TEST_F(EntryLockTest, BreakingLeavesAFrameworkLockThatReplacedTheJudgedOne) {
  test::write_text(lock(), "");
  age(lock(), 7200);
  auto judged = judge();
  ASSERT_EQ(judged.state, FrameworkLockState::stale_old);
  // Replaced by a fresh framework lock, just as empty.
  fs::remove(lock());
  test::write_text(lock(), "");
  EXPECT_FALSE(break_framework_lock(lock(), judged));
  EXPECT_TRUE(fs::exists(lock()));
}

TEST_F(EntryLockTest, BreakingLeavesALockThatReplacedTheJudgedOne) {
  test::write_text(lock(), "");
  age(lock(), 7200);
  auto judged = judge();
  ASSERT_EQ(judged.state, FrameworkLockState::stale_old);
  // Between our look and our break, someone cleared it and took a new one.
  fs::remove(lock());
  test::write_text(lock(), util::LockHolder::self("other").serialize() + "\n");
  EXPECT_FALSE(break_framework_lock(lock(), judged));
  EXPECT_TRUE(fs::exists(lock()));
  EXPECT_TRUE(util::LockHolder::parse(test::read_text(lock())).has_value());
  std::size_t leftovers = 0;
  for (const auto& f : fs::directory_iterator(entry_)) leftovers += f.path() != lock();
  EXPECT_EQ(leftovers, 0u) << "a moved-aside file was left behind";
}

// Many processes race for one entry at once, repeatedly: never two holders.
TEST_F(EntryLockTest, ManyProcessesAtOnceNeverHoldTogether) {
  constexpr int kProcesses = 16, kRounds = 50;
  fs::path inside = dir() / "inside";
  fs::path overlaps = dir() / "overlaps";
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int taken = 0;
      while (taken < kRounds) {
        EntryLock held;
        auto attempt = EntryLock::try_acquire(entry_, util::LockHolder::self("race"), 3600s, held);
        if (!attempt.ok()) ::_exit(3);
        if (attempt->outcome != EntryLock::Outcome::taken) continue;
        int fd = ::open(inside.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
        if (fd < 0) {
          int o = ::open(overlaps.c_str(), O_CREAT | O_WRONLY | O_APPEND, 0644);
          std::ignore = ::write(o, "x", 1);
          ::close(o);
        } else {
          ::close(fd);
          ::unlink(inside.c_str());
        }
        ++taken;
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_FALSE(fs::exists(overlaps)) << "two processes held the entry at once";
  EXPECT_FALSE(fs::exists(lock())) << "a lock outlived its holders";
}

} // namespace
} // namespace npc::cache
