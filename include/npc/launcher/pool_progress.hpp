#pragma once
// What the progress display (progress.hpp) says of a pool as it runs: the
// status line's figures, and a line for each attempt that ends.

#include <string>

#include <npc/launcher/pool.hpp>
#include <npc/launcher/pool_runner.hpp>
#include <npc/launcher/progress.hpp>

namespace npc::launcher {

// The graph as the lines name it: its entry's folder name (MODULE_...).
[[nodiscard]] std::string short_name(const WorkItem& item);

// The status line's figures at `now`, `elapsed` seconds into the pool's run.
[[nodiscard]] ProgressSnapshot snapshot(const Pool& pool, double elapsed, double now);

// What the display says of an attempt that ended, once the pool has taken
// it in (a retry is said as one).
void tell(ProgressDisplay& progress, const Pool& pool, const AttemptEnded& ended);

} // namespace npc::launcher
