#include <npc/cache/maintenance.hpp>

#include <cerrno>
#include <unistd.h>

#include <npc/cache/layout.hpp>
#include <npc/util/fs.hpp>

namespace npc::cache {

namespace {

// Why a done entry cannot be served, or "" when it can.
std::string check_done_entry(const Cache& cache, const EntryInfo& entry, bool& unverified) {
  auto integrity = cache.entry(entry.dir).verify_neff();
  if (!integrity) return integrity.error();
  if (*integrity == Integrity::mismatch) return "NEFF does not match its integrity record";
  if (*integrity == Integrity::unverified) unverified = true;
  return "";
}

// Removes the dead temps of each entry that has any, under the entry's lock
// (an entry someone holds is skipped: its temps may be alive).
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
  for (auto& entry : entries) {
    if (!entry.has_done) continue;
    ++report.checked;
    bool unverified = false;
    std::string problem = entry.has_neff ? check_done_entry(cache, entry, unverified)
                                         : "done marker without a NEFF";
    if (unverified) ++report.unverified;
    if (problem.empty()) continue;
    // Evicted or republished while we looked: not a problem of the cache.
    auto again = cache.entry(entry.dir).inspect();
    if (!again || !again->has_done) continue;
    if (again->has_neff) {
      bool ignored = false;
      if (check_done_entry(cache, *again, ignored).empty()) continue;
    }
    VerifyReport::Problem item{entry, problem, false};
    if (repair == Repair::yes) {
      auto lock = cache.entry(entry.dir).try_lock();
      if (lock && lock->has_value()) {
        // Check again under the lock: a compile may have just fixed it.
        bool again_unverified = false;
        std::string still = entry.has_neff ? check_done_entry(cache, entry, again_unverified)
                                           : problem;
        if (!still.empty()) item.repaired = static_cast<bool>(cache.entry(entry.dir).demote());
        else item.repaired = true;
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
  auto consider = [&](const fs::path& path) {
    if (util::remove_lock_file(path, force)) report.removed.push_back(path);
    else if (util::probe_lock(path) != util::LockState::absent) report.held.push_back(path);
  };
  for (const auto& entry : entries) {
    if (entry.has_lock_file) consider(cache.entry(entry.dir).lock_path());
    if (entry.framework_lock.state == storage::LockState::absent) continue;
    // "Nothing is compiling now", the user says: every framework lock goes
    // but one whose owner is provably alive (storage/lock.hpp).
    const Entry now = cache.entry(entry.dir);
    fs::path path = now.framework_lock_path();
    auto judged = now.inspect(); // again: the listing may be a while old
    if (!judged || judged->framework_lock.state == storage::LockState::absent) continue;
    if (judged->framework_lock.owner_proved_alive() && !force) {
      report.held.push_back(path);
      continue;
    }
    if (::unlink(path.c_str()) == 0 || (errno == EISDIR && util::remove_tree(path))) report.removed.push_back(path);
  }
  std::error_code ec;
  fs::path eviction_lock = cache.private_dir() / kEvictionLock;
  if (fs::exists(fs::symlink_status(eviction_lock, ec))) consider(eviction_lock);
  return report;
}

std::vector<EntryInfo> clear_failed(const Cache& cache) {
  std::vector<EntryInfo> cleared;
  for (auto& entry : cache.list()) {
    if (entry.state != EntryState::failed) continue;
    auto lock = cache.entry(entry.dir).try_lock();
    if (!lock || !lock->has_value()) continue;
    if (cache.entry(entry.dir).clear_failure()) cleared.push_back(std::move(entry));
  }
  return cleared;
}

} // namespace npc::cache
