#include "neuronx_compiler.h"

#include "env.h"
#include "error.h"
#include "path_search.h"

namespace standin::train {
namespace {

constexpr char kCompilerEnv[] = "NEURON_CC";
constexpr char kCompilerName[] = "neuronx-cc";
constexpr char kVersionPrefix[] = "NeuronX Compiler version ";
constexpr char kDefaultTarget[] = "--target=trn1";

std::string find_compiler() {
  if (const auto configured = env_string(kCompilerEnv)) {
    if (!is_executable_file(*configured)) {
      throw usage_error(std::string(kCompilerEnv) + "='" + *configured + "' is not an executable file");
    }
    return *configured;
  }
  const std::string found = search_path(kCompilerName);
  if (found.empty()) {
    throw usage_error(std::string("cannot find the Neuron compiler: set ") + kCompilerEnv + " or put " +
                      kCompilerName + " on PATH");
  }
  return found;
}

// The version is the word after the prefix, on whichever line has it.
std::string query_version(const std::string& compiler) {
  const CapturedRun run = run_captured(compiler, {compiler, "--version"}, environment_with({}));
  const std::string prefix = kVersionPrefix;
  const std::size_t at = run.output.find(prefix);
  if (run.exit_status != 0 || at == std::string::npos) {
    throw failure("'" + compiler + " --version' (exit " + std::to_string(run.exit_status) +
                  ") did not print '" + prefix + "<V>'");
  }
  const std::size_t start = at + prefix.size();
  const std::size_t end = run.output.find_first_of(" \t\r\n", start);
  const std::string version = run.output.substr(start, end == std::string::npos ? end : end - start);
  if (version.empty()) throw failure("'" + compiler + " --version' printed an empty version");
  return version;
}

}  // namespace

NeuronxCompiler NeuronxCompiler::locate() {
  std::string path = find_compiler();
  std::string version = query_version(path);
  return NeuronxCompiler(std::move(path), std::move(version));
}

CapturedRun NeuronxCompiler::compile(const std::string& graph_path, const std::string& neff_path,
                                     const std::vector<std::string>& flags) const {
  std::vector<std::string> argv{path_, "compile", "--framework=XLA", graph_path, "--output", neff_path,
                                kDefaultTarget};
  argv.insert(argv.end(), flags.begin(), flags.end());
  return run_captured(path_, argv, environment_with({}));
}

}  // namespace standin::train
