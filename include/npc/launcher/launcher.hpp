#pragma once
// neuron_parallel_compile's modes, over the pieces in this folder.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <npc/cli/common.hpp>
#include <npc/launcher/options.hpp>

namespace npc::launcher {

// With no history, the peak memory one compile is planned for when choosing
// how many run at once: the original tool's 64 GiB (ceil(total memory / 64
// GiB) compiles: 8 on a trn1.32xlarge). A large graph takes tens of GB; the
// OOM killer taking compiles on small instances is a common complaint.
// Learned peaks (npc-entry.json records) then allow more, safely.
inline constexpr std::uint64_t kDefaultCompilePeakBytes = 64ULL << 30;

// Exit status: the number of graphs that failed, as the original's, capped
// here (the original's wraps modulo 256, so 256 failures would exit 0).
inline constexpr int kMaxFailedExitStatus = 255;
// A training command that failed in the trial (unless
// NEURON_IGNORE_TRAINING_SCRIPT_ERROR_AND_COMPILE is set), or a trial that
// extracted graphs of which none could be taken.
inline constexpr int kExitTrialFailed = 1;
[[nodiscard]] inline int failed_graphs_status(std::size_t failed) {
  return static_cast<int>(std::min<std::size_t>(failed, kMaxFailedExitStatus));
}

[[nodiscard]] int run(const Options& options, const cli::Settings& settings);

// The maintenance modes (clean, clear-locks, clear-neffs, scan, scan-with-failed).
[[nodiscard]] int run_maintenance(const Options& options, const cli::Settings& settings);

} // namespace npc::launcher
