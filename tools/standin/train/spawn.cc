#include "spawn.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <cstring>

#include "error.h"
#include "files.h"

extern char** environ;

namespace standin::train {
namespace {

constexpr int kSignalExitBase = 128;

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

std::vector<std::string> environment_with(const EnvOverrides& overrides) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const std::string name = text.substr(0, text.find('='));
    bool overridden = false;
    for (const auto& [key, value] : overrides) overridden = overridden || key == name;
    if (!overridden) env.push_back(text);
  }
  for (const auto& [key, value] : overrides) env.push_back(key + "=" + value);
  return env;
}

pid_t spawn_process(const std::string& path, const std::vector<std::string>& argv,
                    const std::vector<std::string>& env, int output_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (output_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, output_fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, output_fd, STDERR_FILENO);
  }
  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(env);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, path.c_str(), &actions, nullptr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) throw failure("cannot start '" + path + "': " + std::strerror(error));
  return pid;
}

int wait_exit_status(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw failure(std::string("waitpid failed: ") + std::strerror(errno));
  }
  if (WIFSIGNALED(status)) return kSignalExitBase + WTERMSIG(status);
  return WEXITSTATUS(status);
}

int poll_exit_status(pid_t pid) {
  int status = 0;
  for (;;) {
    const pid_t ended = waitpid(pid, &status, WNOHANG);
    if (ended == pid) break;
    if (ended < 0 && errno != EINTR) throw failure(std::string("waitpid failed: ") + std::strerror(errno));
    const struct timespec pause{0, 10'000'000};
    nanosleep(&pause, nullptr);
  }
  if (WIFSIGNALED(status)) return kSignalExitBase + WTERMSIG(status);
  return WEXITSTATUS(status);
}

CapturedRun run_captured(const std::string& path, const std::vector<std::string>& argv,
                         const std::vector<std::string>& env) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw failure("cannot create a pipe: " + errno_text());
  pid_t pid = -1;
  try {
    pid = spawn_process(path, argv, env, pipe_fds[1]);
  } catch (...) {
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    throw;
  }
  ::close(pipe_fds[1]);  // so read_all sees EOF once the child exits

  CapturedRun run;
  const bool read_ok = read_all(pipe_fds[0], run.output);
  const std::string reason = read_ok ? "" : errno_text();
  ::close(pipe_fds[0]);
  run.exit_status = wait_exit_status(pid);
  if (!read_ok) throw failure("cannot read the output of '" + path + "': " + reason);
  return run;
}

}  // namespace standin::train
