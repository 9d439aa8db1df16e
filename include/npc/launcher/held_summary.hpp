#pragma once
// What the launcher says of graphs held by other processes, however many:
// the graphs it waits for once nothing else is left, and those it leaves to
// their holders. A Slurm step of 16 tasks over thousands of graphs would
// print a line per graph, per task; instead one line counts them by holder
// (those holding the most first, a few named with a few of their graphs,
// the rest counted), and each graph's own line is at DEBUG. A single graph
// keeps its line of its own.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <npc/launcher/progress.hpp>

namespace npc::launcher {

struct HeldGraph {
  std::string graph;     // MODULE_...
  std::string holder;    // who, the same text for every graph it holds: counted together
  std::string described; // who and which lock, for a line of this graph alone
};

// A line names this many holders, the rest counted: enough to show who
// holds most, short enough to read in a log of many tasks.
inline constexpr std::size_t kHoldersNamed = 3;
// And this many graphs of each: examples to look up, not the list (the
// report and the final LEFT lines have every graph).
inline constexpr std::size_t kGraphsNamedPerHolder = 2;

// The graphs by holder: "5 graphs: 3 held by pid 12 on h (tool), since T
// (MODULE_a, MODULE_b and 1 more); 2 held by pid 13 on h (tool), since T
// (MODULE_d, MODULE_e)", ending "; and 40 more held by 12 other holders"
// when more hold some.
[[nodiscard]] std::string held_by_holder(const std::vector<HeldGraph>& held);

// Says `held` on `progress`: `one(graph)` for a single graph; for several,
// `several` followed by held_by_holder, with `one` of each graph at DEBUG.
// Nothing for none.
void tell_held(ProgressDisplay& progress, const std::vector<HeldGraph>& held,
               const std::function<std::string(const HeldGraph&)>& one, const std::string& several);

} // namespace npc::launcher
