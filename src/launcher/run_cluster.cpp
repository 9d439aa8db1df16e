#include <npc/launcher/run_cluster.hpp>

#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>

#include <npc/cluster/launcher_roll.hpp>
#include <npc/cluster/step_roll.hpp>
#include <npc/launcher/graph_source.hpp>
#include <npc/launcher/options.hpp>
#include <npc/launcher/pool.hpp>

namespace npc::launcher {

namespace {

// A task of a Slurm step that compiles meets the step's other tasks in the
// cache they share: on the roll, where they split the graphs, and for one
// line of the step's totals at the end. Without it (the storage refuses)
// the task still compiles every graph it found that no other holds.
std::optional<cluster::StepMeeting> join_step(const Options& options, const GraphSource& source) {
  if (!options.step || !mode_compiles(options.mode) || options.dry_run) return std::nullopt;
  try {
    auto joined = cluster::StepMeeting::join(source.open_common_storage(), source.open_common_storage(), *options.step);
    if (joined) return std::move(*joined);
    spdlog::warn("this task neither splits the graphs with the step's other tasks nor adds to its totals: {}",
                 joined.error());
  } catch (const std::exception& e) {
    spdlog::warn("this task neither splits the graphs with the step's other tasks nor adds to its totals: {}",
                 e.what());
  }
  return std::nullopt;
}

// Launchers on one cache that were not told how many they are split its
// graphs by a roll they keep there (cluster/launcher_roll.hpp): an s3:// cache, or a
// directory that hosts share (a network file system). Alone on the roll, a
// launcher's share is every graph. Without the roll they still share the
// cache, only with more races for the same graphs, each lost race a
// worker's start on a directory.
std::shared_ptr<cluster::RollLook> join_roll(const GraphSource& source) {
  // A directory no other launcher can write to has no one to split with.
  const auto say = source.named_by_url() ? spdlog::level::warn : spdlog::level::debug;
  try {
    auto joined = cluster::LauncherRoll::join(source.open_common_storage(), source.open_common_storage());
    if (joined) return std::move(*joined);
    spdlog::log(say, "the graphs are not split with the other launchers of this cache: {}", joined.error());
  } catch (const std::exception& e) {
    spdlog::log(say, "the graphs are not split with the other launchers of this cache: {}", e.what());
  }
  return nullptr;
}

} // namespace

cluster::Cluster join_cluster(const Options& options, const GraphSource& source) {
  if (!mode_compiles(options.mode) || options.dry_run) return {}; // collect, check
  // A task of a Slurm step is on the roll as the step's meeting has it, and
  // splits the graphs with the step's other tasks alone.
  std::optional<cluster::StepMeeting> step = join_step(options, source);
  std::shared_ptr<cluster::RollLook> member =
      step ? std::make_shared<cluster::StepRoll>(step->member(), step->task()) : nullptr;
  // --world_size shares split the graphs by rank: a roll the task is on
  // does not split them again, and without a step there is no roll to be
  // on.
  if (!step && options.world_size <= 1) member = join_roll(source);
  // Hosts on a cache named by URL walk its graphs at once.
  return {options.world_size > 1 ? nullptr : member, nullptr, std::move(step), source.named_by_url()};
}

cluster::TaskTotals task_totals(const Pool& pool) {
  cluster::TaskTotals totals;
  for (std::size_t i = 0; i < pool.items().size(); ++i) {
    const std::string& key = pool.items()[i].key;
    totals.graphs.push_back(key);
    switch (pool.progress()[i].state) {
    case ItemState::compiled: totals.compiled.push_back(key); break;
    case ItemState::cached:
    case ItemState::compiled_elsewhere: totals.done.push_back(key); break;
    case ItemState::failed: totals.failed.push_back(key); break;
    default: break; // left: pending, held elsewhere, removed
    }
  }
  return totals;
}

} // namespace npc::launcher
