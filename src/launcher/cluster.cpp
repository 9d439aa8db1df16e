#include <npc/launcher/cluster.hpp>

#include <exception>
#include <utility>

#include <spdlog/spdlog.h>

#include <npc/launcher/graph_source.hpp>
#include <npc/launcher/launcher_roll.hpp>
#include <npc/launcher/options.hpp>
#include <npc/util/log.hpp>
#include <npc/util/random.hpp>

namespace npc::launcher {

namespace {

// A task of a Slurm step that compiles meets the step's other tasks in the
// cache they share, for one line of the step's totals at the end. Without
// it (the storage refuses) the task still compiles; the step has no totals.
std::optional<StepMeeting> join_step(const Options& options, const GraphSource& source) {
  if (!options.step || options.mode == Mode::collect || options.dry_run) return std::nullopt;
  try {
    auto joined = StepMeeting::join(source.open_common_storage(), source.open_common_storage(), *options.step);
    if (joined) return std::move(*joined);
    spdlog::warn("the step's totals will not be printed: {}", joined.error());
  } catch (const std::exception& e) {
    spdlog::warn("the step's totals will not be printed: {}", e.what());
  }
  return std::nullopt;
}

// Launchers on one cache that were not told how many they are split its
// graphs by a roll they keep there (launcher_roll.hpp): an s3:// cache, or a
// directory that hosts share (a network file system). Alone on the roll, a
// launcher's share is every graph. Without the roll they still share the
// cache, only with more races for the same graphs, each lost race a
// worker's start on a directory.
std::shared_ptr<RollLook> join_roll(const GraphSource& source) {
  // A directory no other launcher can write to has no one to split with.
  const auto say = source.named_by_url() ? spdlog::level::warn : spdlog::level::debug;
  try {
    auto joined = LauncherRoll::join(source.open_common_storage(), source.open_common_storage());
    if (joined) return std::move(*joined);
    spdlog::log(say, "the graphs are not split with the other launchers of this cache: {}", joined.error());
  } catch (const std::exception& e) {
    spdlog::log(say, "the graphs are not split with the other launchers of this cache: {}", e.what());
  }
  return nullptr;
}

} // namespace

Cluster::Cluster(std::shared_ptr<RollLook> roll, std::shared_ptr<HeldEntryLook> shared_tier,
                 std::optional<StepMeeting> step)
    : roll_(std::move(roll)), shared_(std::move(shared_tier)), step_(std::move(step)) {}

Cluster Cluster::join(const Options& options, const GraphSource& source) {
  if (options.mode == Mode::collect || options.dry_run) return {};
  // A task of a Slurm step is on the roll as the step's meeting has it.
  std::optional<StepMeeting> step = join_step(options, source);
  std::shared_ptr<RollLook> member = step ? step->member() : nullptr;
  // --world_size shares (given, or a step's) split the graphs by rank: a
  // roll the task is on does not split them again, and without a step
  // there is no roll to be on.
  if (!step && options.world_size <= 1) member = join_roll(source);
  Cluster cluster(options.world_size > 1 ? nullptr : member, nullptr, std::move(step));
  cluster.spreads_ = source.named_by_url();
  return cluster;
}

const std::string& Cluster::self() const {
  static const std::string alone;
  return roll_ ? roll_->self() : alone;
}

void Cluster::spread_picks(Pool& pool) const {
  if (spreads_) pool.spread_picks(util::random_u64(), kSpreadBand);
}

std::vector<std::optional<Pool::Found>> Cluster::look_all(const std::vector<fs::path>& entry_dirs,
                                                          const std::function<bool()>& out_of_time) {
  if (shared_) return shared_->look_all(entry_dirs, out_of_time);
  return std::vector<std::optional<Pool::Found>>(entry_dirs.size(), Pool::Found::pending);
}

std::string Cluster::done_elsewhere_event() const {
  return !shared_ || shared_->downloads() ? "compiled by another node, downloaded: " : "compiled by another node: ";
}

void Cluster::begin_take(std::size_t item, const fs::path& entry_dir) {
  if (shared_) shared_->begin_take(item, entry_dir);
  else left_to_workers_.push_back({item, HeldEntryLook::Take::left_to_worker});
}

std::vector<HeldEntryLook::TakeEnded> Cluster::takes_ended() {
  return shared_ ? shared_->takes_ended() : std::exchange(left_to_workers_, {});
}

void Cluster::report_start(const Pool& pool) {
  if (!step_) return;
  if (auto s = step_->found(task_totals(pool).graphs); !s)
    spdlog::warn("this task's graphs are not in the step's totals should it stop early: {}", s.error());
}

void Cluster::report_end(const Pool& pool) {
  if (!step_) return;
  if (auto s = step_->report(task_totals(pool)); !s) {
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

} // namespace npc::launcher
