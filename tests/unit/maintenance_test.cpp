// cache/maintenance: verify with repair, clear-locks, clear-failed.

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/publish.hpp>
#include <npc/cache/maintenance.hpp>
#include <npc/util/file_lock.hpp>

#include "test_support.hpp"
#include "unit_helpers.hpp"

namespace npc::cache {
namespace {

using namespace std::chrono_literals;

class MaintenanceTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    cache.emplace(dir() / "root", clock);
    ASSERT_TRUE(cache->ensure_root().ok());
  }

  fs::path pending_entry(char digit) {
    fs::path d = cache->entry_dir(unit::repeated_key("1.0", digit, '0'));
    auto stored = cache->entry(d).store_graph(std::string("graph ") + digit, {"-O2"});
    EXPECT_TRUE(stored.ok()) << (stored.ok() ? "" : stored.error());
    return d;
  }

  fs::path done_entry(char digit) {
    fs::path d = pending_entry(digit);
    auto lock = cache->entry(d).lock(1s);
    EXPECT_TRUE(lock.ok() && std::holds_alternative<npc::storage::Lock>(*lock)) << (lock.ok() ? "held elsewhere" : lock.error());
    fs::path neff = dir() / "new.neff";
    test::write_text(neff, std::string("neff of ") + digit);
    AttemptRecord r;
    r.attempt = 1;
    r.outcome = "success";
    auto published = cache->entry(d).publish_success(neff, r);
    EXPECT_TRUE(published.ok()) << (published.ok() ? "" : published.error());
    return d;
  }

  fs::path failed_entry(char digit) {
    fs::path d = pending_entry(digit);
    test::write_text(d / kLogFile, "compile failed\n");
    return d;
  }

  static void flip_first_byte(const fs::path& file) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    char c = 0;
    f.read(&c, 1);
    f.seekp(0);
    c = static_cast<char>(c ^ 0x20);
    f.write(&c, 1);
  }

  EntryState state_of(const fs::path& d) const {
    auto info = cache->entry(d).inspect();
    EXPECT_TRUE(info.ok());
    return info.ok() ? info->state : EntryState::incomplete;
  }

  util::FakeClock clock{unit::at_unix(unit::kT0)};
  std::optional<Cache> cache;
};

TEST_F(MaintenanceTest, VerifyFindsATamperedNeffWithoutTouchingIt) {
  fs::path good = done_entry('a');
  fs::path bad = done_entry('b');
  fs::path pending = pending_entry('c');
  flip_first_byte(bad / kNeffFile);

  VerifyReport report = verify_cache(*cache, Repair::no);
  EXPECT_EQ(report.checked, 2U); // done entries only
  EXPECT_EQ(report.unverified, 0U);
  ASSERT_EQ(report.problems.size(), 1U);
  EXPECT_EQ(report.problems[0].entry.dir, bad);
  EXPECT_EQ(report.problems[0].what, "NEFF does not match its integrity record");
  EXPECT_FALSE(report.problems[0].repaired);
  EXPECT_TRUE(fs::exists(bad / kDoneFile));
  EXPECT_TRUE(fs::exists(bad / kNeffFile));
  EXPECT_EQ(state_of(good), EntryState::done);
  EXPECT_EQ(state_of(pending), EntryState::pending);
}

TEST_F(MaintenanceTest, VerifyWithRepairDemotesTheTamperedEntry) {
  fs::path good = done_entry('a');
  fs::path bad = done_entry('b');
  flip_first_byte(bad / kNeffFile);

  VerifyReport report = verify_cache(*cache, Repair::yes);
  EXPECT_EQ(report.checked, 2U);
  ASSERT_EQ(report.problems.size(), 1U);
  EXPECT_EQ(report.problems[0].entry.dir, bad);
  EXPECT_TRUE(report.problems[0].repaired);
  EXPECT_FALSE(fs::exists(bad / kDoneFile));
  EXPECT_FALSE(fs::exists(bad / kNeffFile));
  EXPECT_TRUE(fs::exists(bad / kGraphFile));
  EXPECT_EQ(state_of(bad), EntryState::pending);
  EXPECT_EQ(state_of(good), EntryState::done);
  EXPECT_EQ(test::read_text(good / kNeffFile), "neff of a");

  // A second pass finds nothing left to repair.
  VerifyReport again = verify_cache(*cache, Repair::yes);
  EXPECT_EQ(again.checked, 1U);
  EXPECT_TRUE(again.problems.empty());
}

