#include "schedule.h"

#include <tuple>

namespace standin::train {

std::string GraphSpec::name() const {
  switch (kind) {
    case GraphKind::kInit: return "init";
    case GraphKind::kTrain: return "train" + std::to_string(variant);
    case GraphKind::kEval: return "eval";
    case GraphKind::kLate: return "late";
    case GraphKind::kPartialBatch: return "partial" + std::to_string(variant);
  }
  return "unknown";
}

bool GraphSpec::operator<(const GraphSpec& other) const {
  return std::tie(kind, variant) < std::tie(other.kind, other.variant);
}

std::vector<GraphSpec> graphs_for_step(const TrainOptions& options, long step) {
  std::vector<GraphSpec> graphs;
  if (step == 0) graphs.push_back({GraphKind::kInit, 0});
  const bool last = step == options.steps_this_run - 1;
  for (long variant = 0; variant < options.graphs_per_step; ++variant) {
    if (variant == 0 && last && options.last_batch > 0) graphs.push_back({GraphKind::kPartialBatch, options.last_batch});
    else graphs.push_back({GraphKind::kTrain, variant});
  }
  if (options.eval_every > 0 && step % options.eval_every == options.eval_every - 1) {
    graphs.push_back({GraphKind::kEval, 0});
  }
  if (options.late_graph_step > 0 && step >= options.late_graph_step) {
    graphs.push_back({GraphKind::kLate, 0});
  }
  return graphs;
}

}  // namespace standin::train
