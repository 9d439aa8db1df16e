#pragma once
// neuron_parallel_compile's modes, over the pieces in this folder.

#include <cstdint>

#include <npc/config/settings.hpp>
#include <npc/launcher/options.hpp>

namespace npc::launcher {

class RunTrace;
struct RunFacts;

// With no history, the peak memory one compile is planned for when choosing
// how many run at once: the original tool's 64 GiB (ceil(total memory / 64
// GiB) compiles: 8 on a trn1.32xlarge). A large graph takes tens of GB; the
// OOM killer taking compiles on small instances is a common complaint.
// Learned peaks (npc-entry.json records) then allow more, safely.
inline constexpr std::uint64_t kDefaultCompilePeakBytes = 64ULL << 30;

// The mode `options` names, with its timeline written to --trace at its end
// (traced_run.cpp): a trace that cannot be written is an EnvironmentError
// (exit 3), as a --report is, found before the run when it can be.
[[nodiscard]] int run(const Options& options, const config::Settings& settings);

// What run() runs, `trace` null without --trace and `facts` filled as they
// go (the trace's header reads them):
// collect-and-compile, collect and compile (run.cpp);
[[nodiscard]] int run_pre_compile(const Options& options, const config::Settings& settings, RunTrace* trace,
                                  RunFacts& facts);
// clean, clear-locks, clear-neffs, scan, scan-with-failed
// (maintenance_modes.cpp), each one phase of the trace.
[[nodiscard]] int run_maintenance(const Options& options, const config::Settings& settings, RunTrace* trace,
                                  RunFacts& facts);

} // namespace npc::launcher
