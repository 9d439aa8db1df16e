// Wrapper mode: calls the project's compile entry (`neuron_cc_wrapper compile
// --graph G --output N`) where torch-neuronx would invoke the Neuron compiler.
#pragma once

#include <string>

#include "graph_compiler.h"
#include "spawn.h"

namespace standin::train {

// Printed by the wrapper when it serves a NEFF from the persistent cache.
inline constexpr char kCacheHitMarker[] = "Using a cached neff at ";

class CompileClient : public GraphCompiler {
 public:
  // NEURON_CC_WRAPPER if set, else neuron_cc_wrapper on PATH. Throws a
  // usage error (exit 2) when neither is found. `child_env` is set in the
  // wrapper's environment (the training script changed os.environ).
  static CompileClient locate(EnvOverrides child_env = {});

  // Runs the wrapper, echoes its output to our stdout, measures wall time.
  CompileResult compile(const std::string& graph_path, const std::string& neff_path) override;

  const std::string& wrapper_path() const { return wrapper_path_; }

 private:
  CompileClient(std::string wrapper_path, EnvOverrides child_env)
      : wrapper_path_(std::move(wrapper_path)), child_env_(std::move(child_env)) {}
  std::string wrapper_path_;
  EnvOverrides child_env_;
};

}  // namespace standin::train
