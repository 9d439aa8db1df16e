#pragma once
// The pool's decisions, apart from processes and clocks (times are plain
// seconds passed in), so that ordering, memory admission, retries and
// revisits can be tested with no compiler at all. pool_runner drives it with
// real worker processes.
//
// Order: this launcher's own share first, then the rest; within each, the
// costliest predicted compile first, so the longest does not start last.
// Once the own share's costs are known well enough to plan with (every one
// from the cache's history, or a fit of this run's measured compiles to
// graph size that explains them: cost_model.hpp), it is ordered by a plan of the slots
// (lane_plan.hpp) instead, when that plan ends at least kMinPlanGain
// sooner than longest first would; planned again after each compile. Not
// when memory limits what runs together (the largest predicted peaks do
// not fit in the budget at once): admission decides then, and longest
// first starts the big compiles while there is room.
// Memory: never start a compile whose predicted peak does not fit in what is
// left of the budget, unless nothing else runs. A compile killed by SIGKILL
// (what the OOM killer sends) lowers the parallelism by one and is retried;
// one killed kMaxOomRetries + 1 times gets a last attempt alone: no new
// compile starts until the running ones end, then it runs by itself.
// Space: a compile that ran out of disk space is not retried, and nothing
// new starts after it; every graph not compiled by then is failed with the
// reason (a full filesystem stays full, and each compile would run to its
// end before failing the same way). Their entries stay pending for a rerun.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <npc/cache/found.hpp>
#include <npc/launcher/cost_model.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

struct WorkItem {
  fs::path entry_dir;
  std::string key;
  std::uint64_t graph_bytes = 0;
  Prediction predicted;
  bool own_share = true;
  // Own only as one of the graphs that would end the run late
  // (Pool::share_the_critical), not by the split of the shares.
  bool everyones = false;
};

enum class ItemState {
  queued,
  running,
  deferred,           // another process holds its lock; revisited later
  retry_wait,         // failed, retried after a backoff
  compiled,           // compiled by us
  cached,             // was done at the start
  compiled_elsewhere, // another process finished it while we waited
  failed,             // out of retries, or a cached failure
  locked_elsewhere,   // at the end, still locked by a process we cannot wait
                      // for (the framework, another host): not compiled by us
  removed_elsewhere   // its entry was removed by another process (neuron_cache
                      // rm, --command clean): nothing left to compile, not a failure
};

// Who ended an attempt that failed: the compiler (its exit, a signal, a
// timeout), or something around it (a full disk, an unusable cache or S3,
// the worker's own error), which the summary must not blame on the compiler.
enum class Blame { compiler, surroundings };

struct ItemProgress {
  ItemState state = ItemState::queued;
  int attempts = 0;   // attempts we started
  int retries = 0;    // of which were retries
  int oom_kills = 0;
  double eligible_at = 0;
  double started_at = 0;
  double compile_seconds = 0; // wall time of our attempts, summed
  std::string last_exit;      // how the last attempt ended
  Blame last_blame = Blame::compiler;
  std::uint64_t peak_rss_bytes = 0;
  fs::path log_path;
  bool cached_failure = false;
  bool failed_in_run = false; // failed for good by another launcher of this run (RunnerConfig::run)
  bool alone = false;     // its next attempt runs with nothing else (after OOM kills)
  bool ran_alone = false; // an attempt of it ran alone
  // Deferred for a lock another host holds in the cache they share, as the
  // launcher's own look found (Found::held_elsewhere): since when, and how
  // many looks in a row found it so (the poll's backoff).
  bool held_elsewhere = false;
  double held_elsewhere_since = 0;
  int held_looks = 0;
  // When it was last deferred for a lock of this cache (Found::locked): the
  // looks at it spread out as the hold goes on.
  double deferred_since = 0;
};

struct PoolLimits {
  int max_parallel = 1;
  std::uint64_t memory_budget = 0; // 0: not limited
  int max_retries = 0;
};

enum class AttemptEnd {
  compiled,         // success
  already_done,     // done by another process
  failed,           // the compiler failed (or timed out)
  killed,           // the compile died by SIGKILL (the OOM killer's signal)
  locked_elsewhere, // another process holds the lock
  cached_failure,   // another process's failure is cached
  failed_in_run,    // another launcher of this run failed it for good (its
                    // last attempt; compile::EntryOutcome::failed_in_run)
  removed,          // the entry was gone before or while the worker ran
  no_space          // the compile ran out of disk space: nothing cached, the
                    // entry left pending, and no compile starts after it
};

