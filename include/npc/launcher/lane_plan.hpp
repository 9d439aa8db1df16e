#pragma once
// The order in which to start queued compiles on N slots, when their costs
// are known well enough to plan with (launcher/pool.hpp decides when).
//
// Longest first (LPT) leaves the slots ending unevenly when the last long
// compiles do not divide well: with 11 compiles on 2 slots it can end 2%
// past the best split. The plan starts from LPT's split into lanes (one per
// slot), then moves or swaps compiles between the lane that ends last and
// another (one or two compiles for up to two) while that ends the pair
// sooner. Each lane runs its compiles
// longest first; the dispatch order is by planned start time, so a pool
// that starts the next compile in this order whenever a slot frees up
// reproduces the plan when every compile takes its predicted time, and is
// still a list schedule (no slot idles while work waits) when they do not.

#include <cstddef>
#include <vector>

namespace npc::launcher {

struct LanePlan {
  std::vector<std::size_t> order; // indices into the costs, in dispatch order
  double makespan = 0;            // when the last lane ends, as planned
};

// Beyond this many compiles the plan is LPT's (the search is quadratic, and
// with many compiles LPT's uneven end is a small share of the whole).
inline constexpr std::size_t kMaxPlannedCompiles = 400;

// `costs`: predicted seconds of each compile; `busy_for`: one entry per
// slot, how long it stays busy with what already runs (0 when free).
[[nodiscard]] LanePlan plan_lanes(const std::vector<double>& costs, const std::vector<double>& busy_for);

// Longest first onto the slot that frees up first, with no search.
[[nodiscard]] LanePlan longest_first(const std::vector<double>& costs, const std::vector<double>& busy_for);

} // namespace npc::launcher
