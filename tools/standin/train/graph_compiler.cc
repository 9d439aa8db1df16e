#include "graph_compiler.h"

#include "compile_client.h"
#include "framework_cache.h"
#include "framework_flags.h"
#include "protocol.h"

namespace standin::train {

std::unique_ptr<GraphCompiler> make_graph_compiler(const TrainOptions& options) {
  const Protocol protocol = resolve_protocol(options.protocol);
  if (protocol == Protocol::kTorchNeuronx) {
    return std::make_unique<FrameworkCache>(options.script_cache_dir, CacheLayout::kCurrent);
  }
  if (protocol == Protocol::kTorchNeuronxLegacy) {
    return std::make_unique<FrameworkCache>(options.script_cache_dir, CacheLayout::kOlderReleases);
  }
  // The wrapper inherits our environment, so it sees what the script did to
  // NEURON_CC_FLAGS in Python.
  EnvOverrides child_env;
  if (options.script_cache_dir) {
    child_env.emplace_back(kNeuronCcFlagsEnv, effective_neuron_cc_flags(options.script_cache_dir));
  }
  return std::make_unique<CompileClient>(CompileClient::locate(std::move(child_env)));
}

}  // namespace standin::train
