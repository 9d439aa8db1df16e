#pragma once
// Runs the Neuron compiler once, with its real command line:
//   neuronx-cc compile --framework=XLA <graph> --output <neff> <flags...>
// adding --target=<target> only when the flags name no target (the target
// from compile/target.hpp: NEURON_PLATFORM_TARGET_OVERRIDE, else the machine,
// else trn1). Never through a shell; in its own process group; stdin from
// /dev/null; stdout and stderr to a log file; in a fresh working directory.
// A timeout kills the whole group, and SIGINT/SIGTERM/SIGHUP received
// meanwhile are passed on to it.

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <npc/util/process.hpp>

namespace npc::compile {

namespace fs = std::filesystem;

// After passing on an interrupt, how long the compiler has to exit before it
// is killed.
inline constexpr auto kInterruptGrace = std::chrono::milliseconds(1500);

struct CompileJob {
  fs::path compiler;
  fs::path graph;
  fs::path output_neff;
  std::vector<std::string> flags;
  fs::path working_dir; // must exist; the caller removes it
  fs::path log_file;
  std::optional<std::chrono::milliseconds> timeout;
  // The masquerade's (masquerade.hpp): the caller's own words, run as given
  // (argv[0] the compiler), instead of the command line above; and the
  // compiler's output to our stdout and stderr, which the caller reads,
  // instead of log_file (which then only says so).
  std::vector<std::string> argv;
  bool output_to_caller = false;
  std::optional<util::Environment> environment; // nullopt: ours
};

struct CompileRun {
  std::vector<std::string> argv;
  util::ExitStatus status;
  bool timed_out = false;
  double timeout_seconds = 0; // the limit that was reached, when timed_out
  int interrupted_by = 0; // the signal we received and passed on, else 0
  double wall_seconds = 0;

  [[nodiscard]] bool success() const { return !timed_out && interrupted_by == 0 && status.success(); }
  // "exit code 70", "killed by signal SIGKILL", "timed out after 30.0s" (the
  // limit, not the measured time, so the message is the same on a busy machine)
  [[nodiscard]] std::string describe() const;
};

// Throws UsageError when NEURON_PLATFORM_TARGET_OVERRIDE is needed and bad.
[[nodiscard]] std::vector<std::string> compiler_argv(const CompileJob& job);

// Throws EnvironmentError when the compiler cannot be started at all.
[[nodiscard]] CompileRun run_compiler(const CompileJob& job);

} // namespace npc::compile
