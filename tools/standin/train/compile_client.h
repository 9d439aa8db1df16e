// Calls the project's compile entry (`neuron_cc_wrapper compile --graph G
// --output N`) where torch-neuronx would invoke the Neuron compiler.
#pragma once

#include <string>

namespace standin::train {

// Printed by the wrapper when it serves a NEFF from the persistent cache.
inline constexpr char kCacheHitMarker[] = "Using a cached neff at ";

struct CompileResult {
  int exit_status = 0;  // 128 + signal if the wrapper was killed
  std::string output;   // its stdout and stderr, interleaved
  bool cache_hit = false;
  double seconds = 0;
};

class CompileClient {
 public:
  // NEURON_CC_WRAPPER if set, else neuron_cc_wrapper on PATH. Throws a
  // usage error (exit 2) when neither is found.
  static CompileClient locate();

  // Runs the wrapper, echoes its output to our stdout, measures wall time.
  CompileResult compile(const std::string& graph_path, const std::string& neff_path) const;

  const std::string& wrapper_path() const { return wrapper_path_; }

 private:
  explicit CompileClient(std::string wrapper_path) : wrapper_path_(std::move(wrapper_path)) {}
  std::string wrapper_path_;
};

}  // namespace standin::train