TEST_F(MaintenanceTest, VerifyCountsEntriesWithoutRecordAndDoneWithoutNeff) {
  fs::path foreign = pending_entry('a');
  test::write_text(foreign / kNeffFile, "neff from another tool");
  test::write_text(foreign / kDoneFile, "");
  fs::path broken = pending_entry('b');
  test::write_text(broken / kDoneFile, "");

  VerifyReport report = verify_cache(*cache, Repair::no);
  EXPECT_EQ(report.checked, 2U);
  EXPECT_EQ(report.unverified, 1U);
  ASSERT_EQ(report.problems.size(), 1U);
  EXPECT_EQ(report.problems[0].entry.dir, broken);
  EXPECT_EQ(report.problems[0].what, "done marker without a NEFF");
}

TEST_F(MaintenanceTest, VerifyDoesNotRepairAnEntryBeingCompiled) {
  fs::path bad = done_entry('b');
  flip_first_byte(bad / kNeffFile);
  auto lock = cache->entry(bad).lock(1s);
  ASSERT_TRUE(lock.ok() && std::holds_alternative<npc::storage::Lock>(*lock)) << (lock.ok() ? "held elsewhere" : lock.error());
  VerifyReport report = verify_cache(*cache, Repair::yes);
  ASSERT_EQ(report.problems.size(), 1U);
  EXPECT_FALSE(report.problems[0].repaired);
  EXPECT_TRUE(fs::exists(bad / kDoneFile));
}

TEST_F(MaintenanceTest, ClearLocksRemovesOnlyLocksNobodyHolds) {
  fs::path left = pending_entry('a');
  fs::path held = pending_entry('b');
  // A lock file left by a holder that died.
  test::write_text(left / kLockFile, "pid=999999 host=elsewhere start=1 tool=neuron_cc_wrapper\n");
  auto lock = util::FileLock::try_acquire(held / kLockFile, util::LockHolder::self("test"));
  ASSERT_TRUE(lock.ok()) << lock.error();
  ASSERT_TRUE(lock->has_value());

  ClearLocksReport report = clear_locks(*cache, /*force=*/false);
  EXPECT_EQ(report.removed, std::vector<fs::path>{left / kLockFile});
  EXPECT_EQ(report.held, std::vector<fs::path>{held / kLockFile});
  EXPECT_FALSE(fs::exists(left / kLockFile));
  EXPECT_TRUE(fs::exists(held / kLockFile));
  EXPECT_EQ(util::probe_lock(held / kLockFile), util::LockState::held);
}

TEST_F(MaintenanceTest, ClearLocksWithForceRemovesHeldLocksToo) {
  fs::path left = pending_entry('a');
  fs::path held = pending_entry('b');
  test::write_text(left / kLockFile, "pid=999999 host=elsewhere start=1 tool=neuron_cc_wrapper\n");
  auto lock = util::FileLock::try_acquire(held / kLockFile, util::LockHolder::self("test"));
  ASSERT_TRUE(lock.ok()) << lock.error();
  ASSERT_TRUE(lock->has_value());

  ClearLocksReport report = clear_locks(*cache, /*force=*/true);
  std::vector<fs::path> removed = report.removed;
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<fs::path>{left / kLockFile, held / kLockFile}));
  EXPECT_TRUE(report.held.empty());
  EXPECT_FALSE(fs::exists(left / kLockFile));
  EXPECT_FALSE(fs::exists(held / kLockFile));
  // The holder's release does not remove a file that is no longer its own.
  test::write_text(held / kLockFile, "someone else\n");
  (*lock)->release();
  EXPECT_EQ(test::read_text(held / kLockFile), "someone else\n");
}

// A FIFO where the lock belongs (put there by hand or by another tool)
// cannot be read: its entry stays listed, counted as held, and verified;
// clear-locks removes it (it proves no live owner) without opening it, which
// would block.
TEST_F(MaintenanceTest, AnUnreadableLockKeepsItsEntryListedAndClearLocksRemovesIt) {
  fs::path d = done_entry('a');
  ASSERT_EQ(::mkfifo((d / kFrameworkLockFile).c_str(), 0600), 0);
  auto listed = cache->list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed.front().state, EntryState::done) << "done whoever holds its lock";
  EXPECT_EQ(listed.front().framework_lock.state, storage::LockState::held);
  auto verified = verify_cache(*cache, Repair::no);
  EXPECT_EQ(verified.checked, 1u);
  EXPECT_TRUE(verified.problems.empty());

  // No live owner is proved: removed, as every such lock is.
  ClearLocksReport cleared = clear_locks(*cache, /*force=*/false);
  EXPECT_EQ(cleared.removed, std::vector<fs::path>{d / kFrameworkLockFile});
  EXPECT_TRUE(cleared.held.empty());
  EXPECT_FALSE(fs::exists(fs::symlink_status(d / kFrameworkLockFile)));
  EXPECT_TRUE(fs::exists(d / kNeffFile));
  EXPECT_EQ(state_of(d), EntryState::done);
}

