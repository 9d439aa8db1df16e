// cluster/step_roll: the tasks of a Slurm step split its graphs among the
// tasks not gone, as the roll shows them, on a fake roll and a fake clock.

#include <npc/cluster/step_roll.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "step_task_of.hpp"

#include <npc/cluster/launcher_roll.hpp>

namespace npc::cluster {
namespace {

// A roll whose next look finds what the test says.
class FakeRoll final : public RollLook {
public:
  explicit FakeRoll(std::string self) : self_(std::move(self)) {}
  [[nodiscard]] const std::string& self() const override { return self_; }
  [[nodiscard]] std::optional<std::vector<std::string>> changed(double) override { return std::exchange(next_, {}); }
  void lists(std::vector<std::string> names) { next_ = std::move(names); }

private:
  std::string self_;
  std::optional<std::vector<std::string>> next_;
};

StepTask task(int index, int count) { return test::step_task_of(index, count); }

std::string name(int index) { return "slurm-4711.0.task-" + std::to_string(index); }

std::vector<std::string> names(std::initializer_list<int> indices) {
  std::vector<std::string> out;
  for (int i : indices) out.push_back(name(i));
  return out;
}

const double kLife = std::chrono::duration<double>(kRollRecordLife).count();

// srun starts the tasks together: each counts all of them from its first
// look, before the others are on the roll, so all split alike at once.
TEST(StepRoll, EveryTaskIsCountedFromTheStart) {
  auto roll = std::make_shared<FakeRoll>(name(1));
  StepRoll step(roll, task(1, 4));
  EXPECT_EQ(step.self(), name(1));
  EXPECT_EQ(step.changed(0), names({0, 1, 2, 3}));
  roll->lists(names({1, 2}));
  EXPECT_EQ(step.changed(1), std::nullopt) << "tasks 0 and 3 are still joining";
  roll->lists(names({0, 1, 2, 3}));
  EXPECT_EQ(step.changed(2), std::nullopt);
}

// A task seen on the roll and off it since (ended, or its lease lapsed with
// its host) is gone at once: its graphs are the others'.
TEST(StepRoll, ATaskOffTheRollAfterBeingOnItIsGone) {
  auto roll = std::make_shared<FakeRoll>(name(0));
  StepRoll step(roll, task(0, 4));
  ASSERT_EQ(step.changed(0), names({0, 1, 2, 3}));
  roll->lists(names({0, 1, 2, 3}));
  EXPECT_EQ(step.changed(1), std::nullopt);
  roll->lists(names({0, 1, 3}));
  EXPECT_EQ(step.changed(30), names({0, 1, 3}));
  EXPECT_EQ(step.changed(31), std::nullopt) << "said once";
  // Back on the roll (its record rewritten): counted again.
  roll->lists(names({0, 1, 2, 3}));
  EXPECT_EQ(step.changed(32), names({0, 1, 2, 3}));
}

// A task never seen on the roll within a lease's life of the first look
// died before it joined (or never started): its share is the others'.
TEST(StepRoll, ATaskNeverSeenWithinALeaseIsGone) {
  auto roll = std::make_shared<FakeRoll>(name(2));
  StepRoll step(roll, task(2, 3));
  ASSERT_EQ(step.changed(100), names({0, 1, 2}));
  roll->lists(names({1, 2}));
  EXPECT_EQ(step.changed(101), std::nullopt);
  EXPECT_EQ(step.changed(100 + kLife - 1), std::nullopt);
  EXPECT_EQ(step.changed(100 + kLife), names({1, 2}));
}

// Launchers on the same cache that are not the step's tasks (another step,
// a launcher outside Slurm) are on the roll too, and not counted; this task
// counts itself even when a look misses its own record.
TEST(StepRoll, OnlyTheStepsTasksAreCountedAndThisOneAlways) {
  auto roll = std::make_shared<FakeRoll>(name(0));
  StepRoll step(roll, task(0, 2));
  roll->lists({"host-a.12.x1", name(1), "slurm-4711.1.task-0", "slurm-4712.0.task-1"});
  EXPECT_EQ(step.changed(0), names({0, 1}));
  roll->lists({"host-a.12.x1"});
  EXPECT_EQ(step.changed(kLife + 1), names({0}));
}

} // namespace
} // namespace npc::cluster
