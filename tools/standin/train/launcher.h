// The torchrun part: start one process of ourselves per rank, wait for all,
// report the total.
#pragma once

#include <string>
#include <vector>

#include "options.h"

namespace standin::train {

// Spawns options.nproc_per_node ranks with RANK, LOCAL_RANK and WORLD_SIZE
// set, sharing one work directory. Returns the first non-zero rank status
// in rank order (128 + signal for a killed rank), else prints the total
// line and returns 0.
int run_launcher(const TrainOptions& options, const std::string& argv0,
                 const std::vector<std::string>& args);

}  // namespace standin::train
