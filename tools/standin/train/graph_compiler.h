// What the training loop needs from "whatever compiles a graph": in wrapper
// mode the project's compile entry (CompileClient), in torch-neuronx mode
// the framework's own cache protocol (FrameworkCache).
#pragma once

#include <memory>
#include <string>

#include "options.h"

namespace standin::train {

struct CompileResult {
  int exit_status = 0;  // 128 + signal if the compiling process was killed
  std::string output;   // what it printed (already echoed to our stdout)
  bool cache_hit = false;
  double seconds = 0;   // wall time, waiting included
  // Why nothing was compiled although nothing exited non-zero (a cached
  // failure); "" otherwise. exit_status is then non-zero too.
  std::string failure;
};

class GraphCompiler {
 public:
  virtual ~GraphCompiler() = default;
  // Compiles (or finds in a cache) the graph at `graph_path` and leaves the
  // NEFF at `neff_path`; in extraction mode the output is a placeholder.
  virtual CompileResult compile(const std::string& graph_path, const std::string& neff_path) = 0;
};

// The compiler for the mode the options select (see protocol.h). Throws a
// usage error (exit 2) when the program it needs cannot be found.
std::unique_ptr<GraphCompiler> make_graph_compiler(const TrainOptions& options);

}  // namespace standin::train
