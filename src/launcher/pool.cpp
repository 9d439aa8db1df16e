#include <npc/launcher/pool.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

#include <npc/launcher/lane_plan.hpp>

namespace npc::launcher {

Pool::Pool(std::vector<WorkItem> items, PoolLimits limits)
    : items_(std::move(items)), progress_(items_.size()), limits_(limits) {
  limits_.max_parallel = std::max(1, limits_.max_parallel);
  for (std::size_t i = 0; i < items_.size(); ++i) order_.push_back(i);
  sort_longest_first();
}

void Pool::restore_longest_first() const {
  if (!planned_) return;
  sort_longest_first();
  planned_ = false;
}

void Pool::sort_longest_first() const {
  std::sort(order_.begin(), order_.end(), [this](std::size_t a, std::size_t b) {
    const auto& x = items_[a];
    const auto& y = items_[b];
    if (x.own_share != y.own_share) return x.own_share;
    if (x.predicted.seconds != y.predicted.seconds) return x.predicted.seconds > y.predicted.seconds;
    if (x.key != y.key) return x.key < y.key;
    return a < b;
  });
}

void Pool::refresh_order(double now) const {
  if (!plan_due_) return;
  plan_due_ = false;
  plan_order(now);
}

std::optional<double> Pool::known_cost(std::size_t i, const std::optional<SizeFit>& fit) const {
  const auto& item = items_[i];
  if (item.predicted.from_history) return item.predicted.seconds;
  if (fit && fit->samples >= kMinFitSamples && fit->relative_error <= kMaxFitError) return fit->at(item.graph_bytes);
  return std::nullopt;
}

bool Pool::still_left(std::size_t i) const {
  const ItemState state = progress_[i].state;
  return state == ItemState::queued || state == ItemState::running || state == ItemState::deferred ||
         state == ItemState::retry_wait;
}

bool Pool::waits_in_own_share(std::size_t i) const {
  const auto& p = progress_[i];
  return items_[i].own_share && (p.state == ItemState::queued || p.state == ItemState::retry_wait);
}

void Pool::plan_order(double now) const {
  // Launchers sharing a cache pick from a band by their seeds, not by a
  // plan: a plan of this host's slots does not hold while other hosts take
  // graphs from the same list, and planning after every compile on each of
  // 16 hosts was half of what their launchers spent.
  if (spread_seed_) return restore_longest_first();
  std::vector<std::size_t> waiting;
  for (std::size_t i : order_)
    if (waits_in_own_share(i)) waiting.push_back(i);
  // Beyond the plan's limit it would be longest first anyway (lane_plan.hpp).
  if (waiting.size() < 2 || waiting.size() > kMaxPlannedCompiles) return restore_longest_first();
  const std::optional<SizeFit> fit = fit_sizes(measured_);
  std::vector<double> costs;
  for (std::size_t i : waiting) {
    auto cost = known_cost(i, fit);
    if (!cost) return restore_longest_first(); // a guess would make a plan worse than none
    costs.push_back(*cost);
  }
  // The plan counts slots, not memory: when the costliest compiles cannot
  // all run at once within the budget, admission decides what runs beside
  // what, and longest first starts the big ones while there is room.
  if (limits_.memory_budget != 0) {
    std::vector<std::uint64_t> peaks;
    for (std::size_t i : waiting) peaks.push_back(items_[i].predicted.peak_bytes);
    std::sort(peaks.rbegin(), peaks.rend());
    std::uint64_t together = 0;
    for (std::size_t k = 0; k < peaks.size() && k < static_cast<std::size_t>(limits_.max_parallel); ++k)
      together += peaks[k]; // unknown (0) fits, as admission has it
    if (together > limits_.memory_budget) return restore_longest_first();
  }
  // What runs now keeps its slot for the rest of its predicted time; more
  // running than slots (after an OOM kill lowered the limit) share them.
  std::vector<double> busy_for(static_cast<std::size_t>(limits_.max_parallel), 0.0);
  std::vector<double> running_left;
  for (std::size_t i = 0; i < items_.size(); ++i) {
    if (progress_[i].state != ItemState::running) continue;
    double cost = known_cost(i, fit).value_or(items_[i].predicted.seconds);
    running_left.push_back(std::max(0.0, cost - (now - progress_[i].started_at)));
  }
  std::sort(running_left.rbegin(), running_left.rend());
  for (double left : running_left) *std::min_element(busy_for.begin(), busy_for.end()) += left;

  LanePlan plan = plan_lanes(costs, busy_for);
  LanePlan lpt = longest_first(costs, busy_for);
  const auto& chosen = plan.makespan <= lpt.makespan * (1 - kMinPlanGain) ? plan.order : lpt.order;
  // The waiting own share takes the places it had, in the chosen order;
  // everything else keeps its place.
  // The waiting own share takes the places it had, in the chosen order;
  // everything else keeps its place.
  std::size_t next = 0;
  for (auto& slot : order_)
    if (waits_in_own_share(slot)) slot = waiting[chosen[next++]];
  planned_ = true;
}

void Pool::mark_cached(std::size_t i) { progress_[i].state = ItemState::cached; }

void Pool::mark_cached_failure(std::size_t i, const fs::path& log_path) {
  progress_[i].state = ItemState::failed;
  progress_[i].cached_failure = true;
  progress_[i].log_path = log_path;
  progress_[i].last_exit = "failure cached by an earlier compile";
}

namespace {

// The next look at a graph held since `since`: a tenth of the hold so far
// later, within the floor and the ceiling (pool.hpp).
double next_look(double since, double now, double floor = kHeldElsewhereMinPollSeconds) {
  return now + std::clamp(kHeldElsewherePollShare * (now - since), floor, kHeldElsewhereMaxPollSeconds);
}

} // namespace

void Pool::mark_locked_elsewhere(std::size_t i, double now) {
  progress_[i].state = ItemState::deferred;
  progress_[i].deferred_since = now;
  progress_[i].eligible_at = now + kRevisitSeconds;
}

void Pool::mark_held_elsewhere(std::size_t i, double now) {
  auto& p = progress_[i];
  p.state = ItemState::deferred;
  p.held_elsewhere = true;
  p.held_elsewhere_since = now;
  p.deferred_since = now;
  // The taking's GET of the lock (or a look before a worker's start) was
  // the first look.
  p.held_looks = 1;
  p.eligible_at = now + kHeldElsewhereMinPollSeconds;
}

void Pool::mark_removed_elsewhere(std::size_t i) {
  progress_[i].last_exit = "removed by another process";
  settle(i, ItemState::removed_elsewhere);
}

bool Pool::fits(std::size_t i) const {
  if (limits_.memory_budget == 0 || running_ == 0) return true;
  std::uint64_t peak = items_[i].predicted.peak_bytes;
  return peak == 0 || memory_in_use_ + peak <= limits_.memory_budget;
}

bool Pool::ready(std::size_t i, double now) const {
  const ItemProgress& p = progress_[i];
  return p.state == ItemState::queued || (p.state == ItemState::retry_wait && p.eligible_at <= now);
}

std::optional<std::size_t> Pool::pick(double now) const {
  refresh_order(now);
  if (!out_of_space_.empty()) return std::nullopt;
  // A compile that must run alone goes first: nothing new starts until the
  // running ones have ended.
  for (std::size_t i : order_)
    if (progress_[i].alone && ready(i, now))
      return running_ == 0 ? std::optional<std::size_t>(i) : std::nullopt;
  if (running_ >= limits_.max_parallel) return std::nullopt;
  // Beyond this launcher's part, an everyone's graph is another's to pick:
  // after its own share, before the others' cheaper graphs.
  const bool part_running = everyones_part_running();
  if (auto help = help_first(now, part_running)) return help;
  std::optional<std::size_t> everyones;
  for (std::size_t i : order_) {
    if (!ready(i, now) || !fits(i)) continue;
    if (part_running && items_[i].everyones) {
      if (!everyones) everyones = i;
      continue;
    }
    if (everyones && !items_[i].own_share && items_[i].predicted.seconds <= items_[*everyones].predicted.seconds)
      return everyones;
    return spread_seed_ ? spread_from(i, now, part_running) : i;
  }
  return everyones;
}

void Pool::start(std::size_t i, double now) {
  auto& p = progress_[i];
  if (p.attempts > 0) ++p.retries;
  ++p.attempts;
  p.state = ItemState::running;
  p.started_at = now;
  if (p.alone) p.ran_alone = true;
  ++running_;
  memory_in_use_ += items_[i].predicted.peak_bytes;
}

void Pool::begin(std::size_t i, double now) { progress_[i].started_at = now; }

void Pool::withdraw(std::size_t i, double now) {
  auto& p = progress_[i];
  --running_;
  memory_in_use_ -= std::min(memory_in_use_, items_[i].predicted.peak_bytes);
  undo_start(i);
  p.state = p.attempts > 0 ? ItemState::retry_wait : ItemState::queued;
  work_ended(now);
}

double Pool::next_held_look(std::size_t i, double now) const {
  // Asked once: a scan of every item when nothing is ready, and a runner
  // revisits each held graph due in a tick.
  const bool out_of_work = running_ == 0 && !any_ready(now);
  const double since = progress_[i].held_elsewhere_since;
  return out_of_work ? next_look(std::max(since, last_end_), now, kOutOfWorkMinPollSeconds) : next_look(since, now);
}

void Pool::work_ended(double now) {
  last_end_ = now;
  if (running_ > 0 || any_ready(now)) return;
  // Out of work: what is left is held elsewhere, and this launcher ends
  // once its holders do. Their looks start again from the floor.
  for (auto& p : progress_)
    if (p.state == ItemState::deferred && p.held_elsewhere)
      p.eligible_at = std::min(p.eligible_at, now + kOutOfWorkMinPollSeconds);
}

void Pool::undo_start(std::size_t i) {
  auto& p = progress_[i];
  --p.attempts;
  if (p.attempts > 0) --p.retries;
}

void Pool::settle(std::size_t i, ItemState state) { progress_[i].state = state; }

void Pool::finish(std::size_t i, AttemptEnd end, const AttemptInfo& info, double now) {
  if (end == AttemptEnd::compiled)
    measured_.push_back({items_[i].graph_bytes, now - progress_[i].started_at, info.peak_rss_bytes});
  finish_attempt(i, end, info, now);
  give_up_waiting_items();
  changed(now);
  work_ended(now);
}

void Pool::give_up_waiting_items() {
  if (out_of_space_.empty()) return;
  for (std::size_t i = 0; i < progress_.size(); ++i) {
    auto& p = progress_[i];
    if (p.state != ItemState::queued && p.state != ItemState::retry_wait) continue;
    p.last_exit = p.attempts == 0 ? "not compiled: " + out_of_space_
                                  : p.last_exit + "; not retried: " + out_of_space_;
    if (p.attempts == 0) p.last_blame = Blame::surroundings;
    settle(i, ItemState::failed);
  }
}

void Pool::finish_attempt(std::size_t i, AttemptEnd end, const AttemptInfo& info, double now) {
  auto& p = progress_[i];
  --running_;
  memory_in_use_ -= std::min(memory_in_use_, items_[i].predicted.peak_bytes);
  p.last_exit = info.exit;
  p.last_blame = info.blame;
  p.peak_rss_bytes = std::max(p.peak_rss_bytes, info.peak_rss_bytes);
  if (!info.log_path.empty()) p.log_path = info.log_path;
  switch (end) {
  case AttemptEnd::compiled:
    p.compile_seconds += info.wall_seconds;
    return settle(i, ItemState::compiled);
  case AttemptEnd::already_done:
    undo_start(i); // it was not ours to compile
    return settle(i, ItemState::compiled_elsewhere);
  case AttemptEnd::locked_elsewhere:
    undo_start(i);
    return mark_locked_elsewhere(i, now);
  case AttemptEnd::failed_in_run:
    p.failed_in_run = true;
    [[fallthrough]];
  case AttemptEnd::cached_failure:
    p.cached_failure = true;
    return settle(i, ItemState::failed);
  case AttemptEnd::removed:
    undo_start(i); // nothing of it is left to compile or to count
    p.last_exit = "removed by another process";
    return settle(i, ItemState::removed_elsewhere);
  case AttemptEnd::killed:
    p.compile_seconds += info.wall_seconds;
    ++p.oom_kills;
    // Fewer compiles at once leave each more memory.
    limits_.max_parallel = std::max(1, limits_.max_parallel - 1);
    // What it reached before dying is a floor for its next peak.
    items_[i].predicted.peak_bytes = std::max(items_[i].predicted.peak_bytes, info.peak_rss_bytes);
    if (p.oom_kills <= kMaxOomRetries || p.attempts <= limits_.max_retries) {
      p.state = ItemState::retry_wait;
      p.eligible_at = now + kRetryBackoffSeconds;
      return;
    }
    // Killed with others running: it may fit by itself. Killed alone, it
    // does not fit this machine at all.
    if (!p.ran_alone) {
      p.alone = true;
      p.state = ItemState::retry_wait;
      p.eligible_at = now + kRetryBackoffSeconds;
      return;
    }
    return settle(i, ItemState::failed);
  case AttemptEnd::no_space:
    p.compile_seconds += info.wall_seconds;
    out_of_space_ = info.exit;
    return settle(i, ItemState::failed);
  case AttemptEnd::failed:
    p.compile_seconds += info.wall_seconds;
    if (p.attempts <= limits_.max_retries) {
      p.state = ItemState::retry_wait;
      p.eligible_at = now + std::min(kMaxRetryBackoffSeconds,
                                     kRetryBackoffSeconds * std::pow(2.0, p.attempts - 1));
      return;
    }
    return settle(i, ItemState::failed);
  }
}

std::vector<std::size_t> Pool::due_revisits(double now) const {
  const bool work_waits = any_ready(now);
  std::vector<std::size_t> due;
  for (std::size_t i = 0; i < progress_.size(); ++i)
    if (progress_[i].state == ItemState::deferred && progress_[i].eligible_at <= now &&
        !(progress_[i].held_elsewhere && work_waits))
      due.push_back(i);
  // The longest due first: a runner that looks at only some of them in one
  // tick (looks at a shared cache cost a request each) reaches the rest next.
  std::stable_sort(due.begin(), due.end(),
                   [this](std::size_t a, std::size_t b) { return progress_[a].eligible_at < progress_[b].eligible_at; });
  return due;
}

void Pool::revisit(std::size_t i, Found found, double now, const fs::path& log_path, const std::string& how) {
  changed(now);
  auto& p = progress_[i];
  if (found == Found::held_elsewhere) {
    if (!p.held_elsewhere) {
      p.held_elsewhere = true;
      p.held_elsewhere_since = now;
    }
    p.eligible_at = next_held_look(i, now);
    ++p.held_looks;
    return;
  }
  p.held_elsewhere = false;
  p.held_looks = 0;
  switch (found) {
  case Found::held_elsewhere: return; // above
  case Found::done: return settle(i, ItemState::compiled_elsewhere);
  case Found::failed:
    p.cached_failure = true;
    p.log_path = log_path;
    p.last_exit = how.empty() ? "failed in another process" : how;
    p.failed_in_run = !how.empty();
    return settle(i, ItemState::failed);
  case Found::pending: // its holder is gone: ours to compile now
    p.state = ItemState::queued;
    return give_up_waiting_items();
  case Found::locked:
    p.eligible_at = next_look(p.deferred_since, now);
    return;
  case Found::removed: return mark_removed_elsewhere(i);
  }
}

void Pool::look_again_when_lease_ends(std::size_t i, double lease_ends, double now) {
  auto& p = progress_[i];
  if (p.state != ItemState::deferred) return;
  // Never sooner than the floor of any look: a lease judged ended by a
  // clock a little behind this one is not looked at in a loop.
  const double at = std::max(lease_ends + kLookPastLeaseEndSeconds, now + kOutOfWorkMinPollSeconds);
  p.eligible_at = std::min(p.eligible_at, at);
}

void Pool::leave_to_lock_holder(std::size_t i) {
  progress_[i].last_exit = "locked by another process";
  settle(i, ItemState::locked_elsewhere);
}

bool Pool::only_deferred_left() const {
  bool any_deferred = false;
  for (const auto& p : progress_) {
    switch (p.state) {
    case ItemState::queued:
    case ItemState::running:
    case ItemState::retry_wait: return false;
    case ItemState::deferred: any_deferred = true; break;
    default: break;
    }
  }
  return any_deferred;
}

bool Pool::finished() const {
  for (const auto& p : progress_) {
    switch (p.state) {
    case ItemState::queued:
    case ItemState::running:
    case ItemState::deferred:
    case ItemState::retry_wait: return false;
    default: break;
    }
  }
  return true;
}

std::optional<double> Pool::next_due(double now) const {
  // Graphs held elsewhere wait for this pool's ready work (due_revisits).
  const bool work_waits = any_ready(now);
  std::optional<double> due;
  for (const auto& p : progress_)
    if ((p.state == ItemState::deferred && !(p.held_elsewhere && work_waits)) || p.state == ItemState::retry_wait)
      due = due ? std::min(*due, p.eligible_at) : p.eligible_at;
  return due;
}

bool Pool::any_ready(double now) const {
  for (std::size_t i = 0; i < progress_.size(); ++i)
    if (ready(i, now)) return true;
  return false;
}

std::size_t Pool::count(ItemState state) const {
  return static_cast<std::size_t>(std::count_if(progress_.begin(), progress_.end(),
                                                [state](const ItemProgress& p) { return p.state == state; }));
}

std::optional<double> Pool::remaining_work(double now) const {
  std::optional<double> per_byte; // this run's median, for graphs of unknown cost
  std::vector<double> rates;
  for (const auto& s : measured_)
    if (s.graph_bytes > 0) rates.push_back(s.seconds / static_cast<double>(s.graph_bytes));
  if (!rates.empty()) {
    std::nth_element(rates.begin(), rates.begin() + static_cast<std::ptrdiff_t>(rates.size() / 2), rates.end());
    per_byte = rates[rates.size() / 2];
  }
  double total = 0;
  for (std::size_t i = 0; i < items_.size(); ++i) {
    const auto& p = progress_[i];
    if (p.state != ItemState::queued && p.state != ItemState::retry_wait && p.state != ItemState::deferred &&
        p.state != ItemState::running)
      continue;
    double predicted = items_[i].predicted.seconds;
    if (!items_[i].predicted.from_history) {
      if (!per_byte) return std::nullopt;
      predicted = *per_byte * static_cast<double>(items_[i].graph_bytes);
    }
    switch (p.state) {
    case ItemState::queued:
    case ItemState::retry_wait:
    case ItemState::deferred: total += predicted; break;
    case ItemState::running: total += std::max(0.0, predicted - (now - p.started_at)); break;
    default: break;
    }
  }
  return total;
}

} // namespace npc::launcher