// An older release's eviction lock that is a FIFO: clear-locks does not wait
// on it; it is kept unless forced, as any eviction lock file it cannot judge.
TEST_F(MaintenanceTest, ClearLocksNeverWaitsOnAFifoEvictionLock) {
  fs::path eviction_lock = cache->private_dir() / kEvictionLock;
  ASSERT_EQ(::mkfifo(eviction_lock.c_str(), 0600), 0);
  ClearLocksReport kept = clear_locks(*cache, false);
  EXPECT_TRUE(kept.removed.empty());
  EXPECT_EQ(kept.held, std::vector<fs::path>{eviction_lock});
  ClearLocksReport forced = clear_locks(*cache, true);
  EXPECT_EQ(forced.removed, std::vector<fs::path>{eviction_lock});
  EXPECT_FALSE(fs::exists(fs::symlink_status(eviction_lock)));
}

TEST_F(MaintenanceTest, ClearLocksHandlesTheEvictionLock) {
  fs::path eviction_lock = cache->private_dir() / kEvictionLock;
  test::write_text(eviction_lock, "pid=999999 host=h start=1 tool=t\n");
  ClearLocksReport report = clear_locks(*cache, false);
  EXPECT_EQ(report.removed, std::vector<fs::path>{eviction_lock});
  EXPECT_FALSE(fs::exists(eviction_lock));

  auto lock = util::FileLock::try_acquire(eviction_lock, util::LockHolder::self("test"));
  ASSERT_TRUE(lock.ok() && lock->has_value());
  ClearLocksReport held = clear_locks(*cache, false);
  EXPECT_TRUE(held.removed.empty());
  EXPECT_EQ(held.held, std::vector<fs::path>{eviction_lock});
}

// A compile killed by SIGKILL leaves its work folder (gigabytes, for a real
// model) in the entry; clear-locks and verify --repair clear it when nobody
// holds the entry, and leave a fresh atomic-write temp (maybe alive) alone.
TEST_F(MaintenanceTest, ClearLocksRemovesWorkFoldersOfDeadCompiles) {
  fs::path dead = pending_entry('a');
  fs::path held = pending_entry('b');
  for (const fs::path& d : {dead, held}) {
    ASSERT_TRUE(util::ensure_dir(d / ".tmp-work-abc123" / "sub").ok());
    test::write_text(d / ".tmp-work-abc123" / "sub" / "artifact", "xxxx");
    test::write_text(d / ".tmp-neff-4242", "partial neff");
  }
  test::write_text(dead / ".tmp-model.done.1.fresh", "");
  ASSERT_TRUE(util::set_mtime(dead / ".tmp-model.done.1.fresh", clock.now()).ok());
  auto lock = cache->entry(held).try_lock();
  ASSERT_TRUE(lock.ok() && lock->has_value());

  ClearLocksReport report = clear_locks(*cache, /*force=*/false);
  std::vector<fs::path> removed;
  for (const auto& t : report.temps) {
    EXPECT_EQ(t.error, "");
    removed.push_back(t.path);
  }
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<fs::path>{dead / ".tmp-neff-4242", dead / ".tmp-work-abc123"}));
  EXPECT_FALSE(fs::exists(dead / ".tmp-work-abc123"));
  EXPECT_TRUE(fs::exists(dead / ".tmp-model.done.1.fresh"));
  EXPECT_TRUE(fs::exists(held / ".tmp-work-abc123" / "sub" / "artifact"));
  EXPECT_TRUE(fs::exists(held / ".tmp-neff-4242"));
  // Taking the entry's lock for this left no lock file behind.
  EXPECT_FALSE(fs::exists(dead / kLockFile));
  EXPECT_EQ(state_of(dead), EntryState::pending);
}

