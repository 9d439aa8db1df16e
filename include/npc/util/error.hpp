#pragma once
// The project's one error type. Low-level helpers return Result<T>; domain
// code throws npc::Error, and each program's main turns it into a one-line
// message and an exit code.

#include <stdexcept>
#include <string>

namespace npc {

// Exit codes shared by every program (documented in README.md).
enum class ExitCode : int {
  success = 0,
  failure = 1,      // the work failed: a compile, a verify, a cached failure
  usage = 2,        // bad command line, bad NEURON_CC_FLAGS, bad option value
  environment = 3,  // cache unusable, compiler not found, lock wait timed out
  interrupted = 130 // SIGINT; other signals give 128 + signal number
};

class Error : public std::runtime_error {
public:
  explicit Error(const std::string& message, ExitCode code = ExitCode::failure)
      : std::runtime_error(message), code_(code) {}
  [[nodiscard]] ExitCode code() const noexcept { return code_; }

private:
  ExitCode code_;
};

class UsageError : public Error {
public:
  explicit UsageError(const std::string& message) : Error(message, ExitCode::usage) {}
};

class EnvironmentError : public Error {
public:
  explicit EnvironmentError(const std::string& message)
      : Error(message, ExitCode::environment) {}
};

} // namespace npc
