// Which graphs a training step executes. Mirrors how torch-xla traces:
// distinct graphs appear on the first step, on evaluation steps, and on
// rare execution paths reached only late in a run.
#pragma once

#include <string>
#include <vector>

#include "options.h"

namespace standin::train {

enum class GraphKind { kInit, kTrain, kEval, kLate, kPartialBatch };

struct GraphSpec {
  GraphKind kind = GraphKind::kTrain;
  long variant = 0;  // training micro-batch variant, 0..graphs_per_step-1;
                     // kPartialBatch: the rows of the partial batch

  // Stable name, e.g. "train1"; the same on every rank.
  std::string name() const;
  bool operator<(const GraphSpec& other) const;
};

// Graphs of step `step` (0-based), in execution order: the initialisation
// graph on step 0, every training-step variant, the evaluation graph when
// step % eval_every == eval_every - 1, and the late graph from
// late_graph_step on. With last_batch, the run's last step trains variant 0
// on that many rows (the partial batch a dataset whose size the batch does
// not divide ends with): a graph of its own.
std::vector<GraphSpec> graphs_for_step(const TrainOptions& options, long step);

}  // namespace standin::train
