#include <npc/cache/remote_maintenance.hpp>

#include <algorithm>
#include <tuple>

#include <spdlog/spdlog.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/listing.hpp>
#include <npc/cache/publish.hpp>
#include <npc/util/error.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/parallel.hpp>
#include <npc/util/sha256.hpp>

namespace npc::cache {

namespace {

template <typename T> T checked(Result<T> result) {
  if (!result) throw EnvironmentError(result.error());
  return std::move(*result);
}

void checked(const Status& status) {
  if (!status) throw EnvironmentError(status.error());
}

std::string file_key(const EntryInfo& entry, std::string_view file) {
  return entry.dir.generic_string() + "/" + std::string(file);
}

// The lock object of `entry`, judged now (storage/lock.hpp).
void judge_lock(const storage::Storage& remote, EntryInfo& entry, std::chrono::system_clock::time_point now) {
  entry.framework_lock = checked(storage::judge_lock(remote, file_key(entry, kFrameworkLockFile),
                                                     storage::kDefaultStaleLockAge, now));
}

storage::LockTimes lock_times() { return {storage::kLockTtl, storage::kDefaultStaleLockAge}; }

// Why a done entry's NEFF cannot be served, or "" when it can;
// `unverified` when it has no integrity record to check against.
std::string check_remote_neff(const storage::Storage& remote, const EntryInfo& entry, const fs::path& scratch,
                       bool& unverified) {
  if (!entry.has_neff) return "done marker without a NEFF";
  std::optional<EntryMeta> record;
  if (auto text = remote.read(file_key(entry, kMetaFile), kMaxEntryMetaBytes)) {
    auto parsed = parse_entry_meta(*text);
    if (!parsed) return "its npc-entry.json is corrupt: " + parsed.error();
    record = std::move(*parsed);
  } else if (checked(remote.stat(file_key(entry, kMetaFile)))) {
    throw EnvironmentError(text.error());
  }
  if (!record || !record->neff_sha256) {
    unverified = true;
    return "";
  }
  fs::path neff = scratch / kNeffFile;
  if (!checked(remote.get_file(file_key(entry, kNeffFile), neff))) return "done marker without a NEFF";
  auto digest = util::sha256_file(neff);
  std::error_code ignored;
  fs::remove(neff, ignored);
  if (!digest) throw EnvironmentError(digest.error());
  if (digest->sha256 != *record->neff_sha256 || (record->neff_bytes && *record->neff_bytes != digest->size))
    return "NEFF does not match its integrity record";
  return "";
}

} // namespace

RemoteCacheAdmin::RemoteCacheAdmin(std::vector<std::shared_ptr<storage::Storage>> connections)
    : connections_(std::move(connections)) {
  if (connections_.empty()) throw std::logic_error("RemoteCacheAdmin needs a connection");
}

std::string RemoteCacheAdmin::describe() const { return first().describe(); }

std::string RemoteCacheAdmin::describe(const CacheKey& key) const {
  return first().describe(key.relative_path().generic_string());
}

std::vector<EntryInfo> RemoteCacheAdmin::list() const { return list_under(""); }

Result<bool> RemoteCacheAdmin::download(const CacheKey& key, std::string_view file, const fs::path& to) const {
  return first().get_file(key.relative_path().generic_string() + "/" + std::string(file), to);
}

std::vector<EntryInfo> RemoteCacheAdmin::list_version(const std::string& compiler_version) const {
  return list_under(std::string(kVersionDirPrefix) + compiler_version);
}

std::vector<EntryInfo> RemoteCacheAdmin::list_under(const std::string& folder) const {
  const auto now = std::chrono::system_clock::now();
  auto entries = entries_from_tree(checked(first().list_tree(folder)), folder, first().last_use_file());
  for (auto& info : entries) {
    // Rare, so judged (a GET) only when a lock object is there. A done
    // entry is done whoever holds its lock, as locally.
    if (info.framework_lock.state != storage::LockState::absent && !(info.has_done && info.has_neff))
      judge_lock(first(), info, now);
    info.state = state_from_files(info, info.framework_lock.blocks());
  }
  return entries;
}

VerifyReport RemoteCacheAdmin::verify(Repair repair) const {
  VerifyReport report;
  std::vector<EntryInfo> done;
  for (auto& entry : list())
    if (entry.has_done) done.push_back(std::move(entry));
  report.checked = done.size();
  // One scratch folder per connection: each thread downloads one NEFF at a
  // time there and removes it once hashed.
  util::TempDir scratch_root(fs::temp_directory_path(), std::string(util::kTempPrefix) + "verify-");
  std::vector<fs::path> scratch;
  for (std::size_t w = 0; w < connections_.size(); ++w) {
    scratch.push_back(scratch_root.path() / std::to_string(w));
    checked(util::ensure_dir(scratch.back(), 0700));
  }
  std::vector<std::string> problems(done.size());
  std::vector<char> unverified(done.size(), 0);
  util::for_each_shared_out(done.size(), connections_.size(), [&](std::size_t w, std::size_t i) {
    bool no_record = false;
    problems[i] = check_remote_neff(*connections_[w], done[i], scratch[w], no_record);
    unverified[i] = no_record ? 1 : 0;
  });
  const util::LockHolder me = util::LockHolder::self(lock_tool_name());
  for (std::size_t i = 0; i < done.size(); ++i) {
    report.unverified += unverified[i];
    if (problems[i].empty()) continue;
    VerifyReport::Problem item{done[i], problems[i], false};
    if (repair == Repair::yes) {
      // Under the entry's lock, and checked again there: a compile may have
      // republished it since.
      auto taken = checked(storage::Lock::try_acquire(connections_.front(), file_key(done[i], kFrameworkLockFile),
                                                      me, lock_times(), std::chrono::system_clock::now()));
      if (auto* lock = std::get_if<storage::Lock>(&taken)) {
        bool ignored = false;
        std::string still = check_remote_neff(first(), done[i], scratch[0], ignored);
        item.repaired = still.empty() || static_cast<bool>(demote_result(first(), done[i].dir.generic_string()));
        std::ignore = lock->release();
      }
    }
    report.problems.push_back(std::move(item));
  }
  return report;
}

ClearLocksReport RemoteCacheAdmin::clear_locks(bool force) const {
  ClearLocksReport report;
  const auto now = std::chrono::system_clock::now();
  auto consider = [&](const std::string& entry_key) {
    const std::string key = entry_key + "/" + std::string(kFrameworkLockFile);
    auto facts = checked(storage::judge_lock(first(), key, storage::kDefaultStaleLockAge, now));
    if (facts.state == storage::LockState::absent) return; // released meanwhile
    if (!force && facts.owner_proved_alive()) {
      report.held.push_back(first().describe(key));
      return;
    }
    checked(connections_.front()->remove(key));
    report.removed.push_back(first().describe(key));
  };
  for (const auto& entry : list())
    if (entry.framework_lock.state != storage::LockState::absent) consider(entry.dir.generic_string());
  if (checked(first().stat(std::string(kRemoteEvictionLockDir) + "/" + std::string(kFrameworkLockFile))))
    consider(std::string(kRemoteEvictionLockDir));
  return report;
}

std::vector<EntryInfo> RemoteCacheAdmin::clear_failed() const {
  std::vector<EntryInfo> cleared;
  for (auto& entry : list()) {
    if (entry.state != EntryState::failed) continue;
    checked(connections_.front()->remove(file_key(entry, kLogFile)));
    cleared.push_back(std::move(entry));
  }
  return cleared;
}

bool RemoteCacheAdmin::remove(const EntryInfo& entry) const { return remove_with(*connections_.front(), entry); }

bool RemoteCacheAdmin::remove_with(storage::Storage& remote, const EntryInfo& entry) {
  if (checked(remote.stat(file_key(entry, kFrameworkLockFile)))) return false;
  return checked(remove_entry(remote, entry.dir.generic_string()));
}

bool RemoteCacheAdmin::clear_result(const EntryInfo& entry) const {
  auto taken = checked(storage::Lock::try_acquire(connections_.front(), file_key(entry, kFrameworkLockFile),
                                                  util::LockHolder::self(lock_tool_name()), lock_times(),
                                                  std::chrono::system_clock::now()));
  auto* lock = std::get_if<storage::Lock>(&taken);
  if (!lock) return false;
  checked(demote_result(first(), entry.dir.generic_string()));
  checked(first().remove(file_key(entry, kLogFile)));
  checked(lock->release());
  return true;
}

EvictionReport RemoteCacheAdmin::evict(const EvictionPolicy& policy, DryRun dry_run) const {
  EvictionReport report;
  storage::Lock lock;
  if (dry_run == DryRun::no) {
    auto taken = checked(storage::Lock::try_acquire(
        connections_.front(), std::string(kRemoteEvictionLockDir) + "/" + std::string(kFrameworkLockFile),
        util::LockHolder::self(lock_tool_name()), lock_times(), std::chrono::system_clock::now()));
    if (auto* held = std::get_if<storage::Lock::Held>(&taken)) {
      spdlog::debug("{} is being evicted: the lock {}", describe(), held->facts.describe());
      return report;
    }
    lock = std::move(std::get<storage::Lock>(taken));
    // A pass over a big remote takes many requests: renewed while it runs.
    lock.keep_renewed();
  }
  report.ran = true;
  auto entries = list();
  report.entries_before = entries.size();
  for (const auto& e : entries) report.bytes_before += e.bytes;
  report.bytes_after = report.bytes_before;
  auto plan = plan_eviction(entries, policy, std::chrono::system_clock::now(), &report.kept_by_ttl,
                            &report.kept_locked, &report.kept_pending);
  // Each removal is a LIST and a DELETE per object: shared out over the
  // connections, each result written by index.
  std::vector<char> removed(plan.size(), 1);
  if (dry_run == DryRun::no)
    util::for_each_shared_out(plan.size(), connections_.size(), [&](std::size_t w, std::size_t i) {
      removed[i] = remove_with(*connections_[w], *plan[i]) ? 1 : 0;
    });
  for (std::size_t i = 0; i < plan.size(); ++i) {
    if (!removed[i]) {
      ++report.kept_locked; // a compile took it since the listing
      continue;
    }
    report.bytes_after -= plan[i]->bytes;
    report.deleted.push_back(*plan[i]);
  }
  std::ignore = lock.release();
  return report;
}

} // namespace npc::cache
