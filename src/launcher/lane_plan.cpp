#include <npc/launcher/lane_plan.hpp>

#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>

namespace npc::launcher {

namespace {

struct Lane {
  double end = 0;
  std::vector<std::size_t> compiles;
};

// Ties in cost broken by index, so that a plan does not depend on the
// standard library's sort.
std::vector<std::size_t> longest_first_indices(const std::vector<double>& costs) {
  std::vector<std::size_t> order(costs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return costs[a] != costs[b] ? costs[a] > costs[b] : a < b;
  });
  return order;
}

std::vector<Lane> lpt_lanes(const std::vector<double>& costs, const std::vector<double>& busy_for) {
  std::vector<Lane> lanes(std::max<std::size_t>(1, busy_for.size()));
  for (std::size_t l = 0; l < busy_for.size(); ++l) lanes[l].end = std::max(0.0, busy_for[l]);
  for (std::size_t c : longest_first_indices(costs)) {
    auto first_free = std::min_element(lanes.begin(), lanes.end(),
                                       [](const Lane& a, const Lane& b) { return a.end < b.end; });
    first_free->compiles.push_back(c);
    first_free->end += costs[c];
  }
  return lanes;
}

// Up to this many compiles in the two lanes, exchanges of two compiles for
// up to two are tried too (single moves and swaps get stuck short of the
// best split, e.g. at 2088 of 2079 on the benchmark's 11); beyond it their
// count grows too fast for a pool to wait on.
constexpr std::size_t kPairExchangeLimit = 48;
// Exchanges looked at in one plan, at most: a few milliseconds, since the
// pool plans again after every compile. What the search has found by then
// is used.
constexpr std::size_t kExchangesLooked = 2'000'000;

// Positions in a lane of up to `most` of its compiles: every subset of size
// `least`..`most` (at most 2).
std::vector<std::vector<std::size_t>> subsets(std::size_t size, std::size_t least, std::size_t most) {
  std::vector<std::vector<std::size_t>> out;
  if (least == 0) out.emplace_back();
  for (std::size_t a = 0; a < size; ++a) {
    if (most >= 1) out.push_back({a});
    if (most >= 2)
      for (std::size_t b = a + 1; b < size; ++b) out.push_back({a, b});
  }
  return out;
}

double cost_of(const Lane& lane, const std::vector<std::size_t>& positions, const std::vector<double>& costs) {
  double sum = 0;
  for (std::size_t p : positions) sum += costs[lane.compiles[p]];
  return sum;
}

std::vector<std::size_t> take(Lane& lane, const std::vector<std::size_t>& positions) {
  std::vector<std::size_t> taken;
  for (auto p = positions.rbegin(); p != positions.rend(); ++p) {
    taken.push_back(lane.compiles[*p]);
    lane.compiles.erase(lane.compiles.begin() + static_cast<std::ptrdiff_t>(*p));
  }
  return taken;
}

// One exchange between the lane ending last and another: the compiles it
// gives (one or two) for those it takes back (none to two), chosen to end
// that pair soonest, if any ends it sooner; false when none does.
bool improve_once(std::vector<Lane>& lanes, const std::vector<double>& costs, std::size_t& budget) {
  auto last = static_cast<std::size_t>(std::distance(
      lanes.begin(),
      std::max_element(lanes.begin(), lanes.end(), [](const Lane& a, const Lane& b) { return a.end < b.end; })));
  const double end = lanes[last].end;
  // Gains below this are rounding, not improvement (and could cycle).
  const double epsilon = 1e-9 * std::max(1.0, end);
  struct Exchange {
    double pair_end;
    std::size_t lane;
    std::vector<std::size_t> given, taken;
  };
  std::optional<Exchange> best;
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    if (l == last) continue;
    std::size_t most = lanes[last].compiles.size() + lanes[l].compiles.size() <= kPairExchangeLimit ? 2 : 1;
    auto taken_sets = subsets(lanes[l].compiles.size(), 0, most);
    for (const auto& given : subsets(lanes[last].compiles.size(), 1, most)) {
      const double out = cost_of(lanes[last], given, costs);
      budget -= std::min(budget, taken_sets.size());
      for (const auto& taken : taken_sets) {
        const double shift = out - cost_of(lanes[l], taken, costs);
        if (shift <= 0) continue;
        const double pair_end = std::max(end - shift, lanes[l].end + shift);
        if (pair_end < end - epsilon && (!best || pair_end < best->pair_end)) best = Exchange{pair_end, l, given, taken};
      }
    }
  }
  if (!best) return false;
  Lane& from = lanes[last];
  Lane& to = lanes[best->lane];
  auto given = take(from, best->given);
  auto taken = take(to, best->taken);
  for (std::size_t c : given) {
    from.end -= costs[c];
    to.end += costs[c];
    to.compiles.push_back(c);
  }
  for (std::size_t c : taken) {
    to.end -= costs[c];
    from.end += costs[c];
    from.compiles.push_back(c);
  }
  return true;
}

LanePlan dispatch_order(std::vector<Lane>& lanes, const std::vector<double>& costs,
                        const std::vector<double>& busy_for) {
  // (planned start, longer first, index): each lane longest first.
  std::vector<std::tuple<double, double, std::size_t>> starts;
  LanePlan plan;
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    auto& compiles = lanes[l].compiles;
    std::sort(compiles.begin(), compiles.end(), [&](std::size_t a, std::size_t b) {
      return costs[a] != costs[b] ? costs[a] > costs[b] : a < b;
    });
    double t = l < busy_for.size() ? std::max(0.0, busy_for[l]) : 0.0;
    for (std::size_t c : compiles) {
      starts.emplace_back(t, -costs[c], c);
      t += costs[c];
    }
    plan.makespan = std::max(plan.makespan, t);
  }
  std::sort(starts.begin(), starts.end());
  for (const auto& s : starts) plan.order.push_back(std::get<2>(s));
  return plan;
}

} // namespace

LanePlan longest_first(const std::vector<double>& costs, const std::vector<double>& busy_for) {
  auto lanes = lpt_lanes(costs, busy_for);
  LanePlan plan = dispatch_order(lanes, costs, busy_for);
  // Longest first is the order itself, whatever lane each ends up on.
  plan.order = longest_first_indices(costs);
  return plan;
}

LanePlan plan_lanes(const std::vector<double>& costs, const std::vector<double>& busy_for) {
  auto lanes = lpt_lanes(costs, busy_for);
  if (costs.size() <= kMaxPlannedCompiles && lanes.size() > 1) {
    // Each step makes a pair of lanes more even (their sum of squares falls)
    // or stops; the bound only guards against a float cycle.
    std::size_t budget = kExchangesLooked;
    for (std::size_t step = 0; step < 4 * costs.size() + 16 && budget > 0 && improve_once(lanes, costs, budget); ++step) {
    }
  }
  return dispatch_order(lanes, costs, busy_for);
}

} // namespace npc::launcher
