#pragma once
// The compile entry's protocol, one for every program that answers a
// framework's compile with a NEFF at an output: `neuron_cc_wrapper compile`
// and the neuronx-cc masquerade (cli/as_neuronx_cc.hpp). The programs keep
// their command lines, their messages and their exit statuses; the order in
// which the cache is asked, and what follows a compile, are here:
//  1. a done entry in the lookup order (compile/cache_tiers.hpp's
//     CacheTiers::find: the directory, the earlier release's key, the shared
//     tier, the read-only secondary cache) whose NEFF reaches the output;
//  2. a failure cached for the entry, unless failures are retried;
//  3. otherwise the graph stored and compiled under the entry's lock (the
//     shared tier's when there is one), the NEFF copied to the output while
//     the lock is held; started over, a few times, when another process
//     removes the entry meanwhile.
// A hit brought in from another tier, and a compile, are followed by an
// eviction pass.

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <npc/cache/key.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/eviction.hpp>
#include <npc/cache/usage_stats.hpp>
#include <npc/compile/cache_tiers.hpp>
#include <npc/compile/entry_compile.hpp>
#include <npc/util/error.hpp>

namespace npc::cli {

namespace fs = std::filesystem;

// How many times a compile whose entry another process removed starts over.
inline constexpr int kRemovedRetries = 3;

// A done entry's NEFF failed its check when delivered under the entry's lock
// (a corrupt cache): exit status 3, as any fault of this machine. Not an
// EnvironmentError, which the tiers take for a shared tier that cannot be
// used (compile/cache_tiers.hpp): the shared tier is not at fault, and the
// program decides what to do instead (the masquerade runs the real compiler).
class StoredNeffFault : public Error {
public:
  explicit StoredNeffFault(const std::string& message) : Error(message, ExitCode::environment) {}
};

struct CachedCompile {
  // The directory it works in is the tiers' (CacheTiers::directory).
  compile::CacheTiers& tiers;
  compile::Lookup lookup;
  cache::EvictionPolicy eviction;
  // Copies a done entry's NEFF, verified, to the output: false when the NEFF
  // fails its check or cannot be read (the program says which, or throws
  // what it does instead); throws OutputFault for the output's own fault.
  std::function<bool(const cache::Entry&)> deliver;
  // Stores the graph (and flags) in the directory's entry, again after a removal.
  std::function<void()> store_graph;
  // Checks what a compile needs and a hit does not, before the graph is stored.
  std::function<void()> before_compile;
  // Adds to the cache's counters of this program.
  std::function<void(const cache::UsageCounts&)> count;
};

struct CachedCompileEnd {
  // A hit: the entry whose NEFF was delivered; nothing compiled.
  std::optional<cache::Entry> served;
  // Otherwise how the compile ended. compiled and already_done: the NEFF is
  // at the output.
  compile::EntryCompileResult result;
};

// Runs the protocol above. `options` are the compile's (compiler, timeout,
// failures retried or cached, the job's adjustments); its hooks for the
// stored graph and the delivery under the lock are set here.
[[nodiscard]] CachedCompileEnd compile_through_cache(const CachedCompile& call, compile::EntryCompileOptions options);

} // namespace npc::cli
