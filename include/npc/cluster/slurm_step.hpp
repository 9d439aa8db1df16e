#pragma once
// The task of a Slurm job step this launcher is, when `srun` started it
// (`srun neuron_parallel_compile ...` on every node of an allocation): which
// task of how many, on which node. Its lines in the job's merged log name
// the task, its results file carries it, and its share of the graphs comes
// from it when --node_id / --world_size are not given.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace npc::cluster {

struct StepTask {
  int index = 0;        // SLURM_PROCID: 0 .. count - 1
  int count = 1;        // SLURM_STEP_NUM_TASKS (else SLURM_NTASKS)
  std::string node;     // SLURMD_NODENAME, else this host's name
  std::string step;     // "<job>.<step>" (SLURM_JOB_ID, SLURM_STEP_ID)
  int restarts = 0;     // SLURM_RESTART_COUNT: how often the job was requeued

  // "slurm step 4711.0", with ", restart 1" once the job was requeued: the
  // run the step's tasks make together, in which a graph failed for good by
  // one is failed for all (a requeued job tries again).
  [[nodiscard]] std::string run_name() const;

  // "task 2/4 node-a": what every line of this launcher starts with.
  [[nodiscard]] std::string label() const;
  // "node-a.task2": the part of a file name that tells the tasks apart
  // (characters other than letters, digits, '.', '-' and '_' become '_').
  [[nodiscard]] std::string file_tag() const;
};

// The most tasks a step is taken to have: each task keeps every task's name
// on the roll (step_roll.hpp) and ranks each graph against all of them, so
// a larger count (a variable set by hand) would cost memory and time for
// nothing; far beyond the largest steps this tool is run in.
inline constexpr int kMaxStepTasks = 100'000;

// What the variable `name` holds, if set.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// The task srun made of this process, or nullopt outside a step. A step is
// told by its step id: an sbatch batch script also has SLURM_PROCID and
// SLURM_NTASKS, but it is one process, not a task of a step. Values that are
// not numbers in range are a step nobody can tell apart: nullopt, with the
// reason in `why_not` when given.
[[nodiscard]] std::optional<StepTask> step_task_from(const EnvLookup& env, std::string* why_not = nullptr);
// The same from this process's environment.
[[nodiscard]] std::optional<StepTask> current_step_task(std::string* why_not = nullptr);

} // namespace npc::cluster
