#pragma once
// The trial run: the user's own training command, in graph-extraction mode.
// It runs in its own process group with our environment plus the extraction
// variables; its stdout and stderr pass through as they come and are copied
// to a trial log. SIGINT, SIGTERM and SIGHUP are passed on to its group.

#include <filesystem>
#include <string>
#include <vector>

#include <npc/util/process.hpp>

namespace npc::launcher {

namespace fs = std::filesystem;

// After passing on an interrupt, how long the trial's group has before
// SIGKILL: inside the 2 s in which every process of the run must be gone.
inline constexpr auto kTrialInterruptGrace = std::chrono::milliseconds(1500);

struct TrialResult {
  util::ExitStatus status;
  int interrupted_by = 0;                 // the signal we received and passed on
  std::vector<std::string> reported_paths; // from "Extracting graphs (...)" lines
  // Extraction lines that name no graph path: the path was cut, most often
  // by a newline in the cache path (the output is read by lines). The graphs
  // they announce are taken from a scan of the roots learned instead.
  std::size_t unreadable_extraction_lines = 0;
  double wall_seconds = 0;
};

// The graph path in a torch-neuronx extraction line, or "" when the line is
// not one.
[[nodiscard]] std::string parse_extraction_line(std::string_view line);

// Throws EnvironmentError when the command cannot be started (the message
// names it).
[[nodiscard]] TrialResult run_trial(const std::vector<std::string>& command,
                                    const util::Environment& environment,
                                    const fs::path& trial_log);

} // namespace npc::launcher
