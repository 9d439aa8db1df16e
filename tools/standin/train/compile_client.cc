#include "compile_client.h"

#include <unistd.h>

#include <chrono>
#include <vector>

#include "env.h"
#include "error.h"
#include "files.h"
#include "path_search.h"

namespace standin::train {
namespace {

constexpr char kWrapperEnv[] = "NEURON_CC_WRAPPER";
constexpr char kWrapperName[] = "neuron_cc_wrapper";

}  // namespace

CompileClient CompileClient::locate(EnvOverrides child_env) {
  if (const auto configured = env_string(kWrapperEnv)) {
    if (!is_executable_file(*configured)) {
      throw usage_error(std::string(kWrapperEnv) + "='" + *configured + "' is not an executable file");
    }
    return CompileClient(*configured, std::move(child_env));
  }
  const std::string found = search_path(kWrapperName);
  if (found.empty()) {
    throw usage_error(std::string("cannot find the compile entry: set ") + kWrapperEnv + " or put " +
                      kWrapperName + " on PATH");
  }
  return CompileClient(found, std::move(child_env));
}

CompileResult CompileClient::compile(const std::string& graph_path, const std::string& neff_path) {
  const std::vector<std::string> argv{wrapper_path_, "compile", "--graph", graph_path, "--output", neff_path};
  const auto start = std::chrono::steady_clock::now();
  CapturedRun run = run_captured(wrapper_path_, argv, environment_with(child_env_));

  CompileResult result;
  result.exit_status = run.exit_status;
  result.output = std::move(run.output);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // One write keeps this rank's wrapper output together on a shared stdout.
  write_all(STDOUT_FILENO, result.output);
  result.cache_hit = result.output.find(kCacheHitMarker) != std::string::npos;
  return result;
}

}  // namespace standin::train