struct AttemptInfo {
  double wall_seconds = 0;
  std::string exit; // "exit code 70", "killed by signal SIGKILL", "timed out after 30s"
  std::uint64_t peak_rss_bytes = 0;
  fs::path log_path;
  Blame blame = Blame::compiler;
};

// Backoff before a retry: short, growing, bounded.
inline constexpr double kRetryBackoffSeconds = 0.5;
inline constexpr double kMaxRetryBackoffSeconds = 8;
// How soon a graph locked by another process is first looked at again;
// then, as for a graph held elsewhere (below), a tenth of how long it has
// been locked later, within the same floor and ceiling. A look here is a
// stat or two.
inline constexpr double kRevisitSeconds = 0.5;
// A graph whose lock another host holds is looked at in the shared cache by
// the launcher itself (on S3 one LIST of its folder, and a GET of the lock
// while the lock is there), each time after a tenth of how long it has been
// seen held, at least kHeldElsewhereMinPollSeconds and at most
// kHeldElsewhereMaxPollSeconds apart: its result is seen at most about 10%
// of its compile later (0.5 s for a short one), which a fixed backoff cannot
// promise for compiles of seconds, and a compile of minutes costs a look
// every 10 s, 0.1 LIST and 0.1 GET a second: 500 graphs held by another
// node make 50 LISTs a second, far under S3's request rates and about $1 an
// hour of LIST requests. The looks of one tick are bounded in time
// (pool_runner.hpp's kHeldLookBudgetPerTick), which bounds a host's rate.
// Once the launcher has nothing else left (nothing running, nothing ready)
// the tenth is of the time since it ran out of work, and the looks start
// again from a lower floor, kOutOfWorkMinPollSeconds: its end then comes at
// most about a tenth of its wait after the holders', not a tenth of holds
// that began at the run's start, and a launcher idle at a run's end looks
// at the few graphs left (a LIST each) often while the holders are about to
// end, then less and less often.
inline constexpr double kHeldElsewhereMinPollSeconds = 0.5;
inline constexpr double kOutOfWorkMinPollSeconds = 0.2;
inline constexpr double kHeldElsewhereMaxPollSeconds = 10.0;
inline constexpr double kHeldElsewherePollShare = 0.1;
// A lock's lease whose end is known is looked at again this long after it,
// when that comes before the look its backoff sets: a lock is stale from
// the second of its expiry (storage/lock.hpp), so a holder that died is
// found gone at once, not up to kHeldElsewhereMaxPollSeconds later.
inline constexpr double kLookPastLeaseEndSeconds = 0.2;
// A plan replaces longest first only when it ends at least this share of
// the time sooner: smaller gains are within any prediction's error.
inline constexpr double kMinPlanGain = 0.005;
// This run's compiles are planned with only when a line through at least
// this many explains their times to within this error (cost_model.hpp's
// SizeFit): with sizes that say little of the cost, a plan is as likely to
// end later than longest first as sooner (docs/schedule-overhead.md).
inline constexpr std::size_t kMinFitSamples = 3;
inline constexpr double kMaxFitError = 0.1;
// How far below the costliest graph ready a launcher sharing a cache with
// others may pick (Pool::spread_picks): wide enough that 16 hosts find
// graphs of their own among a few hundred, narrow enough that the order
// stays costliest first (a graph started at 90% of the top's cost ends the
// run at most that much sooner than the top would have).
inline constexpr double kSpreadBand = 0.25;
// Once the shares are split, a graph of another launcher's share is picked
// before this launcher's own when it is costlier than the work left to start
// per slot of the cluster and this many times costlier than the costliest
// own graph ready (Pool::pick): its owner, busy with costlier graphs of its
// share, might start it only once one of them ends, and then it would end
// the run late. Early in a run no graph but the few everyone's is costlier
// than the work per slot, so the launchers do not all chase the same
// graphs then; late in a run, small graphs of a launcher's own wait, as
// costliest first across the cluster has it.
inline constexpr double kHelpFirstRatio = 1.5;
// SIGKILLed compiles are retried (with less parallelism) this many times
// even when --max-retries is 0: the failure says nothing about the graph.
inline constexpr int kMaxOomRetries = 2;

class Pool {
public:
  Pool(std::vector<WorkItem> items, PoolLimits limits);

  // Initial states found in the cache before any compile.
  void mark_cached(std::size_t i);
  void mark_cached_failure(std::size_t i, const fs::path& log_path);
  void mark_locked_elsewhere(std::size_t i, double now);
  // Its lock held by another host, as found when its graph was taken
  // (cluster/shared_graphs.hpp): deferred and looked at in the shared cache
  // as after a first look that found it so (Found::held_elsewhere), so no
  // worker starts only to meet the lock.
  void mark_held_elsewhere(std::size_t i, double now);
  void mark_removed_elsewhere(std::size_t i);

