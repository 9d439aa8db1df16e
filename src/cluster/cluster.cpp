#include <npc/cluster/cluster.hpp>

#include <exception>
#include <utility>

#include <spdlog/spdlog.h>

#include <npc/util/log.hpp>

namespace npc::cluster {

Cluster::Cluster(std::shared_ptr<RollLook> roll, std::shared_ptr<HeldEntryLook> shared_tier,
                 std::optional<StepMeeting> step, bool spreads)
    : roll_(std::move(roll)), shared_(std::move(shared_tier)), step_(std::move(step)), spreads_(spreads) {}

const std::string& Cluster::self() const {
  static const std::string alone;
  return roll_ ? roll_->self() : alone;
}

std::vector<std::optional<cache::Found>> Cluster::look_all(const std::vector<fs::path>& entry_dirs,
                                                          const std::function<bool()>& out_of_time) {
  if (shared_) return shared_->look_all(entry_dirs, out_of_time);
  return std::vector<std::optional<cache::Found>>(entry_dirs.size(), cache::Found::pending);
}

std::string Cluster::done_elsewhere_event() const {
  return !shared_ || shared_->downloads() ? "compiled by another node, downloaded: " : "compiled by another node: ";
}

void Cluster::begin_take(std::size_t item, const fs::path& entry_dir) {
  if (shared_) shared_->begin_take(item, entry_dir);
  else left_to_workers_.push_back({item, HeldEntryLook::Take::left_to_worker()});
}

std::vector<HeldEntryLook::TakeEnded> Cluster::takes_ended() {
  return shared_ ? shared_->takes_ended() : std::exchange(left_to_workers_, {});
}

void Cluster::report_start(const TaskTotals& found) {
  if (!step_) return;
  if (auto s = step_->found(found.graphs); !s)
    spdlog::warn("this task's graphs are not in the step's totals should it stop early: {}", s.error());
}

void Cluster::report_end(const TaskTotals& mine) {
  if (!step_) return;
  if (auto s = step_->report(mine); !s) {
    spdlog::warn("this task's totals are not in the step's: {}", s.error());
    return;
  }
  if (step_->task().index != 0) return;
  auto totals = step_->gather(std::chrono::seconds(1));
  if (!totals) {
    spdlog::warn("no totals for the step: {}", totals.error());
    return;
  }
  util::log_always(totals->line());
}

} // namespace npc::cluster
