// One training process (one rank), as torchrun would start it.
#pragma once

#include "options.h"

namespace standin::train {

inline constexpr char kSummaryFile[] = "summary.txt";

// "<workdir>/rank-<r>": where a rank writes its graphs, NEFFs and summary.
std::string rank_directory(const std::string& workdir, long rank);

// Runs the training loop: traces each step's graphs, compiles every graph it
// has not seen before through the compile entry, prints the rank's summary
// line. Returns the exit status; throws StandinError on failures.
int run_rank(const TrainOptions& options, long rank, long world_size);

}  // namespace standin::train