  // Launchers sharing a cache walk the same graphs in the same order and
  // would race for each one: spread their picks. Among the graphs ready to
  // start whose prediction is within `band` (a share) of the first one's,
  // this launcher takes the one that `seed` ranks first (rendezvous
  // hashing): launchers with different seeds start different graphs of about
  // the same cost, and costliest first still holds across them. No plan of
  // the slots orders them then.
  void spread_picks(std::uint64_t seed, double band);

  // Launchers that split the graphs among themselves (launcher_roll.hpp):
  // each item is this launcher's own when `self` owns it among `members`
  // (share_owner.hpp), and the order puts its own first again. From then on
  // the shares are split (shares_split).
  void share_among(const std::vector<std::string>& members, const std::string& self);
  // The shares made by --world_size (make_items) split the graphs too.
  void split_by_world() { shares_split_ = true; }
  // The graphs that would end the run late if their owner started them
  // late are every launcher's own: those costlier than the work left per
  // slot of `launchers` launchers like this one (the cluster's bound when
  // the graphs fit evenly), at most this launcher's slots' worth,
  // costliest first. Whichever launcher is free first takes them, so a host
  // that starts a second late (its collect slowed), or is busy with its own
  // share, does not put the run's end behind its start; the lock settles
  // who compiles each, and the others lose a create-only PUT or a look.
  // A launcher starts at most its part of them (their number over the
  // launchers', at least one) beyond those of its own share: the one that
  // starts first would otherwise take them all, on top of a share as costly
  // as any other's. Beyond that part they are picked as others' graphs.
  void share_the_critical(std::size_t launchers);
  // Whether the other launchers at work know which graphs are this one's:
  // then a graph of its own share is rarely another's to take, and its
  // lock is taken without a look first.
  [[nodiscard]] bool shares_split() const { return shares_split_; }

  // The next item to start now, if any may start.
  [[nodiscard]] std::optional<std::size_t> pick(double now) const;
  void start(std::size_t i, double now);
  // A start whose compile waits for something first (its shared lock taken
  // on another thread): its slot is taken from start on; `begin` when the
  // compile does begin (its time counts from then), `withdraw` when it will
  // not (the lock held by another host, the graph found compiled), and the
  // item is as before the start, to be marked at once for what was found.
  void begin(std::size_t i, double now);
  void withdraw(std::size_t i, double now);
  void finish(std::size_t i, AttemptEnd end, const AttemptInfo& info, double now);
  // Whether a failure of item i's attempt running now would fail it for
  // good (no retry follows; a kill from outside is retried by its own rule).
  [[nodiscard]] bool last_attempt(std::size_t i) const { return progress_[i].attempts > limits_.max_retries; }

  // Deferred items due for a look, the longest due first, and what that
  // look found. A graph held by another host is not due while a graph of
  // this pool waits ready to start: its look costs requests, and what it
  // can find (the result there, the holder gone) changes nothing until this
  // host has no other work; then all such graphs due come at once, and one
  // walk of the shared tier settles them.
  [[nodiscard]] std::vector<std::size_t> due_revisits(double now) const;
  // What a look at the entry found (cache/found.hpp), here or in the tier
  // the hosts share.
  using Found = cache::Found;
  // Found::failed: `how` says who failed it and how, when known (another
  // launcher of this run: cache::describe_run_failure).
  void revisit(std::size_t i, Found found, double now, const fs::path& log_path = {}, const std::string& how = {});
  // After a look that found item i held: its holder's lease ends at
  // `lease_ends` (this pool's clock) unless renewed, and the graph is looked
  // at again then when that is sooner than its next look. A holder alive
  // renews its lease well before (storage::kLockTtl, renewed every third),
  // so its graphs are looked at no more often than before.
  void look_again_when_lease_ends(std::size_t i, double lease_ends, double now);

  // Stops waiting for a deferred item: it stays with its lock holder.
  void leave_to_lock_holder(std::size_t i);
  // Whether everything not finished is deferred (nothing runs or waits to run).
  [[nodiscard]] bool only_deferred_left() const;

  [[nodiscard]] bool finished() const;
  // When something becomes due (a retry or a revisit), if anything waits.
  [[nodiscard]] std::optional<double> next_due(double now) const;

