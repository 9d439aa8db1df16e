// Stand-in for a frontend that runs the compiler itself, once per graph, as
// TorchNeuron (torch.compile with the neuron backend) and vLLM-Neuron do:
// each new graph is written to a fresh temporary folder and compiled by
// `neuronx-cc compile` found on PATH; the NEFF is read back and the folder
// removed. A graph seen before in this process is not compiled again (the
// frontend keeps what it loaded). No cache of its own: what makes a second
// run fast is the compiler on PATH (the masquerade). See README.md.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "args.h"
#include "env.h"
#include "error.h"
#include "../train/hlo_graphs.h"
#include "../train/path_search.h"
#include "../train/schedule.h"
#include "../train/shell_words.h"
#include "../train/spawn.h"

namespace fs = std::filesystem;
using standin::StandinError;
using namespace standin::train;

namespace {

constexpr char kProgram[] = "standin_torchneuron";

struct FrontendOptions {
  TrainOptions model;  // steps, layers, hidden, graphs per step, eval cadence
  std::string target = "trn2";
  std::string lnc = "1";
  std::string tmpdir;  // where each graph's folder is made
};

const char* usage() {
  return "usage: standin_torchneuron [--steps N] [--layers N] [--hidden N] [--graphs_per_step N]\n"
         "                           [--eval_every N] [--target T] [--lnc N] [--tmpdir DIR]\n"
         "Compiles each new graph of a stand-in model with `neuronx-cc compile` from PATH, in a fresh\n"
         "temporary folder, as TorchNeuron does; $NEURON_CC_FLAGS is appended to the compiler's words.\n";
}

FrontendOptions parse_options(const std::vector<std::string>& args) {
  FrontendOptions options;
  options.model.steps_this_run = 4;
  options.model.graphs_per_step = 2;
  options.model.eval_every = 2;
  options.tmpdir = standin::env_string("TMPDIR").value_or("/tmp");
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto option = standin::split_option(args[i]);
    auto number = [&](long min, long max) {
      return standin::parse_int_option(option.name, standin::take_value(args, i, option), min, max);
    };
    if (option.name == "--steps") options.model.steps_this_run = number(1, 1000000);
    else if (option.name == "--layers") options.model.layers = number(1, 4096);
    else if (option.name == "--hidden") options.model.hidden = number(1, 1 << 20);
    else if (option.name == "--graphs_per_step") options.model.graphs_per_step = number(1, 1000);
    else if (option.name == "--eval_every") options.model.eval_every = number(0, 1000000);
    else if (option.name == "--target") options.target = standin::take_value(args, i, option);
    else if (option.name == "--lnc") options.lnc = standin::take_value(args, i, option);
    else if (option.name == "--tmpdir") options.tmpdir = standin::take_value(args, i, option);
    else throw standin::usage_error("unrecognized arguments: " + args[i]);
  }
  return options;
}

// One graph through the compiler, as the frontend does it.
void compile_graph(const std::string& compiler, const std::string& text, const FrontendOptions& options,
                   const std::vector<std::string>& flags, const std::string& name) {
  std::string pattern = (fs::path(options.tmpdir) / "torchneuron-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw standin::failure("cannot make a folder in " + options.tmpdir);
  const fs::path folder = pattern;
  const fs::path graph = folder / "module.hlo.pb", neff = folder / "module.neff";
  {
    std::ofstream out(graph, std::ios::binary);
    out << text;
    if (!out.flush()) throw standin::failure("cannot write " + graph.string());
  }
  std::vector<std::string> argv = {compiler,  "compile",      graph.string(),  "--framework", "XLA",
                                   "--target", options.target, "--lnc",         options.lnc,   "-O2",
                                   "--model-type", "transformer", "--auto-cast=none"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--output");
  argv.push_back(neff.string());
  const int status = wait_exit_status(spawn_process(compiler, argv, environment_with({})));
  std::error_code ec;
  const bool has_neff = fs::file_size(neff, ec) > 0 && !ec;
  fs::remove_all(folder, ec);
  if (status != 0) throw standin::failure("neuronx-cc failed for " + name + " (exit " + std::to_string(status) + ")");
  if (!has_neff) throw standin::failure("neuronx-cc wrote no NEFF for " + name);
}

int run(const FrontendOptions& options) {
  const std::string compiler = search_path("neuronx-cc");
  if (compiler.empty()) throw standin::failure("neuronx-cc was not found on PATH");
  const auto flags = split_shell_words(standin::env_string("NEURON_CC_FLAGS").value_or(""), "NEURON_CC_FLAGS");
  const ModelShape shape{options.model.layers, options.model.hidden, 1};
  std::set<std::string> loaded;
  long compiled = 0;
  const auto start = std::chrono::steady_clock::now();
  for (long step = 0; step < options.model.steps_this_run; ++step) {
    for (const auto& spec : graphs_for_step(options.model, step)) {
      std::string text = make_graph(spec, shape);
      if (!loaded.insert(text).second) continue;
      compile_graph(compiler, text, options, flags, spec.name());
      ++compiled;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << kProgram << ": " << options.model.steps_this_run << " steps, " << compiled
            << " graphs through neuronx-cc in " << std::fixed << std::setprecision(3) << seconds << " s" << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    for (const auto& arg : args)
      if (arg == "-h" || arg == "--help") {
        std::cout << usage();
        return 0;
      }
    return run(parse_options(args));
  } catch (const StandinError& error) {
    const bool is_usage = error.exit_code() == standin::kExitUsage;
    std::cerr << kProgram << (is_usage ? ": error: " : ": ") << error.what() << std::endl;
    return error.exit_code();
  } catch (const std::exception& error) {
    std::cerr << kProgram << ": " << error.what() << std::endl;
    return standin::kExitFailure;
  }
}
