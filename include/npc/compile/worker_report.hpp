#pragma once
// How a compile-entry worker tells the launcher what happened:
// `neuron_cc_wrapper compile-entry --result-file FILE` writes one small JSON
// object to FILE (atomically) before it exits, whatever the outcome. The
// launcher reads the value, never the worker's output or the entry's
// history; a worker that left no file was killed before it could say.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <npc/compile/entry_compile.hpp>
#include <npc/util/result.hpp>

namespace npc::compile {

namespace fs = std::filesystem;

struct WorkerReport {
  // How compile_entry ended; nullopt when an error stopped the worker first
  // (a cache it cannot write, a compiler it cannot start): see `error`.
  std::optional<EntryOutcome> outcome;
  std::string error;
  // Of our own compile, when one ran: "exit code 70", "killed by signal
  // SIGKILL", "timed out after 30.0s", and what it cost.
  std::string exit;
  double wall_seconds = 0;
  std::uint64_t peak_rss_bytes = 0;
  fs::path log_path; // model.log of a failure, npc-killed.log of a kill
};

[[nodiscard]] WorkerReport make_worker_report(const EntryCompileResult& result);
[[nodiscard]] Status write_worker_report(const fs::path& path, const WorkerReport& report);
// A missing file is nullopt (the worker did not get to write it).
[[nodiscard]] Result<std::optional<WorkerReport>> read_worker_report(const fs::path& path);

} // namespace npc::compile
