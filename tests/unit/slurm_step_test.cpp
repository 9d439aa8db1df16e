// cluster/slurm_step: which task of a Slurm step a launcher is, from the
// variables srun gives each task.

#include <npc/cluster/slurm_step.hpp>

#include <map>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

namespace npc::cluster {
namespace {

using Vars = std::map<std::string, std::string>;

std::optional<StepTask> task_of(const Vars& vars, std::string* why_not = nullptr) {
  return step_task_from(
      [&](const char* name) -> std::optional<std::string> {
        auto found = vars.find(name);
        if (found == vars.end()) return std::nullopt;
        return found->second;
      },
      why_not);
}

// What srun sets for task 2 of `srun -N 2 -n 4` (plus what sbatch set before).
const Vars kTaskOfAStep = {{"SLURM_JOB_ID", "4711"},         {"SLURM_STEP_ID", "0"},
                           {"SLURM_PROCID", "2"},            {"SLURM_STEP_NUM_TASKS", "4"},
                           {"SLURM_NTASKS", "4"},            {"SLURMD_NODENAME", "trn1-node-b"},
                           {"SLURM_LOCALID", "0"},           {"SLURM_NODEID", "1"}};

TEST(StepTask, ATaskOfAStepKnowsItsIndexCountNodeAndStep) {
  auto task = task_of(kTaskOfAStep);
  ASSERT_TRUE(task);
  EXPECT_EQ(task->index, 2);
  EXPECT_EQ(task->count, 4);
  EXPECT_EQ(task->node, "trn1-node-b");
  EXPECT_EQ(task->step, "4711.0");
  EXPECT_EQ(task->label(), "task 2/4 trn1-node-b");
  EXPECT_EQ(task->file_tag(), "trn1-node-b.task2");
}

TEST(StepTask, ABatchScriptIsNoTask) {
  // sbatch -n 4: the script runs once, with SLURM_PROCID=0 and SLURM_NTASKS=4
  // but no step id. Taking it for task 0 of 4 would leave three quarters of
  // the graphs to launchers that never start.
  Vars batch = kTaskOfAStep;
  batch.erase("SLURM_STEP_ID");
  batch["SLURM_PROCID"] = "0";
  std::string why;
  EXPECT_FALSE(task_of(batch, &why));
  EXPECT_EQ(why, "");
  EXPECT_FALSE(task_of({}));
}

TEST(StepTask, OlderNamesAndTheJobsTaskCountAreUnderstood) {
  Vars older = {{"SLURM_JOBID", "12"}, {"SLURM_STEPID", "3"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"},
                {"SLURMD_NODENAME", "n1"}};
  auto task = task_of(older);
  ASSERT_TRUE(task);
  EXPECT_EQ(task->index, 1);
  EXPECT_EQ(task->count, 2);
  EXPECT_EQ(task->step, "12.3");
}

TEST(StepTask, WithoutANodeNameTheHostsNameIsUsed) {
  Vars vars = kTaskOfAStep;
  vars.erase("SLURMD_NODENAME");
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  auto task = task_of(vars);
  ASSERT_TRUE(task);
  EXPECT_EQ(task->node, host);
}

TEST(StepTask, ValuesThatNameNoTaskAreNoTaskAndSayWhy) {
  for (const auto& [procid, tasks] : std::map<std::string, std::string>{
           {"4", "4"}, {"-1", "4"}, {"x", "4"}, {"1", "0"}, {"1", ""}, {"1 ", "4"}, {"1", "100001"},
           {"1", "2147483647"}}) {
    Vars vars = kTaskOfAStep;
    vars["SLURM_PROCID"] = procid;
    vars["SLURM_STEP_NUM_TASKS"] = tasks;
    if (tasks.empty()) vars.erase("SLURM_NTASKS");
    std::string why;
    EXPECT_FALSE(task_of(vars, &why)) << procid << " of " << tasks;
    EXPECT_EQ(why, "SLURM_PROCID='" + procid + "' and SLURM_STEP_NUM_TASKS='" + tasks + "' name no task of the step");
  }
}

TEST(StepTask, AFileTagKeepsOnlyPlainCharacters) {
  StepTask task;
  task.index = 7;
  task.count = 8;
  task.node = "node a/b:c";
  EXPECT_EQ(task.file_tag(), "node_a_b_c.task7");
}

} // namespace
} // namespace npc::cluster
