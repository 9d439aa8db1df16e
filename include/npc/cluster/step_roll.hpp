#pragma once
// The roll as a task of a Slurm step sees it when it splits the step's
// graphs: the step's tasks by their names on the roll
// ("slurm-4711.0.task-2", step_meeting.hpp), each counted from the start,
// since srun starts them together, less those gone. A task is gone once it
// was seen on the roll and is off it since (it ended, or its lease lapsed
// with its host: kRollRecordLife; a dead pid on this host at once), or when
// it was never seen within kRollRecordLife of this task's first look (it
// died before it joined). Its graphs are then the others', by the same
// rendezvous hash that split them (share_owner.hpp), so the survivors start
// them among their own, costliest first. Other launchers on the same
// cache's roll are not the step's, and not counted.

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <npc/cluster/cluster.hpp>
#include <npc/cluster/slurm_step.hpp>

namespace npc::cluster {

class StepRoll final : public RollLook {
public:
  // `roll`: this task on the launchers' roll (StepMeeting::member).
  StepRoll(std::shared_ptr<RollLook> roll, const StepTask& task);

  [[nodiscard]] const std::string& self() const override { return roll_->self(); }
  // The step's tasks not gone, sorted, when they differ from the last
  // answer; the first call always answers.
  [[nodiscard]] std::optional<std::vector<std::string>> changed(double now) override;

private:
  std::shared_ptr<RollLook> roll_;
  std::vector<std::string> tasks_;     // every task's name, sorted
  std::set<std::string> on_roll_;      // the step's tasks on the roll at its last look
  std::set<std::string> seen_;         // ever on the roll
  std::optional<double> first_look_;
  bool joining_ = true;                // within kRollRecordLife of the first look, at the last answer
  std::optional<std::vector<std::string>> answered_;
};

} // namespace npc::cluster
