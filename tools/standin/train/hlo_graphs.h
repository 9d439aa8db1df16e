// The HLO graphs of the stand-in model: an MLP of `layers` layers of width
// `hidden`, tensor-parallel over WORLD_SIZE ranks. Text depends only on the
// graph kind and the model shape, never on the rank, pid, time or paths, so
// every rank emits byte-identical graphs, as real SPMD training does.
#pragma once

#include <string>

#include "hlo_builder.h"
#include "schedule.h"

namespace standin::train {

struct ModelShape {
  long layers = 0;
  long hidden = 0;
  long world_size = 1;
};

// The graph as HLO text, or as the binary HloModuleProto torch-neuronx writes.
std::string make_graph(const GraphSpec& spec, const ModelShape& shape, GraphFormat format = GraphFormat::kText);

}  // namespace standin::train
