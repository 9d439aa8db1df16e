// torch-neuronx mode: the training script reads and writes the compile
// cache itself, the way current torch-neuronx / libneuronxla do, so the
// product can be tested against the framework's side of the protocol
// (../shared/torch-neuronx-protocol.md beside the project; README.md of the stand-ins).
//
// Per graph, in extraction mode (NEURON_EXTRACT_GRAPHS_ONLY): a done entry
// is a cache hit; otherwise the graph and its flags are written into the
// entry and an "Extracting graphs (...)" line is printed; the cache root
// goes to $NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG. Just in time: a done
// entry is a cache hit, a failed one fails unless --retry_failed_compilation,
// a locked one is waited for, otherwise the entry is locked and compiled.
#pragma once

#include <optional>
#include <string>

#include "cache_root.h"
#include "framework_flags.h"
#include "graph_compiler.h"
#include "neuronx_compiler.h"

namespace standin::train {

// Which release's cache the framework plays: current (--cache_dir=DIR is the
// root; the root goes to the cache-path log) or older (DIR/neuron-compile-cache;
// nothing in the cache-path log).
enum class CacheLayout { kCurrent, kOlderReleases };

class FrameworkCache : public GraphCompiler {
 public:
  // Reads NEURON_CC_FLAGS (plus the script's own --cache_dir), finds the
  // compiler and asks its version. Throws StandinError.
  FrameworkCache(const std::optional<std::string>& script_cache_dir, CacheLayout layout);

  CompileResult compile(const std::string& graph_path, const std::string& neff_path) override;

  const std::string& root() const { return root_; }

 private:
  void extract(const std::string& graph, const std::string& entry, const std::string& neff_path,
               CompileResult& result) const;
  void compile_just_in_time(const std::string& graph, const std::string& entry,
                            const std::string& neff_path, CompileResult& result) const;
  void compile_holding_lock(const std::string& graph, const std::string& entry,
                            const std::string& neff_path, CompileResult& result) const;
  void use_cached_neff(const std::string& entry, const std::string& neff_path, CompileResult& result) const;
  void write_inputs(const std::string& graph, const std::string& entry) const;

  FrameworkFlags flags_;
  std::string root_;
  NeuronxCompiler compiler_;
  bool extract_only_;
  std::optional<std::string> path_log_;
  double lock_wait_s_;
};

}  // namespace standin::train
