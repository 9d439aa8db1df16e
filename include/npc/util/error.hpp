#pragma once
// The project's one error type. Low-level helpers return Result<T>; domain
// code throws npc::Error, and each program's main turns it into a one-line
// message and an exit code.

#include <stdexcept>
#include <string>

#include <npc/util/exit_code.hpp>

namespace npc {

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
