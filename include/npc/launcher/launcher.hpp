#pragma once
// neuron_parallel_compile's modes, over the pieces in this folder.

#include <cstdint>

#include <npc/config/settings.hpp>
#include <npc/launcher/options.hpp>

namespace npc::launcher {

// With no history, the peak memory one compile is planned for when choosing
// how many run at once: the original tool's 64 GiB (ceil(total memory / 64
// GiB) compiles: 8 on a trn1.32xlarge). A large graph takes tens of GB; the
// OOM killer taking compiles on small instances is a common complaint.
// Learned peaks (npc-entry.json records) then allow more, safely.
inline constexpr std::uint64_t kDefaultCompilePeakBytes = 64ULL << 30;

[[nodiscard]] int run(const Options& options, const config::Settings& settings);

// The maintenance modes (clean, clear-locks, clear-neffs, scan, scan-with-failed).
[[nodiscard]] int run_maintenance(const Options& options, const config::Settings& settings);

} // namespace npc::launcher
