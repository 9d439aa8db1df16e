#pragma once
// The NEFF a caller asked for, written to its --output: what
// `neuron_cc_wrapper compile` and the masquerade (cli/as_neuronx_cc.hpp)
// both do with a result, and how both find an output that cannot take it.
//
// An output that cannot be written is the output's fault, never the cache
// entry's: OutputFault goes past every fallback (serving another entry,
// compiling again, the real compiler without the cache), since each of
// them would end at the same output, after minutes of compiling.

#include <filesystem>
#include <functional>
#include <optional>

#include <npc/cache/entry.hpp>
#include <npc/cache/usage_stats.hpp>
#include <npc/compile/entry_compile.hpp>
#include <npc/util/error.hpp>
#include <npc/util/result.hpp>

namespace npc::cli {

namespace fs = std::filesystem;

// "--output: cannot write PATH: why ...", one line; exit status 3, as for
// any file the environment does not let us write.
class OutputFault : public EnvironmentError {
public:
  using EnvironmentError::EnvironmentError;
};

// Throws OutputFault when `output` cannot take a file now (a folder that
// does not exist or is read-only, a directory, a dangling link's missing
// folder), found in a moment, before any look in the cache or compile.
void check_neff_output(const fs::path& output);

// Copies the entry's NEFF, verified, to `output`, as a shell's redirection
// writes (util/output_file.hpp): a regular file or a new path by rename, a
// device or FIFO written through. The integrity (mismatch: the entry's NEFF
// fails its check, nothing written), or an error that is the entry's (its
// NEFF cannot be read); throws OutputFault when the output is at fault.
[[nodiscard]] Result<cache::Integrity> deliver_neff(const cache::Entry& entry, const fs::path& output);

// The copy to --output made while the entry's lock is held
// (EntryCompileOptions::while_done_and_locked: once it is released, an
// eviction may remove the entry). A fault of the output is kept, not thrown
// through the compile, so that the compile's outcome is still counted (a
// compile that ran is a miss, whatever became of its NEFF) and no fallback
// of the compile (the shared tier's: compiling here instead) runs for it.
// rethrow_fault() afterwards.
class DeliveryUnderLock {
public:
  // `deliver` copies the done entry's NEFF, throwing OutputFault for the
  // output's fault and anything else for the entry's.
  explicit DeliveryUnderLock(std::function<void(const cache::Entry&)> deliver) : deliver_(std::move(deliver)) {}

  // For while_done_and_locked.
  void operator()(const cache::Entry& done);
  [[nodiscard]] bool delivered() const { return delivered_; }
  [[nodiscard]] bool output_faulted() const { return fault_.has_value(); }
  // What the compile adds to the cache's counters: compile::usage_of, but a
  // result found done is a hit only when it reached the output.
  [[nodiscard]] cache::UsageCounts usage_of(const compile::EntryCompileResult& result, const fs::path& entry_dir) const;
  void rethrow_fault() const;

private:
  std::function<void(const cache::Entry&)> deliver_;
  bool delivered_ = false;
  std::optional<OutputFault> fault_;
};

} // namespace npc::cli
