// Command line of the stand-in training script, modelled on the argparse
// options of a typical torch-neuronx training script.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hlo_builder.h"
#include "protocol.h"

namespace standin::train {

inline constexpr char kProgramName[] = "standin_train";
inline constexpr long kMaxRanks = 1024;

struct TrainOptions {
  long nproc_per_node = 1;
  long steps_this_run = 10;
  long layers = 4;
  long hidden = 256;
  long eval_every = 5;       // 0: never evaluate
  long late_graph_step = 0;  // 0: no late graph
  long last_batch = 0;       // rows of the last step's batch; 0: a full batch
  // How graphs are dumped: HLO text, or the binary HloModuleProto.
  GraphFormat graph_format = GraphFormat::kBinary;
  long graphs_per_step = 1;
  std::optional<long> crash_at_step;
  long step_ms = 0;
  std::optional<std::string> workdir;
  // Unset: $STANDIN_TRAIN_PROTOCOL decides (resolve_protocol).
  std::optional<Protocol> protocol;
  // Plays a script that does os.environ["NEURON_CC_FLAGS"] += " --cache_dir=DIR".
  std::optional<std::string> script_cache_dir;
  bool help = false;
};

// Throws a usage error (exit 2) with an argparse-like message.
TrainOptions parse_train_options(const std::vector<std::string>& args);

const char* train_usage();

}  // namespace standin::train
