#pragma once
// A read-only second cache tier: for example a team's shared cache directory
// that a pre-warm job fills. On a local miss the compile entry looks there;
// a done entry whose NEFF verifies is copied into the local cache (under the
// local entry's lock, published like a compile's result) and served from
// there. Nothing is ever written, locked, touched or evicted in the
// secondary: it is only opened for reading, so a read-only mount works.
//
// The secondary is named by NEURON_COMPILE_CACHE_SECONDARY (or the wrapper's
// --secondary-cache DIR): a cache root, i.e. a directory holding
// neuronxcc-<version>/ folders, or a directory holding neuron-compile-cache/
// (what --cache_dir names).
//
// Trust: a secondary entry with an integrity record (npc-entry.json) is
// served only when its NEFF hashes to the record. One without a record
// (written by another tool) is accepted as the local cache accepts such
// entries, and the hash taken while copying becomes the local copy's record,
// so from then on the local copy is verified. Naming a secondary is the
// decision to trust it: it usually belongs to another user (the job that
// fills it), so the local cache's ownership check (trust.hpp) does not apply
// to it; its files are never followed through symlinks.

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <npc/cache/key.hpp>
#include <npc/cache/store.hpp>
#include <npc/cache/tier_fetch.hpp>

namespace npc::cache {

namespace fs = std::filesystem;

inline constexpr const char* kSecondaryCacheEnv = "NEURON_COMPILE_CACHE_SECONDARY";

// The cache root `value` names (see above); nullopt when value is empty.
[[nodiscard]] std::optional<fs::path> resolve_secondary_root(std::string_view value);
// From NEURON_COMPILE_CACHE_SECONDARY; nullopt when unset or empty.
[[nodiscard]] std::optional<fs::path> secondary_root_from_environment();

// Looks `key` up in the secondary cache at `secondary_root` and, on a hit,
// copies it into `local` (tier_fetch.hpp; a cached failure there is not
// taken). Waits up to `lock_wait` for the local entry's lock (zero: does not
// wait). Throws nothing: what cannot be read or written is `rejected`, with
// why (a local cache that cannot be written then fails the compile that
// follows, with its own error).
[[nodiscard]] FetchResult fetch_from_secondary(const Cache& local, const fs::path& secondary_root, const CacheKey& key,
                                               std::chrono::milliseconds lock_wait);

// fetch_from_secondary for a compile about to miss, what it found said in
// the log: true when the entry of `key` is done in `local` now, copied from
// the secondary cache at `root` (or published by another process
// meanwhile). A root that is not a directory is warned of and not used;
// none (nullopt) is a miss.
[[nodiscard]] bool bring_from_secondary(const Cache& local, const std::optional<fs::path>& root, const CacheKey& key,
                                        std::chrono::milliseconds lock_wait);

} // namespace npc::cache
