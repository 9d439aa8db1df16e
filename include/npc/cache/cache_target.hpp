#pragma once
// The cache the maintenance commands (`neuron_cache`, the launcher's
// --command modes) work on: a local directory (store.hpp) or a remote cache
// in S3 (remote_maintenance.hpp). The commands print the same reports for
// both; this says where each comes from, and names the cache and its
// entries as users name them (a path, or an s3:// URL).

#include <memory>
#include <string>
#include <vector>

#include <npc/cache/eviction.hpp>
#include <npc/cache/maintenance.hpp>
#include <npc/cache/remote_maintenance.hpp>
#include <npc/cache/store.hpp>

namespace npc::cache {

class CacheTarget {
public:
  explicit CacheTarget(const Cache& local) : local_(&local) {}
  explicit CacheTarget(const RemoteCacheAdmin& remote) : remote_(&remote) {}

  [[nodiscard]] bool is_remote() const { return remote_ != nullptr; }
  // The cache's root: its path, or its URL.
  [[nodiscard]] std::string root() const;
  // Where one entry is: its folder's path, or its URL.
  [[nodiscard]] std::string where(const EntryInfo& entry) const;

  [[nodiscard]] std::vector<EntryInfo> list() const;
  [[nodiscard]] std::vector<EntryInfo> list_version(const std::string& compiler_version) const;
  [[nodiscard]] CacheCensus census() const;
  // The entries a user named: "neuronxcc-V/MODULE_g+f", an entry path, or
  // "MODULE_g+f" alone (every compiler version that has it). Throws
  // UsageError for a name that is no key.
  [[nodiscard]] std::vector<EntryInfo> find(const std::string& name) const;
  [[nodiscard]] VerifyReport verify(Repair repair) const;
  [[nodiscard]] ClearLocksReport clear_locks(bool force) const;
  [[nodiscard]] std::vector<EntryInfo> clear_failed() const;
  // False when the entry is locked (not removed).
  [[nodiscard]] bool remove(const EntryInfo& entry) const;
  // Forgets an entry's result (done or failed) so its graph compiles again;
  // false when a compile holds it.
  [[nodiscard]] bool clear_result(const EntryInfo& entry) const;
  [[nodiscard]] EvictionReport evict(const EvictionPolicy& policy, DryRun dry_run) const;

private:
  const Cache* local_ = nullptr;
  const RemoteCacheAdmin* remote_ = nullptr;
};

} // namespace npc::cache
