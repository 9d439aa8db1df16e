#pragma once
// A task of the Slurm step "4711.0" as SLURM_* would describe it, for the
// tests of the step's meeting and of its split.

#include <string>

#include <npc/cluster/slurm_step.hpp>

namespace npc::test {

inline cluster::StepTask step_task_of(int index, int count) {
  cluster::StepTask t;
  t.index = index;
  t.count = count;
  t.node = "node-" + std::to_string(index);
  t.step = "4711.0";
  return t;
}

} // namespace npc::test
