#include "compile_client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <vector>

#include "env.h"
#include "error.h"
#include "files.h"
#include "spawn.h"

namespace standin::train {
namespace {

constexpr char kWrapperEnv[] = "NEURON_CC_WRAPPER";
constexpr char kWrapperName[] = "neuron_cc_wrapper";

bool is_executable_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string search_path(const std::string& name) {
  const std::string path = env_string("PATH").value_or("");
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
  }
  return {};
}

}  // namespace

CompileClient CompileClient::locate() {
  if (const auto configured = env_string(kWrapperEnv)) {
    if (!is_executable_file(*configured)) {
      throw usage_error(std::string(kWrapperEnv) + "='" + *configured + "' is not an executable file");
    }
    return CompileClient(*configured);
  }
  const std::string found = search_path(kWrapperName);
  if (found.empty()) {
    throw usage_error(std::string("cannot find the compile entry: set ") + kWrapperEnv + " or put " +
                      kWrapperName + " on PATH");
  }
  return CompileClient(found);
}

CompileResult CompileClient::compile(const std::string& graph_path, const std::string& neff_path) const {
  const std::vector<std::string> argv{wrapper_path_, "compile", "--graph", graph_path, "--output", neff_path};
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw failure("cannot create a pipe: " + errno_text());

  const auto start = std::chrono::steady_clock::now();
  pid_t pid = -1;
  try {
    pid = spawn_process(wrapper_path_, argv, environment_with({}), pipe_fds[1]);
  } catch (...) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    throw;
  }
  ::close(pipe_fds[1]);  // so read_all sees EOF once the wrapper exits

  CompileResult result;
  const bool read_ok = read_all(pipe_fds[0], result.output);
  ::close(pipe_fds[0]);
  result.exit_status = wait_exit_status(pid);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!read_ok) throw failure("cannot read the output of '" + wrapper_path_ + "': " + errno_text());

  // One write keeps this rank's wrapper output together on a shared stdout.
  write_all(STDOUT_FILENO, result.output);
  result.cache_hit = result.output.find(kCacheHitMarker) != std::string::npos;
  return result;
}

}  // namespace standin::train
