#include "options.h"

#include <climits>

#include "args.h"
#include "error.h"

namespace standin::train {
namespace {

// Generous bounds that still keep generated graphs and process counts sane.
constexpr long kMaxLayers = 4096;
constexpr long kMaxHidden = 1L << 20;
constexpr long kMaxGraphsPerStep = 1024;
constexpr long kMaxCount = LONG_MAX / 2;

}  // namespace

TrainOptions parse_train_options(const std::vector<std::string>& args) {
  TrainOptions options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const OptionWord option = split_option(args[i]);
    const std::string& name = option.name;
    if (name == "-h" || name == "--help") {
      options.help = true;
      return options;
    }
    auto int_value = [&](long min, long max) {
      return parse_int_option(name, take_value(args, i, option), min, max);
    };
    if (name == "--nproc_per_node") {
      options.nproc_per_node = int_value(1, kMaxRanks);
    } else if (name == "--steps_this_run") {
      options.steps_this_run = int_value(0, kMaxCount);
    } else if (name == "--layers") {
      options.layers = int_value(1, kMaxLayers);
    } else if (name == "--hidden") {
      options.hidden = int_value(1, kMaxHidden);
    } else if (name == "--eval_every") {
      options.eval_every = int_value(0, kMaxCount);
    } else if (name == "--late_graph_step") {
      options.late_graph_step = int_value(0, kMaxCount);
    } else if (name == "--last_batch") {
      options.last_batch = int_value(0, kMaxHidden);
    } else if (name == "--graph_format") {
      const std::string format = take_value(args, i, option);
      if (format == "text") options.graph_format = GraphFormat::kText;
      else if (format == "binary") options.graph_format = GraphFormat::kBinary;
      else throw usage_error("argument --graph_format: invalid choice: '" + format + "' (choose from 'text', 'binary')");
    } else if (name == "--graphs_per_step") {
      options.graphs_per_step = int_value(1, kMaxGraphsPerStep);
    } else if (name == "--crash_at_step") {
      options.crash_at_step = int_value(0, kMaxCount);
    } else if (name == "--step_ms") {
      options.step_ms = int_value(0, kMaxCount);
    } else if (name == "--workdir") {
      options.workdir = take_value(args, i, option);
    } else if (name == "--protocol") {
      options.protocol = parse_protocol(take_value(args, i, option), "argument --protocol");
    } else if (name == "--script_cache_dir") {
      options.script_cache_dir = take_value(args, i, option);
    } else {
      throw usage_error("unrecognized arguments: " + args[i]);
    }
  }
  return options;
}

const char* train_usage() {
  return "usage: standin_train [-h] [--nproc_per_node R] [--steps_this_run N] [--layers L]\n"
         "                     [--hidden H] [--eval_every K] [--late_graph_step N]\n"
         "                     [--graphs_per_step G] [--crash_at_step K] [--step_ms MS]\n"
         "                     [--last_batch ROWS] [--graph_format {text,binary}]\n"
         "                     [--workdir DIR]\n"
         "                     [--protocol {wrapper,torch-neuronx,torch-neuronx-legacy}]\n"
         "                     [--script_cache_dir DIR]\n"
         "\n"
         "Stand-in for a torch-neuronx training script run under torchrun: emits HLO\n"
         "graphs step by step and compiles each new one, through neuron_cc_wrapper\n"
         "(--protocol wrapper, the default) or through the compile cache the way\n"
         "current torch-neuronx does (--protocol torch-neuronx), or older releases\n"
         "did (--protocol torch-neuronx-legacy: DIR/neuron-compile-cache, no path log).\n";
}

}  // namespace standin::train
