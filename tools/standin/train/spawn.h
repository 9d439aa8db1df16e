// Starting child processes with posix_spawn: explicit argv, never a shell.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace standin::train {

using EnvOverrides = std::vector<std::pair<std::string, std::string>>;

// This process's environment with each NAME=value of `overrides` replaced
// or added.
std::vector<std::string> environment_with(const EnvOverrides& overrides);

// Starts `path` with `argv` (argv[0] included) and `env`. When output_fd is
// not -1 it becomes the child's stdout and stderr. Throws failure() if the
// program cannot be started.
pid_t spawn_process(const std::string& path, const std::vector<std::string>& argv,
                    const std::vector<std::string>& env, int output_fd = -1);

// Waits for the child; returns its exit status, or 128 + signal number when
// a signal ended it (as a shell reports it).
int wait_exit_status(pid_t pid);
// As wait_exit_status, waking every 10 ms: a signal handler then runs at
// once even where signal delivery waits for a blocking call to return (the
// launcher forwards SIGTERM to its ranks from one; ThreadSanitizer's runtime
// defers handlers that way).
int poll_exit_status(pid_t pid);

struct CapturedRun {
  int exit_status = 0;  // as wait_exit_status reports it
  std::string output;   // stdout and stderr, interleaved as written
};

// Starts `path` with its stdout and stderr on one pipe, reads the pipe to EOF
// and waits for it. Throws failure() if it cannot be started or read.
CapturedRun run_captured(const std::string& path, const std::vector<std::string>& argv,
                         const std::vector<std::string>& env);

}  // namespace standin::train
