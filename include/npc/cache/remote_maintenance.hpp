#pragma once
// `neuron_cache` on a remote cache (s3://bucket/prefix, remote.hpp): the
// listing, verification, lock clearing, failure clearing, removal and
// eviction of maintenance.hpp and eviction.hpp, done on the remote's objects
// themselves, not on a node's mirror.
//
// The listing is one walk of every object under the root (S3: one LIST per
// 1000 objects), grouped into entries by their folder; an entry's state
// follows the same rules as a local one (entry.hpp), with the lock object
// judged as every lock is (storage/lock.hpp). Only entries with a lock
// object cost a HEAD and a GET more.
//
// An entry's last use is the time of its npc-last-use object, written when
// a node records a use (the launcher bringing the entry's result or graph
// into its mirror, a compile's upload), else of its newest object. The time
// comes from the listing (the object's LastModified), so no GET per entry:
// a listing of 100,000 entries is a few hundred requests. Hits a node serves
// from its own mirror are not recorded in S3 (they cost no request), so an
// entry every node already holds ages in S3 until a new node, or a launcher
// run, uses it.
//
// Eviction (prune) deletes least recently used entries first while the
// remote is over the limit, never one used within the TTL, locked, or
// pending, as eviction.hpp does; one process evicts a remote at a time (an
// eviction lock object under .npc/, kept renewed). A remote cache is never
// evicted behind the user's back: only `neuron_cache prune` does it, since
// the bucket is shared by every node and its size is the bucket owner's call.
//
// Every function throws EnvironmentError when the remote cannot be read or
// written (unreachable, denied): a report that silently missed entries would
// mislead more than a clear failure.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <npc/cache/eviction.hpp>
#include <npc/cache/maintenance.hpp>
#include <npc/storage/storage.hpp>

namespace npc::cache {

// Where the remote's eviction lock is (its folder key).
inline constexpr std::string_view kRemoteEvictionLockDir = ".npc/eviction";

class RemoteCacheAdmin {
public:
  // `connections`: storages of the one remote cache (at least one); work on
  // many entries (verify) is shared out over them, a thread each.
  explicit RemoteCacheAdmin(std::vector<std::shared_ptr<storage::Storage>> connections);

  // The root as users name it (s3://bucket/prefix).
  [[nodiscard]] std::string describe() const;
  // An entry as users name it (s3://bucket/prefix/neuronxcc-V/MODULE_...).
  [[nodiscard]] std::string describe(const CacheKey& key) const;

  // Every entry of every compiler version, sorted by key. EntryInfo::dir is
  // the entry's key (neuronxcc-V/MODULE_...), relative to the root.
  [[nodiscard]] std::vector<EntryInfo> list() const;
  // Every entry of one compiler version (a listing of its folder alone).
  [[nodiscard]] std::vector<EntryInfo> list_version(const std::string& compiler_version) const;

  // Downloads every done entry's NEFF and hashes it against its record.
  // With Repair::yes a bad entry is demoted (model.done first, then the NEFF
  // and its record) under its remote lock, so the next run recompiles it.
  [[nodiscard]] VerifyReport verify(Repair repair) const;

  // Removes lock objects not in force (expired, or of a process of this
  // host that is gone); with force, every one. Unlike a local framework
  // lock, a remote lock in force is proved alive by its renewals, so it is
  // kept without force. The paths in the report are URLs.
  [[nodiscard]] ClearLocksReport clear_locks(bool force) const;

  // Forgets every cached failure (model.log of an entry with no result and
  // no lock in force).
  [[nodiscard]] std::vector<EntryInfo> clear_failed() const;

  // Removes one entry: false when a lock object is there (even a stale one,
  // as a local removal never breaks a lock). model.done goes first, so no
  // reader takes a done entry whose files are going.
  [[nodiscard]] bool remove(const EntryInfo& entry) const;

  // Forgets an entry's result, done or failed, under its remote lock: its
  // graph stays, pending (neuron_parallel_compile --command clear-neffs).
  // False when a compile holds it.
  [[nodiscard]] bool clear_result(const EntryInfo& entry) const;

  // One file of an entry, downloaded to `to`: false when the remote has none.
  [[nodiscard]] Result<bool> download(const CacheKey& key, std::string_view file, const fs::path& to) const;

  // One eviction pass (ran=false when another process evicts this remote).
  [[nodiscard]] EvictionReport evict(const EvictionPolicy& policy, DryRun dry_run) const;

private:
  [[nodiscard]] storage::Storage& first() const { return *connections_.front(); }
  [[nodiscard]] static bool remove_with(storage::Storage& remote, const EntryInfo& entry);
  // The entries of the objects under `folder` ("" or a version folder).
  [[nodiscard]] std::vector<EntryInfo> list_under(const std::string& folder) const;

  std::vector<std::shared_ptr<storage::Storage>> connections_;
};

} // namespace npc::cache
