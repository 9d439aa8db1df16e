// NEURON_CC_FLAGS as torch-neuronx reads it: a mix of the framework's own
// cache options, which it takes out, and compiler flags, which it passes to
// neuronx-cc in their order.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace standin::train {

inline constexpr char kNeuronCcFlagsEnv[] = "NEURON_CC_FLAGS";

struct FrameworkFlags {
  std::vector<std::string> compiler_flags;
  std::optional<std::string> cache_dir;  // the last --cache_dir wins
  bool retry_failed_compilation = false;
  // --no_cache, --cache_size, --cache_ttl, --log_level, --dump and
  // --compile_workdir are taken out and otherwise ignored by the stand-in.
};

// $NEURON_CC_FLAGS as the training script leaves it: many scripts do
// os.environ["NEURON_CC_FLAGS"] += " --cache_dir=DIR" in Python, which the
// launcher never sees; `script_cache_dir` plays that.
std::string effective_neuron_cc_flags(const std::optional<std::string>& script_cache_dir);

// Both "--opt=value" and "--opt value" are accepted. Throws a usage error
// (exit 2) naming NEURON_CC_FLAGS on bad quoting or a missing value.
FrameworkFlags parse_framework_flags(const std::string& neuron_cc_flags);

}  // namespace standin::train
