#include <npc/launcher/pool.hpp>

#include <algorithm>
#include <functional>

#include <npc/cluster/share_owner.hpp>
#include <npc/util/random.hpp>

// How the pool's graphs are split with the other launchers of a cache
// (pool.hpp), in two rules. Each graph is the launcher's that ranks it first
// by the roll's rendezvous hash (cluster/share_owner.hpp), and each starts
// its own first, costliest first, then the others'. A graph that would end
// the run late (ends_the_run_late) is anyone's before its owner gets to it:
// at the split, the few costliest are made everyone's
// (share_the_critical); later, one of another's share goes before this
// launcher's own (help_first). Among graphs of about the same cost each
// launcher picks by a seed of its own (spread_from), which is only the
// tie-break of costliest first.

namespace npc::launcher {

void Pool::spread_picks(std::uint64_t seed, double band) {
  spread_seed_ = seed;
  spread_band_ = band;
}

void Pool::share_among(const std::vector<std::string>& members, const std::string& self) {
  for (auto& item : items_) item.own_share = members.empty() || members[cluster::share_owner(item.key, members)] == self;
  share_the_critical(members.size());
  shares_split_ = true;
  sort_longest_first();
  planned_ = false;
  plan_due_ = true;
}

void Pool::share_the_critical(std::size_t launchers) {
  // Those of an earlier look at the roll are the split's again.
  for (auto& item : items_)
    if (item.everyones) item.own_share = item.everyones = false;
  everyones_part_ = 0;
  launchers_ = std::max<std::size_t>(1, launchers);
  if (launchers <= 1) return;
  std::vector<std::size_t> left; // to compile, or compiling somewhere
  double load = 0;
  for (std::size_t i = 0; i < items_.size(); ++i) {
    if (!still_left(i)) continue;
    left.push_back(i);
    load += items_[i].predicted.seconds;
  }
  std::sort(left.begin(), left.end(), [this](std::size_t a, std::size_t b) {
    const auto& x = items_[a];
    const auto& y = items_[b];
    return x.predicted.seconds != y.predicted.seconds ? x.predicted.seconds > y.predicted.seconds : x.key < y.key;
  });
  const std::size_t most = std::min(left.size(), static_cast<std::size_t>(limits_.max_parallel));
  std::size_t critical = 0;
  for (; critical < most && ends_the_run_late(items_[left[critical]].predicted.seconds, load); ++critical) {
    WorkItem& item = items_[left[critical]];
    if (!item.own_share) item.own_share = item.everyones = true;
  }
  everyones_part_ = std::max<std::size_t>(1, (critical + launchers - 1) / launchers);
  sort_longest_first();
  planned_ = false;
  plan_due_ = true;
}

std::optional<std::size_t> Pool::help_first(double now, bool everyones_part_running) const {
  if (!shares_split_ || launchers_ <= 1) return std::nullopt;
  std::optional<std::size_t> own;
  std::optional<std::size_t> other;
  double left = 0; // to start, as this launcher knows: more than is, never less
  for (std::size_t i : order_) {
    if (!ready(i, now)) continue;
    left += items_[i].predicted.seconds;
    if (!fits(i)) continue;
    const bool counts_as_own = items_[i].own_share && !(everyones_part_running && items_[i].everyones);
    if (counts_as_own && !own) own = i;
    if (!items_[i].own_share && !other) other = i;
  }
  if (!other) return std::nullopt;
  const double cost = items_[*other].predicted.seconds;
  if (!ends_the_run_late(cost, left) || (own && cost <= kHelpFirstRatio * items_[*own].predicted.seconds))
    return std::nullopt;
  return spread_seed_ ? spread_from(*other, now, everyones_part_running) : *other;
}

bool Pool::ends_the_run_late(double cost, double work_left) const {
  return cost > work_left / (static_cast<double>(launchers_) * limits_.max_parallel);
}

bool Pool::everyones_part_running() const {
  if (everyones_part_ == 0) return false;
  std::size_t running = 0;
  for (std::size_t i = 0; i < items_.size(); ++i)
    if (items_[i].everyones && progress_[i].state == ItemState::running) ++running;
  return running >= everyones_part_;
}

std::size_t Pool::spread_from(std::size_t first, double now, bool everyones_part_running) const {
  const double floor = items_[first].predicted.seconds * (1.0 - spread_band_);
  // The seed and the graph's key mixed into this launcher's rank of it.
  auto rank = [&](std::size_t i) { return util::mix64(*spread_seed_ ^ std::hash<std::string>{}(items_[i].key)); };
  std::size_t best = first;
  std::uint64_t best_rank = rank(first);
  for (std::size_t i : order_) {
    if (i == first || !ready(i, now) || progress_[i].alone || items_[i].own_share != items_[first].own_share ||
        items_[i].predicted.seconds < floor || !fits(i) || (items_[i].everyones && everyones_part_running))
      continue;
    if (std::uint64_t r = rank(i); r < best_rank) {
      best = i;
      best_rank = r;
    }
  }
  return best;
}

} // namespace npc::launcher
