#include <npc/cluster/step_roll.hpp>

#include <algorithm>
#include <chrono>
#include <utility>

#include <npc/cluster/launcher_roll.hpp>
#include <npc/cluster/step_meeting.hpp>

namespace npc::cluster {

StepRoll::StepRoll(std::shared_ptr<RollLook> roll, const StepTask& task) : roll_(std::move(roll)) {
  for (int i = 0; i < task.count; ++i) tasks_.push_back(step_member_name(task, i));
  std::sort(tasks_.begin(), tasks_.end());
}

std::optional<std::vector<std::string>> StepRoll::changed(double now) {
  if (!first_look_) first_look_ = now;
  auto listed = roll_->changed(now);
  if (listed) {
    on_roll_.clear();
    for (const auto& name : *listed)
      if (std::binary_search(tasks_.begin(), tasks_.end(), name)) on_roll_.insert(name);
    seen_.insert(on_roll_.begin(), on_roll_.end());
  }
  const bool joining = now - *first_look_ < std::chrono::duration<double>(kRollRecordLife).count();
  // Asked on every tick of the event loop: the answer can change only with
  // the listing or when the joining window closes.
  if (answered_ && !listed && joining == joining_) return std::nullopt;
  joining_ = joining;
  std::vector<std::string> members;
  for (const auto& name : tasks_)
    if (name == self() || on_roll_.contains(name) || (joining && !seen_.contains(name))) members.push_back(name);
  if (answered_ == members) return std::nullopt;
  answered_ = members;
  return members;
}

} // namespace npc::cluster
