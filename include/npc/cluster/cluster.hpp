#pragma once
// The launchers a run shares its cache's graphs with, as the one object the
// run (run.cpp) and its event loop (pool_runner.hpp's run_pool) ask,
// whatever the cache is: who is on the roll and which graphs are this
// launcher's to start first (membership, launcher_roll.hpp), what the cache
// they share holds for a graph beyond this host's directory (look), a
// graph's lock taken before its worker starts and let go after it (take,
// attempt_ended), and the Slurm step's totals at the end (step_meeting.hpp).
//
// Alone (Cluster{}: a dry run, a collect, a test's launcher) it does
// nothing: a look finds nothing beyond the directory, a take is left to the
// worker, the roll never changes, and there are no totals. A launcher not
// told its share (no --world_size) adds the roll, in the cache whether a
// directory or S3; a cache named by URL (S3) adds its shared tier's looks
// and takes (shared_entry_look.hpp); a task of a Slurm step adds its
// meeting, and is on the roll through it. The loop asks the same questions
// of every combination.

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <npc/cache/found.hpp>
#include <npc/cluster/step_meeting.hpp>

namespace npc::cluster {

namespace fs = std::filesystem;

// A look at a deferred graph in the cache other hosts share, where a lock
// this host cannot see may hold it (cache::SharedTier::look for a shared tier): what
// the shared cache holds for the entry `entry_dir` now. Found::held_elsewhere
// when another host holds it, alive.
class HeldEntryLook {
public:
  virtual ~HeldEntryLook() = default;
  [[nodiscard]] virtual cache::Found look(const fs::path& entry_dir) = 0;
  // Looks at each of `entry_dirs` until `out_of_time()`: nullopt for those not
  // looked at (looked at later). A shared tier lists many at once.
  [[nodiscard]] virtual std::vector<std::optional<cache::Found>> look_all(const std::vector<fs::path>& entry_dirs,
                                                                         const std::function<bool()>& out_of_time) {
    std::vector<std::optional<cache::Found>> found(entry_dirs.size());
    for (std::size_t i = 0; i < entry_dirs.size() && !out_of_time(); ++i) found[i] = look(entry_dirs[i]);
    return found;
  }
  // Whether a result found done was downloaded into this host's directory.
  [[nodiscard]] virtual bool downloads() const { return true; }
  // When the lease of the lock a look found on the graph of `entry_dir`
  // ends unless its holder renews it, as last read; nullopt when not known
  // (a lock not read, presumed held for being new).
  [[nodiscard]] virtual std::optional<std::chrono::system_clock::time_point>
  lease_ends(const fs::path& entry_dir) const {
    (void)entry_dir;
    return std::nullopt;
  }

  // The shared lock of a graph about to be compiled, taken by the launcher
  // itself just before its worker starts (and renewed meanwhile), with the
  // graph brought into this host's directory: hosts walking the same graphs
  // at once then lose a race for one with a request or two, not a worker's
  // start, and the worker compiles in the directory alone (started without
  // --shared-cache). What it found is a look's answer (cache::Found):
  // - pending, with the lock taken here (Take::taken), or not (left to the
  //   worker, which takes it, brings the graph and uploads the result, as
  //   without this);
  // - held_elsewhere: another host holds the lock;
  // - done: the graph's result was there once the lock was taken (another
  //   host compiled it since the last look), and the lock let go;
  // - failed: another launcher of this run (set_run) failed it for good, as
  //   the shared entry's record says (TakeEnded::how: who and how), and the
  //   lock let go.
  struct Take {
    cache::Found found = cache::Found::pending;
    bool lock_taken = false; // with found == pending only
    static constexpr Take taken() { return {cache::Found::pending, true}; }
    static constexpr Take left_to_worker() { return {}; }
    static constexpr Take as_found(cache::Found found) { return {found, false}; }
    bool operator==(const Take&) const = default;
  };
  [[nodiscard]] virtual Take take_lock(const fs::path& entry_dir) {
    (void)entry_dir;
    return Take::left_to_worker();
  }
  // take_lock without holding up the event loop, which reaps workers and
  // starts the next: begin_take starts taking the lock of item `item`'s
  // entry, and takes_ended returns the takes ended since the last call
  // (their graph's lock taken, or not). While a take runs, wake_fd (when
  // not -1) turns readable once one has ended. By default the take is
  // take_lock, at once, in begin_take.
  struct TakeEnded {
    std::size_t item = 0;
    Take take = Take::left_to_worker();
    std::string how{}; // failed: "timed out after 3s in task 1/4 vm (slurm step 4711.0)"
  };
  // The run of launchers this one is part of (RunnerConfig::run): a graph
  // whose shared record says it failed for good in it is not taken.
  void set_run(std::string run) { run_ = std::move(run); }
  [[nodiscard]] const std::string& run() const { return run_; }
  virtual void begin_take(std::size_t item, const fs::path& entry_dir) {
    takes_ended_.push_back({item, take_lock(entry_dir)});
  }
  [[nodiscard]] virtual std::vector<TakeEnded> takes_ended() { return std::exchange(takes_ended_, {}); }
  [[nodiscard]] virtual int wake_fd() const { return -1; }
  // The worker of a graph take_lock took has ended: its result, if any, goes
  // to the shared cache and the lock is released (on threads of their own:
  // this returns at once).
  virtual void attempt_ended(const fs::path& entry_dir) { (void)entry_dir; }
  // Returns once what attempt_ended and begin_take started has ended; a
  // lock a take took that no worker got is released.
  virtual void finish() {}

private:
  std::vector<TakeEnded> takes_ended_; // the default begin_take's
  std::string run_;
};

// The launchers that split a shared cache's graphs among themselves, as
// the run goes (launcher_roll.hpp): the pool's shares follow what it shows.
class RollLook {
public:
  virtual ~RollLook() = default;
  [[nodiscard]] virtual const std::string& self() const = 0;
  // The names on the roll, sorted, when a look is due and finds them
  // changed; nothing otherwise.
  [[nodiscard]] virtual std::optional<std::vector<std::string>> changed(double now) = 0;
};

// The launchers of a run, as run_pool sees them (see the top of this file).
class Cluster {
public:
  // Alone.
  Cluster() = default;
  // Any part may be missing: `roll` without a roll, `shared_tier` without a
  // cache beyond this host's directory, `step` outside a Slurm step.
  // `spreads`: other hosts walk the same graphs at once (a cache named by
  // URL), so each picks its own among those of about the same cost.
  // (launcher/run_cluster.hpp makes the cluster of a run's options.)
  Cluster(std::shared_ptr<RollLook> roll, std::shared_ptr<HeldEntryLook> shared_tier,
          std::optional<StepMeeting> step = std::nullopt, bool spreads = false);

