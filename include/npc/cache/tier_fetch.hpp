#pragma once
// A result brought from another tier of the cache into this one: the one
// implementation of "copy a done entry here, verified" that every second
// tier uses (the read-only secondary directory, secondary.hpp; the shared
// store behind a mirror, remote.hpp), over any storage.
//
// One listing of the entry's folder there tells a miss (the usual case) from
// a result. A done entry's NEFF is downloaded into a staging folder inside
// this cache's entry, hashed, and checked against the integrity record there
// (size and SHA-256; an entry another tool wrote has none, and the hash of
// the copy becomes its record here); a record that changed between the two
// reads (republished) is read once more before the NEFF is called bad. The
// result is then published into this cache's entry by its success sequence
// (entry.hpp), under its lock, with the graph and flags it lacks. A cached
// failure (model.log without model.done) is copied as one when asked.
//
// Nothing is written in the other tier: a read-only one works.

#include <chrono>
#include <string>
#include <vector>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/key.hpp>
#include <npc/cache/store.hpp>
#include <npc/storage/storage.hpp>
#include <npc/util/result.hpp>

namespace npc::cache {

enum class FetchOutcome {
  miss,           // neither done nor failed there (or failed, not asked for)
  copied,         // a done entry, verified and published here
  failure_copied, // a cached failure, copied here as one
  already_done,   // this cache's entry was done by the time we held its lock
  rejected,       // a result there, but unusable (its NEFF fails its record)
  busy            // another process holds this cache's entry lock
};

struct FetchResult {
  FetchOutcome outcome = FetchOutcome::miss;
  std::string detail;     // why, for rejected and busy
  bool done_there = false; // the other tier's entry was done (for its use record)
};

struct FetchOptions {
  std::chrono::milliseconds lock_wait{0}; // for this cache's entry lock (zero: one attempt)
  bool failures = true;                   // copy a cached failure too
  // The names in the entry's folder there, when the caller has just listed
  // it (a look at many entries): that listing is not made again. A file
  // removed since is a miss or a rejection, as after a listing of our own.
  const std::vector<std::string>* listed = nullptr;
};

// `from`: the other tier, its entry for `key` at key.relative_path().
// Errors are the other tier's (unreachable, denied, unreadable) or this
// cache's (not writable), as text.
[[nodiscard]] Result<FetchResult> fetch_result(const storage::Storage& from, const Cache& into, const CacheKey& key,
                                               const FetchOptions& options);

// The integrity record (npc-entry.json) of the entry at `entry_key` in any
// storage; an error when it is absent, unreadable or corrupt.
[[nodiscard]] Result<EntryMeta> read_stored_record(const storage::Storage& storage, const std::string& entry_key);

} // namespace npc::cache
