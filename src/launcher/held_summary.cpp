#include <npc/launcher/held_summary.hpp>

#include <algorithm>
#include <map>

#include <spdlog/spdlog.h>

namespace npc::launcher {

std::string held_by_holder(const std::vector<HeldGraph>& held) {
  // Each holder's graphs, in the order they came.
  std::map<std::string, std::vector<const HeldGraph*>> by_holder;
  for (const auto& one : held) by_holder[one.holder].push_back(&one);
  std::vector<const std::pair<const std::string, std::vector<const HeldGraph*>>*> groups;
  for (const auto& group : by_holder) groups.push_back(&group);
  // The most graphs first; among equals, by name, the same in every run.
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto* a, const auto* b) { return a->second.size() > b->second.size(); });

  std::string text = std::to_string(held.size()) + " graphs: ";
  const std::size_t named = std::min(groups.size(), kHoldersNamed);
  for (std::size_t k = 0; k < named; ++k) {
    const auto& [holder, graphs] = *groups[k];
    if (k > 0) text += "; ";
    text += std::to_string(graphs.size()) + " held by " + holder + " (";
    const std::size_t shown = std::min(graphs.size(), kGraphsNamedPerHolder);
    for (std::size_t g = 0; g < shown; ++g) text += (g > 0 ? ", " : "") + graphs[g]->graph;
    if (graphs.size() > shown) text += " and " + std::to_string(graphs.size() - shown) + " more";
    text += ")";
  }
  if (groups.size() > named) {
    std::size_t rest = 0;
    for (std::size_t k = named; k < groups.size(); ++k) rest += groups[k]->second.size();
    const std::size_t others = groups.size() - named;
    text += "; and " + std::to_string(rest) + " more held by " + std::to_string(others) + " other holder" +
            (others == 1 ? "" : "s");
  }
  return text;
}

void tell_held(ProgressDisplay& progress, const std::vector<HeldGraph>& held,
               const std::function<std::string(const HeldGraph&)>& one, const std::string& several) {
  if (held.empty()) return;
  if (held.size() == 1) {
    progress.event(one(held.front()));
    return;
  }
  for (const auto& graph : held) spdlog::debug("{}", one(graph));
  progress.event(several + held_by_holder(held));
}

} // namespace npc::launcher
