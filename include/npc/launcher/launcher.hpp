#pragma once
// neuron_parallel_compile's modes, over the pieces in this folder.

#include <npc/cli/common.hpp>
#include <npc/launcher/options.hpp>

namespace npc::launcher {

// With no history, the peak memory one compile is assumed to need when
// choosing how many run at once: the real compiler's usual floor for a
// transformer layer graph.
inline constexpr std::uint64_t kDefaultCompilePeakBytes = 2ULL << 30;

// Exit status of a run whose graphs did not all compile.
inline constexpr int kExitGraphsFailed = 1;

[[nodiscard]] int run(const Options& options, const cli::Settings& settings);

// The maintenance modes (clean, clear-locks, clear-neffs, scan, scan-with-failed).
[[nodiscard]] int run_maintenance(const Options& options, const cli::Settings& settings);

} // namespace npc::launcher
