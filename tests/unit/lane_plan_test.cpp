// launcher/lane_plan: the order to start compiles in so that N slots end
// together, checked against a list schedule of that order.

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include <npc/launcher/lane_plan.hpp>

namespace npc::launcher {
namespace {

// What a pool does with an order: each compile, in turn, on the slot that
// frees up first. Returns when the last one ends.
double list_schedule(const std::vector<double>& costs, const std::vector<std::size_t>& order,
                     std::vector<double> busy_for) {
  for (std::size_t c : order) *std::min_element(busy_for.begin(), busy_for.end()) += costs[c];
  return *std::max_element(busy_for.begin(), busy_for.end());
}

bool is_permutation_of_all(const std::vector<std::size_t>& order, std::size_t n) {
  std::vector<std::size_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != i) return false;
  return sorted.size() == n;
}

// The busy-CPU benchmark's 11 compiles (ms): longest first on 2 slots ends
// at 2113, 36 past sum/2; a split ending at 2079 exists.
const std::vector<double> kBench = {1000, 800, 600, 320, 311, 287, 264, 193, 151, 146, 82};

TEST(LanePlan, LongestFirstIsTheOrderByCost) {
  LanePlan lpt = longest_first({3, 9, 5, 9}, {0, 0});
  EXPECT_EQ(lpt.order, (std::vector<std::size_t>{1, 3, 2, 0}));
  EXPECT_EQ(lpt.makespan, 14); // 9+5 | 9+3
  EXPECT_EQ(longest_first(kBench, {0, 0}).makespan, 2113);
}

TEST(LanePlan, BeatsLongestFirstOnTheBenchmarkAndTheOrderReproducesIt) {
  LanePlan plan = plan_lanes(kBench, {0, 0});
  ASSERT_TRUE(is_permutation_of_all(plan.order, kBench.size()));
  // 1 ms past the best split (2079; sum/2 is 2077), 33 before longest first.
  EXPECT_EQ(plan.makespan, 2080);
  EXPECT_EQ(list_schedule(kBench, plan.order, {0, 0}), 2080);
  // The two longest start first, on different slots.
  EXPECT_EQ(plan.order[0], 0U);
}

TEST(LanePlan, CountsWhatAlreadyRuns) {
  // One slot busy for 10 more, the other free: 6+4 go beside it.
  LanePlan plan = plan_lanes({6, 5, 4, 5}, {10, 0});
  EXPECT_EQ(plan.makespan, 15); // 10+5 | 6+4+5
  EXPECT_EQ(list_schedule({6, 5, 4, 5}, plan.order, {10, 0}), 15);
  EXPECT_EQ(plan.order[0], 0U); // the free slot starts the 6 now
}

TEST(LanePlan, EdgeCases) {
  EXPECT_TRUE(plan_lanes({}, {0, 0}).order.empty());
  EXPECT_EQ(plan_lanes({}, {0, 0}).makespan, 0);
  LanePlan one_slot = plan_lanes({1, 3, 2}, {0});
  EXPECT_EQ(one_slot.order, (std::vector<std::size_t>{1, 2, 0}));
  EXPECT_EQ(one_slot.makespan, 6);
  LanePlan more_slots = plan_lanes({1, 3}, {0, 0, 0, 0});
  EXPECT_EQ(more_slots.makespan, 3);
  EXPECT_TRUE(is_permutation_of_all(more_slots.order, 2));
}

TEST(LanePlan, NeverWorseThanLongestFirstAndAlwaysReproducible) {
  std::mt19937 rng(17);
  std::lognormal_distribution<double> cost(5.0, 1.0);
  int better = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::size_t n = 2 + rng() % 60;
    std::size_t slots = 2 + rng() % 7;
    std::vector<double> costs(n);
    for (auto& c : costs) c = std::round(cost(rng));
    std::vector<double> busy(slots, 0.0);
    if (trial % 3 == 0) busy[0] = std::round(cost(rng));
    LanePlan plan = plan_lanes(costs, busy);
    LanePlan lpt = longest_first(costs, busy);
    ASSERT_TRUE(is_permutation_of_all(plan.order, n)) << "trial " << trial;
    ASSERT_LE(plan.makespan, lpt.makespan) << "trial " << trial;
    ASSERT_EQ(list_schedule(costs, plan.order, busy), plan.makespan) << "trial " << trial;
    ASSERT_EQ(list_schedule(costs, lpt.order, busy), lpt.makespan) << "trial " << trial;
    if (plan.makespan < lpt.makespan) ++better;
  }
  EXPECT_GT(better, 30); // the search finds better splits often, not once
}

TEST(LanePlan, BeyondTheLimitItIsLongestFirst) {
  std::vector<double> costs(kMaxPlannedCompiles + 1);
  for (std::size_t i = 0; i < costs.size(); ++i) costs[i] = static_cast<double>((i * 7919) % 1000 + 1);
  LanePlan plan = plan_lanes(costs, {0, 0, 0});
  LanePlan lpt = longest_first(costs, {0, 0, 0});
  EXPECT_EQ(plan.makespan, lpt.makespan);
  EXPECT_EQ(list_schedule(costs, plan.order, {0, 0, 0}), lpt.makespan);
}

} // namespace
} // namespace npc::launcher
