#pragma once
// Where the tasks of one Slurm step meet to add up what they did, so that
// one line of the step's merged log says it: a folder of the cache every
// task sees (the shared tier of a cache behind a mirror, else the cache
// itself), .npc/steps/<job>.<step>/. Each task is on the launchers' roll
// under the step's and its own name from its start (launcher_roll.hpp:
// "slurm-4711.0.task-2", a lease it renews while it runs; one registry of
// who is alive for the roll's split and the step alike) and writes
// task-<i>.json in the folder at its end. Task 0, after its own run, waits
// until every other task has written its record or is gone (its lease
// absent, or stale by the one rule of storage/lock.hpp: a dead pid on this
// host at once, another host's once it stops renewing), then adds the
// records up and removes the folder.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <npc/cluster/slurm_step.hpp>
#include <npc/storage/storage.hpp>
#include <npc/util/result.hpp>

namespace npc::cluster {

class LauncherRoll;

// A task's name on the launchers' roll: "slurm-4711.0.task-2".
[[nodiscard]] std::string step_member_name(const StepTask& task, int index);

// What one task did, by graph (cache keys).
struct TaskTotals {
  std::vector<std::string> graphs;   // every graph it found
  std::vector<std::string> compiled; // compiled by this task
  std::vector<std::string> done;     // done without it: cached before, or finished by another process
  std::vector<std::string> failed;
};

struct StepTotals {
  std::string step;
  int tasks = 0;
  std::vector<int> reported;       // the tasks whose records were read
  std::size_t graphs = 0;          // every graph any task found
  std::size_t compiled = 0;        // compiled by a task of the step
  std::size_t compiling_tasks = 0; // how many tasks compiled at least one
  std::size_t already_done = 0;    // done without the step: cached before, or by another process
  std::size_t failed = 0;
  std::size_t left = 0;            // none of those: pending or held at the end, or found only by a task gone
  // "Slurm step 4711.0: 21 graphs: 21 compiled by 4 tasks, 0 already done,
  //  0 failed, 0 left (4 of 4 tasks reported)"
  [[nodiscard]] std::string line() const;
};

class StepMeeting {
public:
  // Puts this task on the roll under its name in the step (its lease
  // renewed over `lease_connection`), after removing a record an earlier
  // run of the same job step left. A task of the step that is already on
  // the roll, alive, is refused, saying who.
  static Result<StepMeeting> join(std::shared_ptr<storage::Storage> storage,
                                  std::shared_ptr<storage::Storage> lease_connection, const StepTask& task);

  StepMeeting(StepMeeting&&) noexcept = default;
  StepMeeting& operator=(StepMeeting&&) noexcept = default;

  // Writes the graphs this task found, before it compiles: a task that
  // dies before it reports still has them counted (left, unless another
  // task did them).
  Status found(const std::vector<std::string>& graphs);
  // Writes this task's record. Its lease stays until the meeting ends.
  Status report(const TaskTotals& mine);

  // Task 0, after report(): waits (looking every `poll`) until every other
  // task has reported or is gone, adds the records up and removes the
  // folder. `now` is the clock the leases are judged by.
  Result<StepTotals> gather(std::chrono::milliseconds poll,
                            const std::function<storage::Time()>& now = [] { return std::chrono::system_clock::now(); });

  [[nodiscard]] const std::string& folder() const { return folder_; }
  [[nodiscard]] const StepTask& task() const { return task_; }
  // This task on the launchers' roll.
  [[nodiscard]] const std::shared_ptr<LauncherRoll>& member() const { return member_; }

private:
  StepMeeting(std::shared_ptr<storage::Storage> storage, StepTask task, std::string folder);
  std::shared_ptr<storage::Storage> storage_;
  StepTask task_;
  std::string folder_; // ".npc/steps/<job>.<step>"
  std::shared_ptr<LauncherRoll> member_;
};

} // namespace npc::cluster
