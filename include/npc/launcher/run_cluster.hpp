#pragma once
// The cluster of a run (cluster/cluster.hpp), made of its options and its
// cache, and what the run tells it of its pool.

#include <npc/cluster/cluster.hpp>
#include <npc/cluster/step_meeting.hpp>

namespace npc::launcher {

struct Options;
class GraphSource;
class Pool;

// The cluster `options` and the cache of `source` make: the step's meeting
// for a task of a Slurm step, the roll for launchers not told how they
// split the graphs (no --world_size). Joined before the trial, so that
// launchers started together are on the roll by the time the first of them
// picks. A part the storage refuses is a warning, and missing. Alone
// (cluster::Cluster{}) for a collect or a dry run.
[[nodiscard]] cluster::Cluster join_cluster(const Options& options, const GraphSource& source);

// What this task did, by graph, for the step's totals.
[[nodiscard]] cluster::TaskTotals task_totals(const Pool& pool);

} // namespace npc::launcher