  // The shared tier's looks and takes, once its graphs are brought.
  void attach_shared_tier(std::shared_ptr<HeldEntryLook> shared_tier) { shared_ = std::move(shared_tier); }

  // -- Membership --
  // The launchers on the roll, sorted, when a look at it is due (by `now`,
  // the run's clock) and finds them changed; nothing otherwise.
  [[nodiscard]] std::optional<std::vector<std::string>> members_changed(double now) {
    return roll_ ? roll_->changed(now) : std::nullopt;
  }
  // This launcher's name on the roll.
  [[nodiscard]] const std::string& self() const;
  // The run of launchers this one is part of (RunnerConfig::run): a graph
  // failed for good in it by another is not taken again.
  void set_run(const std::string& run) {
    if (shared_) shared_->set_run(run);
  }
  // Other hosts pick among the same graphs at once: each should pick its
  // own among those of about the same cost (Pool::spread_picks).
  [[nodiscard]] bool spreads_picks() const { return spreads_; }

  // -- A graph beyond this host's directory --
  // Whether entries live beyond the directory: one absent there is pending
  // in the shared tier, and a lock the directory does not show may hold it.
  [[nodiscard]] bool entries_elsewhere() const { return shared_ != nullptr; }
  // What the cache the hosts share holds for a graph pending here.
  [[nodiscard]] cache::Found look(const fs::path& entry_dir) {
    return shared_ ? shared_->look(entry_dir) : cache::Found::pending;
  }
  [[nodiscard]] std::vector<std::optional<cache::Found>> look_all(const std::vector<fs::path>& entry_dirs,
                                                                 const std::function<bool()>& out_of_time);
  [[nodiscard]] std::optional<std::chrono::system_clock::time_point> lease_ends(const fs::path& entry_dir) const {
    return shared_ ? shared_->lease_ends(entry_dir) : std::nullopt;
  }
  // What a graph found done elsewhere is told as.
  [[nodiscard]] std::string done_elsewhere_event() const;

  // -- Locks --
  // A graph's lock, taken beside the loop before its worker starts
  // (HeldEntryLook::begin_take); alone, left to the worker at once.
  void begin_take(std::size_t item, const fs::path& entry_dir);
  [[nodiscard]] std::vector<HeldEntryLook::TakeEnded> takes_ended();
  [[nodiscard]] int wake_fd() const { return shared_ ? shared_->wake_fd() : -1; }
  // The worker of a graph whose lock was taken has ended.
  void attempt_ended(const fs::path& entry_dir) {
    if (shared_) shared_->attempt_ended(entry_dir);
  }
  // The last results up and the locks let go.
  void finish() {
    if (shared_) shared_->finish();
  }

  // -- The step's totals --
  // The graphs this task found, before it compiles, so that the step counts
  // them should it die. Nothing outside a step.
  void report_start(const TaskTotals& found);
  // This task's record for the step; task 0 then waits for the others and
  // logs the step's totals. Nothing outside a step.
  void report_end(const TaskTotals& mine);

private:
  std::shared_ptr<RollLook> roll_;
  std::shared_ptr<HeldEntryLook> shared_;
  std::optional<StepMeeting> step_;
  bool spreads_ = false; // the cache is named by URL: others walk its graphs at once
  std::vector<HeldEntryLook::TakeEnded> left_to_workers_; // the takes when alone
};

} // namespace npc::cluster
