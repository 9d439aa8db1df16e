// Error type shared by the stand-in binaries: every failure carries the exit
// status the program should end with, so main() can print one line and return.
#pragma once

#include <stdexcept>
#include <string>

namespace standin {

// Exit statuses with a fixed meaning across both stand-ins.
inline constexpr int kExitFailure = 1;
// argparse exits with 2 on a bad command line; configuration mistakes in the
// stand-ins' own environment variables use it too.
inline constexpr int kExitUsage = 2;

class StandinError : public std::runtime_error {
 public:
  StandinError(int exit_code, const std::string& message)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// A bad command line or bad environment setting (exit 2).
inline StandinError usage_error(const std::string& message) {
  return StandinError(kExitUsage, message);
}

// A run-time failure (exit 1).
inline StandinError failure(const std::string& message) {
  return StandinError(kExitFailure, message);
}

}  // namespace standin