  [[nodiscard]] int parallel_limit() const { return limits_.max_parallel; }
  [[nodiscard]] int running() const { return running_; }
  [[nodiscard]] std::uint64_t memory_in_use() const { return memory_in_use_; }
  [[nodiscard]] const std::vector<WorkItem>& items() const { return items_; }
  [[nodiscard]] const std::vector<ItemProgress>& progress() const { return progress_; }
  [[nodiscard]] const std::vector<std::size_t>& order() const {
    refresh_order(last_event_at_);
    return order_;
  }
  [[nodiscard]] std::size_t count(ItemState state) const;
  // Predicted seconds of compiling still to do (queued, waiting, and the
  // unfinished part of running compiles). A graph with no history of its
  // own or of similar graphs is costed at this run's measured seconds per
  // graph byte; before this run has measured any compile that is nothing
  // to go on, and the result is nullopt (unknown), never a confident zero.
  [[nodiscard]] std::optional<double> remaining_work(double now) const;

private:
  [[nodiscard]] bool fits(std::size_t i) const;
  void settle(std::size_t i, ItemState state);
  void finish_attempt(std::size_t i, AttemptEnd end, const AttemptInfo& info, double now);
  // After a space fault: what waits to start will not, and fails saying why.
  void give_up_waiting_items();
  void undo_start(std::size_t i); // an attempt that turned out not to be one
  // Orders the own share's waiting compiles by a plan of the slots, when
  // their costs are known well enough (see the top of this file), if
  // anything changed since the last plan. The order is derived from the
  // states, so it is planned when asked for (pick, order), not when a state
  // changes: the marks of cached and locked entries come after construction.
  void refresh_order(double now) const;
  void plan_order(double now) const;
  void sort_longest_first() const; // by predicted seconds, own share first
  void restore_longest_first() const; // if a plan reordered it
  // Another launcher's graph to pick before this one's own (kHelpFirstRatio),
  // if any.
  [[nodiscard]] std::optional<std::size_t> help_first(double now, bool everyones_part_running) const;
  // Whether a graph of `cost` seconds would end the run late if its owner
  // started it late: it costs more than `work_left` (seconds of graphs still
  // to start) per slot of the launchers the graphs are split among, each
  // with this launcher's slots. The one test of share_the_critical and
  // help_first.
  [[nodiscard]] bool ends_the_run_late(double cost, double work_left) const;
  // Whether this launcher starts as many of the everyone's graphs as it
  // may (share_the_critical).
  [[nodiscard]] bool everyones_part_running() const;
  // To compile still, or compiling here or elsewhere.
  [[nodiscard]] bool still_left(std::size_t i) const;
  [[nodiscard]] bool waits_in_own_share(std::size_t i) const;
  void changed(double now) {
    plan_due_ = true;
    last_event_at_ = now;
  }
  [[nodiscard]] std::optional<double> known_cost(std::size_t i, const std::optional<SizeFit>& fit) const;
  // Among the ready items near `first`'s cost, the one spread_picks' seed
  // ranks first (not an everyone's graph once this launcher runs its part
  // of them: `everyones_part_running`).
  [[nodiscard]] std::size_t spread_from(std::size_t first, double now, bool everyones_part_running) const;
  [[nodiscard]] bool ready(std::size_t i, double now) const;
  [[nodiscard]] bool any_ready(double now) const;

  std::vector<WorkItem> items_;
  std::vector<ItemProgress> progress_;
  mutable std::vector<std::size_t> order_;
  mutable bool plan_due_ = true;
  mutable bool planned_ = false; // order_ is a plan's, not longest first
  double last_event_at_ = 0;
  PoolLimits limits_;
  // The last compile (or take) of this launcher that ended, and what that
  // does to the looks at graphs held elsewhere once nothing else is left:
  // they back off from then, not from when each was first seen held, so a
  // launcher out of work ends at most about a tenth of its wait late, not
  // a tenth of the holds (of graphs taken at the run's start, say).
  double last_end_ = 0;
  // When to look again at item i, held elsewhere, looked at `now`.
  [[nodiscard]] double next_held_look(std::size_t i, double now) const;
  void work_ended(double now);
  std::optional<std::uint64_t> spread_seed_; // spread_picks
  bool shares_split_ = false;
  std::size_t everyones_part_ = 0; // share_the_critical's: how many a launcher starts
  std::size_t launchers_ = 1;       // share_the_critical's: the launchers the graphs are split among
  double spread_band_ = 0;
  int running_ = 0;
  std::uint64_t memory_in_use_ = 0;
  std::string out_of_space_; // how the space fault was reported; empty: none
  // This run's compiles: graph size and how long each held its slot.
  std::vector<CostModel::Sample> measured_;
};

} // namespace npc::launcher
