#pragma once
// Whole-cache maintenance behind `neuron_cache` and the launcher's
// --command modes: integrity verification with repair, clearing stale locks,
// forgetting cached failures and results, finding and removing entries. All
// of it works on a cache in a directory and in any other storage alike
// (store.hpp); a storage that cannot be read or written throws
// EnvironmentError, since a report that silently missed entries would
// mislead more than a clear failure.

#include <string>
#include <vector>

#include <npc/cache/leftover_temps.hpp>
#include <npc/cache/store.hpp>

namespace npc::cache {

enum class Repair { no, yes };

struct VerifyReport {
  struct Problem {
    EntryInfo entry;
    std::string what;
    bool repaired = false;
  };
  std::size_t checked = 0;    // done entries looked at
  std::size_t unverified = 0; // done entries with no integrity record (another tool's)
  std::vector<Problem> problems;
  // Work folders and temp files of writers that died: wasted space, not a
  // fault of what the cache serves (they do not make verify fail). With
  // Repair::yes they are removed (error empty) under the entry's lock.
  std::vector<LeftoverTemp> leftover_temps;
  bool leftovers_removed = false;
};

// Hashes every done entry's NEFF against its record. With Repair::yes a bad
// entry is demoted to pending (under its lock) so the next run recompiles it,
// and dead temps are removed; one whose lock another process holds is left
// (repaired false). A storage that cannot be read, locked or written throws
// EnvironmentError: nothing about an entry is concluded from it.
[[nodiscard]] VerifyReport verify_cache(const Cache& cache, Repair repair);

struct ClearLocksReport {
  std::vector<fs::path> removed; // as users name them: paths, or URLs
  std::vector<fs::path> held;    // kept: a live process holds them
  std::vector<LeftoverTemp> temps; // dead temps of entries nobody holds, removed
};

// Removes lock files nobody holds: our npc-compile.lock files no process
// holds, and every model.hlo_module.pb.lock but those whose owner is proved
// alive (storage/lock.hpp: a live process of this host, or a lock renewed
// within its TTL; the framework's carry no owner facts: the user running
// clear-locks says nothing compiles now), and the eviction lock likewise.
// With force, every one. Also removes what dead compiles left in the
// entries (leftover_temps.hpp).
[[nodiscard]] ClearLocksReport clear_locks(const Cache& cache, bool force);

// Forgets every cached failure (model.log of entries with no result), so those
// graphs compile again. Entries being compiled are left alone.
[[nodiscard]] std::vector<EntryInfo> clear_failed(const Cache& cache);

// The entries a user named: "neuronxcc-V/MODULE_g+f", an entry path, or
// "MODULE_g+f" alone (every compiler version that has it). Throws
// UsageError for a name that is no key.
[[nodiscard]] std::vector<EntryInfo> find_entries(const Cache& cache, const std::string& name);

// Removes one listed entry (Entry::remove): false when a lock is there.
[[nodiscard]] bool remove_unless_locked(const Cache& cache, const EntryInfo& entry);

// Forgets an entry's result, done or failed, under its lock: its graph
// stays, pending (--command clear-neffs). False when a compile holds it.
[[nodiscard]] bool forget_result(const Cache& cache, const EntryInfo& entry);

} // namespace npc::cache
