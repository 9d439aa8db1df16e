#pragma once
// Every exit status the programs give, in one place (the table in README.md
// lists the same).

#include <algorithm>
#include <cstddef>

namespace npc {

enum class ExitCode : int {
  success = 0,
  failure = 1,            // the work failed: a compile, a verify, a cached failure,
                          // the launcher's training command in the trial
  usage = 2,              // bad command line, bad NEURON_CC_FLAGS, bad option value
  environment = 3,        // cache unusable, compiler not found, lock wait timed out
  locked_elsewhere = 75,  // compile-entry --no-wait: another process holds the
                          // entry's lock (EX_TEMPFAIL: try again later)
  interrupted = 130       // SIGINT; other signals give 128 + signal number
};

[[nodiscard]] constexpr int exit_status(ExitCode code) { return static_cast<int>(code); }

// A program stopped by signal `signal_number` exits as a shell reports it.
[[nodiscard]] constexpr int exit_status_for_signal(int signal_number) { return 128 + signal_number; }

// The launcher exits with the number of graphs that failed, as the original
// tool does, capped (the original's wraps modulo 256, so 256 failures would
// exit 0).
inline constexpr int kMaxFailedExitStatus = 255;
[[nodiscard]] constexpr int exit_status_for_failed_graphs(std::size_t failed) {
  return static_cast<int>(std::min<std::size_t>(failed, kMaxFailedExitStatus));
}

} // namespace npc
