#include <npc/cache/maintenance.hpp>

#include <cerrno>
#include <unistd.h>

#include <npc/cache/layout.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>

namespace npc::cache {

namespace {

template <typename T> T checked(Result<T> result) {
  if (!result) throw EnvironmentError(result.error());
  return std::move(*result);
}

// Why a done entry cannot be served, or "" when it can.
std::string check_done_entry(const Entry& entry, const EntryInfo& listed, bool& unverified) {
  if (!listed.has_neff) return "done marker without a NEFF";
  auto integrity = entry.verify_neff();
  if (!integrity) return integrity.error();
  if (*integrity == Integrity::mismatch) return "NEFF does not match its integrity record";
  if (*integrity == Integrity::unverified) unverified = true;
  return "";
}

// Removes the dead temps of each entry that has any, under the entry's lock
// (an entry someone holds is skipped: its temps may be alive). Only a
// directory has them: a storage's writes leave no temp behind.
std::vector<LeftoverTemp> remove_leftover_temps(const Cache& cache, const std::vector<EntryInfo>& entries) {
  std::vector<LeftoverTemp> removed;
  for (const auto& entry : entries) {
    if (entry.temp_files.empty() || entry.state == EntryState::locked) continue;
    auto lock = cache.entry(entry.dir).try_lock();
    if (!lock || !lock->has_value()) continue;
    // Listed again under the lock: a compile may have finished meanwhile.
    auto info = cache.entry(entry.dir).inspect();
    if (!info) continue;
    for (auto& temp : remove_dead_temps(entry.dir, info->temp_files, LockHeld::yes, cache.clock().now()))
      removed.push_back(std::move(temp));
  }
  return removed;
}

// Removes a framework lock file: false when it is gone already. An older
// framework's lock may be a folder: it goes with all below it.
bool remove_lock_object(const Cache& cache, const std::string& key) {
  storage::Storage& storage = *cache.storage();
  auto there = checked(storage.stat(key));
  if (!there) return false;
  if (there->directory) return checked(storage.remove_tree(key));
  checked(storage.remove(key));
  return true;
}

} // namespace

VerifyReport verify_cache(const Cache& cache, Repair repair) {
  VerifyReport report;
  std::vector<EntryInfo> entries = cache.list();
  if (repair == Repair::yes) {
    report.leftover_temps = remove_leftover_temps(cache, entries);
    report.leftovers_removed = true;
  } else {
    // What a repair would remove: nobody holds the entry now.
    for (const auto& entry : entries) {
      if (entry.temp_files.empty() || entry.state == EntryState::locked) continue;
      for (auto& path : dead_temps(entry.dir, entry.temp_files, LockHeld::yes, cache.clock().now()))
        report.leftover_temps.push_back({std::move(path), ""});
    }
  }
  std::vector<EntryInfo> done;
  for (auto& entry : entries)
    if (entry.has_done) done.push_back(std::move(entry));
  report.checked = done.size();
  // Every NEFF read and hashed (a storage's downloaded): shared out, each
  // result written by index.
  std::vector<std::string> problems(done.size());
  std::vector<char> unverified(done.size(), 0);
  cache.share_out(done.size(), [&](std::size_t connection, std::size_t i) {
    bool no_record = false;
    problems[i] = check_done_entry(cache.entry(done[i].dir, connection), done[i], no_record);
    unverified[i] = no_record ? 1 : 0;
  });
  for (std::size_t i = 0; i < done.size(); ++i) {
    report.unverified += unverified[i];
    if (problems[i].empty()) continue;
    const Entry entry = cache.entry(done[i].dir);
    // Evicted or republished while we looked: not a problem of the cache.
    auto again = entry.inspect();
    if (!again || !again->has_done) continue;
    bool ignored = false;
    if (again->has_neff && check_done_entry(entry, *again, ignored).empty()) continue;
    VerifyReport::Problem item{done[i], problems[i], false};
    if (repair == Repair::yes) {
      // A lock that cannot be taken for want of the storage (S3 unreachable,
      // a cache that cannot be written) is the run's error, not an entry
      // left unrepaired: said as one line, with the exit status for it.
      auto lock = checked(entry.try_lock());
      if (lock) {
        // Checked again under the lock: a compile may have just fixed it.
        auto held = entry.inspect();
        bool still_bad = held && held->has_done && !check_done_entry(entry, *held, ignored).empty();
        if (still_bad)
          if (auto demoted = entry.demote(); !demoted)
            throw EnvironmentError("cannot demote " + cache.describe(*held) + ": " + demoted.error());
        item.repaired = true;
      }
    }
    report.problems.push_back(std::move(item));
  }
  return report;
}

ClearLocksReport clear_locks(const Cache& cache, bool force) {
  ClearLocksReport report;
  std::vector<EntryInfo> entries = cache.list();
  // Before the lock files: taking an entry's lock for this leaves none behind.
  report.temps = remove_leftover_temps(cache, entries);
  auto consider_flock = [&](const fs::path& path) {
    if (util::remove_lock_file(path, force)) report.removed.push_back(path);
    else if (util::probe_lock(path) != util::LockState::absent) report.held.push_back(path);
  };
  // "Nothing is compiling now", the user says: every lock goes but one
  // whose owner is provably alive (storage/lock.hpp).
  auto consider = [&](const std::string& key, const storage::LockFacts& facts) {
    fs::path where = cache.storage()->describe(key);
    if (facts.state == storage::LockState::absent) return; // released meanwhile
    if (facts.owner_proved_alive() && !force) report.held.push_back(std::move(where));
    else if (remove_lock_object(cache, key)) report.removed.push_back(std::move(where));
  };
  for (const auto& entry : entries) {
    if (entry.has_lock_file) consider_flock(cache.entry(entry.dir).lock_path());
    if (entry.framework_lock.state == storage::LockState::absent) continue;
    auto judged = cache.entry(entry.dir).inspect(); // again: the listing may be a while old
    if (!judged) continue;
    consider(entry.key.relative_path().generic_string() + "/" + std::string(kFrameworkLockFile),
             judged->framework_lock);
  }
  if (auto eviction = cache.keeping().clear_eviction_lock(cache, force))
    (eviction->removed ? report.removed : report.held).push_back(std::move(eviction->where));
  return report;
}

std::vector<EntryInfo> clear_failed(const Cache& cache) {
  std::vector<EntryInfo> cleared;
  for (auto& entry : cache.list()) {
    if (entry.state != EntryState::failed) continue;
    auto lock = checked(cache.entry(entry.dir).try_lock());
    if (!lock) continue;
    auto done = cache.entry(entry.dir).clear_failure();
    std::ignore = lock->release();
    if (!done) throw EnvironmentError(done.error());
    cleared.push_back(std::move(entry));
  }
  return cleared;
}

std::vector<EntryInfo> find_entries(const Cache& cache, const std::string& name) {
  std::vector<EntryInfo> found;
  if (auto key = parse_key(name)) {
    auto info = checked(cache.entry(*key).inspect());
    if (info.state != EntryState::absent) found.push_back(std::move(info));
    return found;
  }
  std::string g, f;
  std::string module = fs::path(name).filename().string();
  if (!parse_module_name(module, g, f))
    throw UsageError("'" + name +
                     "' is not a cache key (expected neuronxcc-<version>/MODULE_<hash>+<hash> or MODULE_<hash>+<hash>)");
  for (auto& e : cache.list())
    if (e.key.module_name() == module) found.push_back(std::move(e));
  return found;
}

bool remove_unless_locked(const Cache& cache, const EntryInfo& entry) {
  return checked(cache.entry(entry.dir).remove());
}

bool forget_result(const Cache& cache, const EntryInfo& entry) {
  const Entry e = cache.entry(entry.dir);
  auto lock = checked(e.try_lock());
  if (!lock) return false;
  auto demoted = e.demote();
  auto cleared = demoted ? e.clear_failure() : demoted;
  std::ignore = lock->release();
  if (!cleared) throw EnvironmentError(cleared.error());
  return true;
}

} // namespace npc::cache
