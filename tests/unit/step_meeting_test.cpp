// cluster/step_meeting: the tasks of a Slurm step add up what they did in
// the cache they share; task 0 waits for the others, or finds them gone.
// Over a directory storage; the Slurm tests run it across real tasks.

#include <npc/cluster/step_meeting.hpp>

#include <chrono>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include <npc/storage/local.hpp>
#include <npc/storage/lock.hpp>
#include <npc/util/file_lock.hpp>

#include "files.hpp"
#include "step_task_of.hpp"
#include "temp_dir.hpp"

namespace npc::cluster {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class StepMeetingTest : public test::TempDirTest {
protected:
  std::shared_ptr<storage::Storage> cache_storage() const {
    return std::make_shared<storage::LocalStorage>(dir() / "cache", dir() / "trash");
  }
  static StepTask task(int index, int count = 3) { return test::step_task_of(index, count); }
  StepMeeting join(int index, int count = 3) {
    auto joined = StepMeeting::join(cache_storage(), cache_storage(), task(index, count));
    if (!joined) throw std::runtime_error(joined.error());
    return std::move(*joined);
  }
};

TEST_F(StepMeetingTest, TaskZeroAddsUpEveryTasksRecord) {
  StepMeeting zero = join(0), one = join(1), two = join(2);
  EXPECT_TRUE(fs::exists(dir() / "cache/.npc/launchers/slurm-4711.0.task-1.json")) << "on the roll";
  // a and b compiled by tasks; c cached before the step (done for everyone);
  // d failed for task 2, compiled by task 1 on a retry; e failed; f left.
  ASSERT_TRUE(one.report({{"a", "c", "d"}, {"a", "d"}, {"c"}, {}}).ok());
  ASSERT_TRUE(two.report({{"b", "c", "d", "e", "f"}, {"b"}, {"c"}, {"d", "e"}}).ok());
  ASSERT_TRUE(zero.report({{"a", "b", "c"}, {}, {"a", "b", "c"}, {}}).ok());
  auto totals = zero.gather(10ms);
  ASSERT_TRUE(totals) << totals.error();
  EXPECT_EQ(totals->reported, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(totals->line(),
            "Slurm step 4711.0: 6 graphs: 3 compiled by 2 tasks, 1 already done, 1 failed, 1 left "
            "(3 of 3 tasks reported)");
  // The records are gone with the gathering, and their folder.
  EXPECT_FALSE(fs::exists(dir() / "cache/.npc/steps/4711.0"));
}

TEST_F(StepMeetingTest, TaskZeroWaitsForATaskStillAtWork) {
  StepMeeting zero = join(0, 2);
  StepMeeting one = join(1, 2);
  ASSERT_TRUE(zero.report({{"a"}, {"a"}, {}, {}}).ok());
  std::thread later([&] {
    std::this_thread::sleep_for(300ms);
    ASSERT_TRUE(one.report({{"b"}, {"b"}, {}, {}}).ok());
  });
  auto start = std::chrono::steady_clock::now();
  auto totals = zero.gather(20ms);
  later.join();
  ASSERT_TRUE(totals) << totals.error();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  EXPECT_EQ(totals->line(),
            "Slurm step 4711.0: 2 graphs: 2 compiled by 2 tasks, 0 already done, 0 failed, 0 left "
            "(2 of 2 tasks reported)");
}

TEST_F(StepMeetingTest, ATaskGoneWithoutAWordIsNotWaitedFor) {
  StepMeeting zero = join(0);
  { StepMeeting one = join(1); } // ended before reporting: off the roll
  // Task 2 died: its lease names a pid of this host that runs no more.
  util::LockHolder dead = util::LockHolder::self("neuron_parallel_compile");
  dead.pid = 999999;
  storage::LockRecord record{dead.serialize(), "token", 0};
  test::write_text(dir() / "cache/.npc/launchers/slurm-4711.0.task-2.json", record.serialize());
  EXPECT_FALSE(fs::exists(dir() / "cache/.npc/launchers/slurm-4711.0.task-1.json"));
  ASSERT_TRUE(zero.report({{"a", "b"}, {"a"}, {}, {}}).ok());
  auto totals = zero.gather(10ms);
  ASSERT_TRUE(totals) << totals.error();
  EXPECT_EQ(totals->line(),
            "Slurm step 4711.0: 2 graphs: 1 compiled by 1 task, 0 already done, 0 failed, 1 left "
            "(1 of 3 tasks reported)");
}

// A task that dies after it said which graphs it found has them counted:
// done if another task did them, else left. It is not counted as reported.
TEST_F(StepMeetingTest, TheGraphsOfATaskThatDiedAreCountedAsLeftUnlessAnotherDidThem) {
  StepMeeting zero = join(0, 2);
  {
    StepMeeting one = join(1, 2);
    ASSERT_TRUE(one.found({"a", "x"}).ok());
  } // died: off the roll without a record of its end
  EXPECT_TRUE(fs::exists(dir() / "cache/.npc/steps/4711.0/task-1.json"));
  ASSERT_TRUE(zero.found({"a", "b"}).ok());
  ASSERT_TRUE(zero.report({{"a", "b"}, {"a", "b"}, {}, {}}).ok());
  auto totals = zero.gather(10ms);
  ASSERT_TRUE(totals) << totals.error();
  EXPECT_EQ(totals->reported, std::vector<int>{0});
  EXPECT_EQ(totals->line(),
            "Slurm step 4711.0: 3 graphs: 2 compiled by 1 task, 0 already done, 0 failed, 1 left "
            "(1 of 2 tasks reported)");
}

// While a task that said what it found is still at work, task 0 waits for
// its end, not only for its first record.
TEST_F(StepMeetingTest, TaskZeroWaitsForTheEndOfATaskThatSaidWhatItFound) {
  StepMeeting zero = join(0, 2);
  StepMeeting one = join(1, 2);
  ASSERT_TRUE(one.found({"b"}).ok());
  ASSERT_TRUE(zero.report({{"a"}, {"a"}, {}, {}}).ok());
  std::thread later([&] {
    std::this_thread::sleep_for(300ms);
    ASSERT_TRUE(one.report({{"b"}, {"b"}, {}, {}}).ok());
  });
  auto totals = zero.gather(20ms);
  later.join();
  ASSERT_TRUE(totals) << totals.error();
  EXPECT_EQ(totals->line(),
            "Slurm step 4711.0: 2 graphs: 2 compiled by 2 tasks, 0 already done, 0 failed, 0 left "
            "(2 of 2 tasks reported)");
}

TEST_F(StepMeetingTest, AnEarlierRunsRecordIsNotThisRuns) {
  // A requeued job keeps its id: task 1's record of the first run is removed
  // when task 1 of this run joins.
  test::write_text(dir() / "cache/.npc/steps/4711.0/task-1.json",
                   R"({"task":1,"graphs":["old"],"compiled":["old"],"done":[],"failed":[]})");
  StepMeeting zero = join(0, 2);
  StepMeeting one = join(1, 2);
  EXPECT_FALSE(fs::exists(dir() / "cache/.npc/steps/4711.0/task-1.json"));
  ASSERT_TRUE(one.report({{"new"}, {"new"}, {}, {}}).ok());
  ASSERT_TRUE(zero.report({{}, {}, {}, {}}).ok());
  auto totals = zero.gather(10ms);
  ASSERT_TRUE(totals) << totals.error();
  EXPECT_EQ(totals->graphs, 1u);
  EXPECT_EQ(totals->compiled, 1u);
}

// A step whose task 0 died before gathering leaves its folder: the next
// step's tasks remove it once nothing in it changed for 10 minutes and none
// of its tasks is on the roll; a step at work, or one that ended a moment
// ago, stays.
TEST_F(StepMeetingTest, AStepLeftBehindIsRemovedByTheNextOnceNoneOfItsTasksIsOnTheRoll) {
  const fs::path steps = dir() / "cache/.npc/steps";
  const auto eleven_minutes_ago = fs::file_time_type::clock::now() - 11min;
  util::LockHolder dead = util::LockHolder::self("neuron_parallel_compile");
  dead.pid = 999999;
  const std::string dead_lock = storage::LockRecord{dead.serialize(), "token", 0}.serialize();
  const std::string live_lock =
      storage::LockRecord{util::LockHolder::self("neuron_parallel_compile").serialize(), "token",
                          std::chrono::duration_cast<std::chrono::seconds>(
                              (std::chrono::system_clock::now() + 1h).time_since_epoch())
                              .count()}
          .serialize();
  // Task 0's lease on the roll, renewed lately (a dead one's was, until it died).
  auto left = [&](const std::string& step, const std::string& lease, bool old) {
    test::write_text(steps / step / "task-1.json", R"({"task":1,"graphs":[]})");
    test::write_text(dir() / "cache/.npc/launchers" / ("slurm-" + step + ".task-0.json"), lease);
    if (old) fs::last_write_time(steps / step / "task-1.json", eleven_minutes_ago);
  };
  left("100.0", dead_lock, true);  // task 0 died long ago: removed
  left("101.0", dead_lock, false); // ended a moment ago: its task 0 may still gather
  left("102.0", live_lock, true);  // task 0 at work (an old record of a task that ended early)
  StepMeeting zero = join(0, 1);
  EXPECT_EQ(test::names_in(steps), (std::vector<std::string>{"101.0", "102.0"}));
}

TEST_F(StepMeetingTest, ATaskAlreadyRunningIsRefused) {
  StepMeeting one = join(1);
  auto again = StepMeeting::join(cache_storage(), cache_storage(), task(1));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().rfind("task 1 of Slurm step 4711.0 is already running: held by pid ", 0), 0u)
      << again.error();
}

} // namespace
} // namespace npc::cluster