TEST_F(MaintenanceTest, VerifyReportsDeadTempsAndRepairRemovesThem) {
  fs::path d = done_entry('a');
  ASSERT_TRUE(util::ensure_dir(d / ".tmp-work-x").ok());
  // An atomic-write temp is dead only when old.
  test::write_text(d / ".tmp-npc-entry.json.1.old", "{");
  ASSERT_TRUE(util::set_mtime(d / ".tmp-npc-entry.json.1.old", clock.now() - kStaleTempAge - 1s).ok());

  VerifyReport look = verify_cache(*cache, Repair::no);
  EXPECT_TRUE(look.problems.empty());
  EXPECT_FALSE(look.leftovers_removed);
  std::vector<fs::path> found;
  for (const auto& t : look.leftover_temps) found.push_back(t.path);
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, (std::vector<fs::path>{d / ".tmp-npc-entry.json.1.old", d / ".tmp-work-x"}));
  EXPECT_TRUE(fs::exists(d / ".tmp-work-x"));

  VerifyReport repaired = verify_cache(*cache, Repair::yes);
  EXPECT_TRUE(repaired.leftovers_removed);
  EXPECT_EQ(repaired.leftover_temps.size(), 2U);
  EXPECT_FALSE(fs::exists(d / ".tmp-work-x"));
  EXPECT_FALSE(fs::exists(d / ".tmp-npc-entry.json.1.old"));
  EXPECT_EQ(state_of(d), EntryState::done);
  EXPECT_TRUE(verify_cache(*cache, Repair::no).leftover_temps.empty());
}

// A launcher's worker locking an entry that `neuron_cache rm` just removed
// must not bring its folder back (it would read as a graph-less entry, not
// as removed by another process).
TEST_F(MaintenanceTest, LockingAnEntryThatMustExistDoesNotBringItBack) {
  fs::path d = pending_entry('a');
  auto removed = cache->entry(d).remove();
  ASSERT_TRUE(removed.ok()) << removed.error();
  ASSERT_FALSE(fs::exists(d));

  auto taken = cache->entry(d).lock(0ms, {}, Entry::EntryDir::must_exist);
  ASSERT_TRUE(taken.ok()) << taken.error();
  EXPECT_TRUE(std::holds_alternative<EntryGone>(*taken)); // not an error: the compile starts over
  EXPECT_FALSE(fs::exists(d));

  // A folder that holds nothing of an entry (its files removed, the folder
  // not yet): locked, found empty, and gone again.
  fs::create_directories(d);
  auto empty = cache->entry(d).lock(0ms, {}, Entry::EntryDir::must_exist);
  ASSERT_TRUE(empty.ok()) << empty.error();
  EXPECT_TRUE(std::holds_alternative<EntryGone>(*empty));
  EXPECT_FALSE(fs::exists(d));

  auto made = cache->entry(d).lock(0ms);
  ASSERT_TRUE(made.ok()) << made.error();
  EXPECT_TRUE(std::holds_alternative<storage::Lock>(*made));
  EXPECT_TRUE(fs::is_directory(d));
}

TEST_F(MaintenanceTest, ClearFailedForgetsFailuresButNotRunningCompiles) {
  fs::path failed = failed_entry('a');
  fs::path compiling = failed_entry('b');
  fs::path done = done_entry('c');
  fs::path pending = pending_entry('d');
  auto lock = cache->entry(compiling).lock(1s);
  ASSERT_TRUE(lock.ok() && std::holds_alternative<npc::storage::Lock>(*lock)) << (lock.ok() ? "held elsewhere" : lock.error());

  std::vector<EntryInfo> cleared = clear_failed(*cache);
  ASSERT_EQ(cleared.size(), 1U);
  EXPECT_EQ(cleared[0].dir, failed);
  EXPECT_FALSE(fs::exists(failed / kLogFile));
  EXPECT_EQ(state_of(failed), EntryState::pending);
  EXPECT_TRUE(fs::exists(compiling / kLogFile));
  EXPECT_EQ(state_of(done), EntryState::done);
  EXPECT_EQ(state_of(pending), EntryState::pending);
  // No lock file is left behind in the cleared entry.
  EXPECT_FALSE(fs::exists(failed / kLockFile));

  std::ignore = std::get<npc::storage::Lock>(*lock).release();
  std::vector<EntryInfo> later = clear_failed(*cache);
  ASSERT_EQ(later.size(), 1U);
  EXPECT_EQ(later[0].dir, compiling);
  EXPECT_TRUE(clear_failed(*cache).empty());
}

} // namespace
} // namespace npc::cache
