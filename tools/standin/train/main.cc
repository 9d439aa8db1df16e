// Stand-in for a torch-neuronx training script under torchrun: traces HLO
// graphs step by step and compiles each new one, through the project's
// compile entry neuron_cc_wrapper (--protocol wrapper) or through the
// compile cache as current torch-neuronx does (--protocol torch-neuronx);
// see README.md.
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "env.h"
#include "error.h"
#include "launcher.h"
#include "options.h"
#include "rank.h"

using standin::StandinError;
using namespace standin::train;

namespace {

constexpr long kMaxWorldSize = 1L << 20;

struct Placement {
  long rank = 0;
  long world_size = 1;
};

// Set when a real launcher (torchrun) started us as one of its ranks.
std::optional<Placement> placement_from_environment() {
  const auto rank = standin::env_string("RANK");
  const auto world = standin::env_string("WORLD_SIZE");
  if (!rank || !world) return std::nullopt;
  Placement placement;
  placement.world_size = standin::parse_int_option("WORLD_SIZE", *world, 1, kMaxWorldSize);
  placement.rank = standin::parse_int_option("RANK", *rank, 0, placement.world_size - 1);
  return placement;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    const TrainOptions options = parse_train_options(args);
    if (options.help) {
      std::cout << train_usage();
      return 0;
    }
    if (const auto placement = placement_from_environment()) {
      return run_rank(options, placement->rank, placement->world_size);
    }
    return run_launcher(options, argv[0], args);
  } catch (const StandinError& error) {
    const bool usage = error.exit_code() == standin::kExitUsage;
    std::cerr << kProgramName << (usage ? ": error: " : ": ") << error.what() << std::endl;
    return error.exit_code();
  } catch (const std::exception& error) {
    std::cerr << kProgramName << ": " << error.what() << std::endl;
    return standin::kExitFailure;
  }
}
