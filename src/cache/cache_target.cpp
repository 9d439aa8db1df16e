#include <npc/cache/cache_target.hpp>

#include <npc/util/error.hpp>

namespace npc::cache {

std::string CacheTarget::root() const { return remote_ ? remote_->describe() : local_->root().string(); }

std::string CacheTarget::where(const EntryInfo& entry) const {
  return remote_ ? remote_->describe(entry.key) : entry.dir.string();
}

std::vector<EntryInfo> CacheTarget::list() const { return remote_ ? remote_->list() : local_->list(); }

std::vector<EntryInfo> CacheTarget::list_version(const std::string& compiler_version) const {
  return remote_ ? remote_->list_version(compiler_version) : local_->list_version(compiler_version);
}

CacheCensus CacheTarget::census() const {
  if (!remote_) return local_->census();
  CacheCensus census;
  for (const auto& e : remote_->list()) census.count(e.state, e.bytes, e.last_used);
  return census;
}

bool CacheTarget::clear_result(const EntryInfo& entry) const {
  if (remote_) return remote_->clear_result(entry);
  auto lock = local_->entry(entry.dir).try_lock();
  if (!lock || !lock->has_value()) return false;
  const Entry local = local_->entry(entry.dir);
  return local.demote() && local.clear_failure();
}

std::vector<EntryInfo> CacheTarget::find(const std::string& name) const {
  std::vector<EntryInfo> found;
  if (auto key = parse_key(name)) {
    if (remote_) {
      for (auto& e : remote_->list())
        if (e.key == *key) found.push_back(std::move(e));
      return found;
    }
    auto info = local_->entry(*key).inspect();
    if (info && info->state != EntryState::absent) found.push_back(std::move(*info));
    return found;
  }
  std::string g, f;
  std::string module = std::filesystem::path(name).filename().string();
  if (!parse_module_name(module, g, f))
    throw UsageError("'" + name +
                     "' is not a cache key (expected neuronxcc-<version>/MODULE_<hash>+<hash> or MODULE_<hash>+<hash>)");
  for (auto& e : list())
    if (e.key.module_name() == module) found.push_back(std::move(e));
  return found;
}

VerifyReport CacheTarget::verify(Repair repair) const {
  return remote_ ? remote_->verify(repair) : verify_cache(*local_, repair);
}

ClearLocksReport CacheTarget::clear_locks(bool force) const {
  return remote_ ? remote_->clear_locks(force) : cache::clear_locks(*local_, force);
}

std::vector<EntryInfo> CacheTarget::clear_failed() const {
  return remote_ ? remote_->clear_failed() : cache::clear_failed(*local_);
}

bool CacheTarget::remove(const EntryInfo& entry) const {
  if (remote_) return remote_->remove(entry);
  auto removed = local_->entry(entry.dir).remove();
  if (!removed) throw EnvironmentError(removed.error());
  return *removed;
}

EvictionReport CacheTarget::evict(const EvictionPolicy& policy, DryRun dry_run) const {
  return remote_ ? remote_->evict(policy, dry_run) : cache::evict(*local_, policy, dry_run);
}

} // namespace npc::cache
