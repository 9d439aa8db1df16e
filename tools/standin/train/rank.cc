#include "rank.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "env.h"
#include "error.h"
#include "files.h"
#include "graph_compiler.h"
#include "hlo_graphs.h"
#include "neff_check.h"
#include "schedule.h"
#include "sha256.h"
#include "summary.h"
#include "workdir.h"

namespace standin::train {
namespace {

constexpr char kExtractOnlyVariable[] = "NEURON_EXTRACT_GRAPHS_ONLY";
// Graph files are named after the graph like torch-xla's MODULE_<hash> dumps.
constexpr std::size_t kNameHashChars = 16;
constexpr long kMsPerSec = 1000;
constexpr long kNsPerMs = 1'000'000;

struct TracedGraph {
  std::string sha256;
  std::string graph_path;
  std::string neff_path;
};

void sleep_ms(long ms) {
  timespec remaining{ms / kMsPerSec, (ms % kMsPerSec) * kNsPerMs};
  while (nanosleep(&remaining, &remaining) != 0 && errno == EINTR) {
  }
}

// What a Python training script prints when it dies mid-run.
void print_crash_traceback(long step) {
  std::cerr << "Traceback (most recent call last):\n"
            << "  File \"train.py\", line 212, in <module>\n"
            << "    main()\n"
            << "  File \"train.py\", line 187, in main\n"
            << "    loss = train_step(model, batch, optimizer)\n"
            << "  File \"train.py\", line 143, in train_step\n"
            << "    xm.mark_step()\n"
            << "RuntimeError: simulated crash at step " << step << " (--crash_at_step)" << std::endl;
}

class Trainer {
 public:
  Trainer(const TrainOptions& options, const std::string& directory, long world_size)
      : options_(options),
        directory_(directory),
        shape_{options.layers, options.hidden, world_size},
        compiler_(make_graph_compiler(options)),
        extract_only_(env_truthy(kExtractOnlyVariable)) {}

  // Returns false if the run crashed on purpose.
  bool run() {
    for (long step = 0; step < options_.steps_this_run; ++step) {
      if (options_.crash_at_step && *options_.crash_at_step == step) {
        print_crash_traceback(step);
        return false;
      }
      for (const GraphSpec& spec : graphs_for_step(options_, step)) execute(spec);
      if (options_.step_ms > 0) sleep_ms(options_.step_ms);
      ++summary_.steps;
    }
    return true;
  }

  const RankSummary& summary() const { return summary_; }

 private:
  // Like torch-xla's in-memory cache: a graph is compiled once per process.
  void execute(const GraphSpec& spec) {
    const TracedGraph& graph = trace(spec);
    if (summary_.graph_shas.insert(graph.sha256).second) compile(graph);
  }

  const TracedGraph& trace(const GraphSpec& spec) {
    auto found = traced_.find(spec);
    if (found != traced_.end()) return found->second;
    const std::string text = make_graph(spec, shape_, options_.graph_format);
    TracedGraph graph;
    graph.sha256 = sha256_hex(text);
    const std::string stem =
        directory_ + "/MODULE_" + spec.name() + "_" + graph.sha256.substr(0, kNameHashChars);
    graph.graph_path = stem + ".hlo";
    graph.neff_path = stem + ".neff";
    write_graph(graph.graph_path, text);
    return traced_.emplace(spec, graph).first->second;
  }

  // Written whole under a temporary name, then renamed, as torch-neuronx
  // hands the compiler a finished file: two trainings given the same
  // --workdir (tests run two nodes' trials at once) trace the same graph to
  // the same path, and a compile must never read the other's half-written or
  // just-truncated file.
  static void write_graph(const std::string& path, const std::string& text) {
    static constexpr mode_t kFileMode = 0644;
    const std::string temporary = path + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, kFileMode);
    bool ok = fd >= 0 && write_all(fd, text);
    std::string reason = errno_text();
    if (fd >= 0) ::close(fd);
    if (ok && ::rename(temporary.c_str(), path.c_str()) != 0) {
      ok = false;
      reason = errno_text();
    }
    if (!ok) {
      ::unlink(temporary.c_str());
      throw failure("cannot write graph '" + path + "': " + reason);
    }
  }

  void compile(const TracedGraph& graph) {
    // A NEFF left from an earlier run must not pass for this compile's output.
    ::unlink(graph.neff_path.c_str());
    const CompileResult result = compiler_->compile(graph.graph_path, graph.neff_path);
    summary_.compile_wait_s += result.seconds;
    if (result.exit_status != 0) {
      const std::string why =
          result.failure.empty() ? "exit " + std::to_string(result.exit_status) : result.failure;
      throw failure("compile failed for " + graph.graph_path + " (" + why + ")");
    }
    if (result.cache_hit) {
      ++summary_.cache_hits;
    } else if (!extract_only_) {
      ++summary_.jit_compiles;
    }
    // In extraction mode the outputs are placeholders, not NEFFs.
    if (!extract_only_) check_neff(graph.neff_path, graph.graph_path, graph.sha256);
  }

  const TrainOptions& options_;
  const std::string directory_;
  const ModelShape shape_;
  const std::unique_ptr<GraphCompiler> compiler_;
  const bool extract_only_;
  std::map<GraphSpec, TracedGraph> traced_;
  RankSummary summary_;
};

}  // namespace

std::string rank_directory(const std::string& workdir, long rank) {
  return workdir + "/rank-" + std::to_string(rank);
}

int run_rank(const TrainOptions& options, long rank, long world_size) {
  const Workdir workdir(options.workdir);
  const std::string directory = rank_directory(workdir.path(), rank);
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) throw failure("cannot create '" + directory + "': " + error.message());

  Trainer trainer(options, directory, world_size);
  if (!trainer.run()) return kExitFailure;
  save_summary(trainer.summary(), directory + "/" + kSummaryFile);
  std::cout << rank_line(trainer.summary(), rank, world_size) << std::endl;
  return 0;
}

}  // namespace standin::train
