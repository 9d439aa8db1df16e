// The Neuron compiler as torch-neuronx runs it: found through $NEURON_CC or
// as neuronx-cc on PATH (the stand-in compiler in tests), asked for its
// version once, then started once per graph to compile.
#pragma once

#include <string>
#include <vector>

#include "spawn.h"

namespace standin::train {

class NeuronxCompiler {
 public:
  // Throws a usage error (exit 2) when no compiler is found, failure() when
  // `--version` does not print "NeuronX Compiler version <V>".
  static NeuronxCompiler locate();

  const std::string& path() const { return path_; }
  // <V> from `<compiler> --version`, e.g. "2.16.372.0+4a9b2326".
  const std::string& version() const { return version_; }

  // `<compiler> compile --framework=XLA <graph> --output <neff> --target=trn1
  // <flags...>` with its output captured. A --target among the flags wins:
  // the compiler takes the last one.
  CapturedRun compile(const std::string& graph_path, const std::string& neff_path,
                      const std::vector<std::string>& flags) const;

 private:
  NeuronxCompiler(std::string path, std::string version)
      : path_(std::move(path)), version_(std::move(version)) {}
  std::string path_;
  std::string version_;
};

}  // namespace standin::train
