// cache/eviction: least recently used first, TTL and lock protection, one
// evictor at a time, stale temp files, and the pure plan.

#include <cstdio>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/eviction.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/publish.hpp>
#include <npc/util/fs.hpp>

#include "test_support.hpp"
#include "unit_helpers.hpp"

namespace npc::cache {
namespace {

using namespace std::chrono_literals;
using std::chrono::hours;
using unit::at_unix;
using unit::kT0;

constexpr auto kDay = hours(24);

std::vector<std::string> keys_of(const std::vector<EntryInfo>& entries) {
  std::vector<std::string> keys;
  for (const auto& e : entries) keys.push_back(e.key.str());
  return keys;
}

class EvictionTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    cache.emplace(dir() / "root", clock);
    ASSERT_TRUE(cache->ensure_root().ok());
  }

  util::WallTime now() const { return clock.now(); }

  // A pending entry of `bytes` bytes (its graph) last used at `last_used`.
  fs::path make_entry(char graph_digit, std::size_t bytes, util::WallTime last_used,
                      const std::string& version = "1.0") {
    CacheKey key = unit::repeated_key(version, graph_digit, '0');
    fs::path d = cache->entry_dir(key);
    fs::create_directories(d);
    test::write_text(d / kGraphFile, std::string(bytes, 'g'));
    unit::set_time(d, last_used);
    return d;
  }

  std::string key_str(char graph_digit, const std::string& version = "1.0") const {
    return unit::repeated_key(version, graph_digit, '0').str();
  }

  util::FakeClock clock{at_unix(kT0)};
  std::optional<Cache> cache;
};

TEST_F(EvictionTest, DeletesLeastRecentlyUsedFirstAndStopsAtTheLimit) {
  fs::path a = make_entry('a', 100, now() - 10 * kDay);
  fs::path b = make_entry('b', 100, now() - 5 * kDay);
  fs::path c = make_entry('c', 100, now() - 20 * kDay);
  fs::path d = make_entry('d', 100, now() - 2 * kDay);
  fs::path e = make_entry('e', 100, now() - hours(1));

  EvictionReport report = evict(*cache, {250, std::chrono::seconds(kDay)});
  EXPECT_TRUE(report.ran);
  EXPECT_EQ(report.entries_before, 5U);
  EXPECT_EQ(report.bytes_before, 500U);
  EXPECT_EQ(keys_of(report.deleted), (std::vector<std::string>{key_str('c'), key_str('a'), key_str('b')}));
  EXPECT_EQ(report.bytes_after, 200U);
  EXPECT_EQ(report.kept_by_ttl, 0U);
  EXPECT_EQ(report.kept_locked, 0U);
  EXPECT_EQ(report.stale_temps_removed, 0U);
  EXPECT_FALSE(fs::exists(a));
  EXPECT_FALSE(fs::exists(b));
  EXPECT_FALSE(fs::exists(c));
  EXPECT_TRUE(fs::exists(d / kGraphFile));
  EXPECT_TRUE(fs::exists(e / kGraphFile));
  EXPECT_EQ(unit::names_in(cache->private_dir() / kTrashDir), std::vector<std::string>{});
  // The pass left its stamp (at the cache clock's time) and released its lock.
  EXPECT_EQ(unit::file_time(cache->private_dir() / kEvictionStamp), now());
  EXPECT_FALSE(fs::exists(cache->private_dir() / kEvictionLock));
}

TEST_F(EvictionTest, NothingDeletedWhenUnderTheLimit) {
  fs::path a = make_entry('a', 100, now() - 10 * kDay);
  fs::path b = make_entry('b', 100, now() - 10 * kDay);
  EvictionReport report = evict(*cache, {200, 0s});
  EXPECT_TRUE(report.ran);
  EXPECT_TRUE(report.deleted.empty());
  EXPECT_EQ(report.bytes_before, 200U);
  EXPECT_EQ(report.bytes_after, 200U);
  EXPECT_TRUE(fs::exists(a));
  EXPECT_TRUE(fs::exists(b));
}

TEST_F(EvictionTest, KeyBreaksTiesOfLastUse) {
  fs::path b = make_entry('b', 100, now() - 2 * kDay);
  fs::path a = make_entry('a', 100, now() - 2 * kDay);
  fs::path c = make_entry('c', 100, now() - 30 * hours(1));
  EvictionReport report = evict(*cache, {200, std::chrono::seconds(hours(1))});
  EXPECT_EQ(keys_of(report.deleted), std::vector<std::string>{key_str('a')});
  EXPECT_FALSE(fs::exists(a));
  EXPECT_TRUE(fs::exists(b));
  EXPECT_TRUE(fs::exists(c));
}

TEST_F(EvictionTest, OrderSpansCompilerVersions) {
  fs::path old_v2 = make_entry('a', 100, now() - 9 * kDay, "2.0");
  fs::path mid_v1 = make_entry('b', 100, now() - 5 * kDay, "1.0");
  fs::path new_v2 = make_entry('c', 100, now() - 3 * kDay, "2.0");
  EvictionReport report = evict(*cache, {100, 0s});
  EXPECT_EQ(keys_of(report.deleted), (std::vector<std::string>{key_str('a', "2.0"), key_str('b', "1.0")}));
  EXPECT_TRUE(fs::exists(new_v2));
  EXPECT_FALSE(fs::exists(old_v2));
  EXPECT_FALSE(fs::exists(mid_v1));
}

TEST_F(EvictionTest, EntriesUsedWithinTheTtlAreNeverDeleted) {
  fs::path old1 = make_entry('a', 100, now() - 3 * kDay);
  fs::path old2 = make_entry('b', 100, now() - 2 * kDay);
  fs::path new1 = make_entry('c', 100, now() - hours(1));
  fs::path new2 = make_entry('d', 100, now() - hours(23));
  EvictionReport report = evict(*cache, {0, std::chrono::seconds(kDay)});
  EXPECT_EQ(keys_of(report.deleted), (std::vector<std::string>{key_str('a'), key_str('b')}));
  EXPECT_EQ(report.kept_by_ttl, 2U);
  EXPECT_EQ(report.bytes_after, 200U); // still over the limit
  EXPECT_FALSE(fs::exists(old1));
  EXPECT_FALSE(fs::exists(old2));
  EXPECT_TRUE(fs::exists(new1));
  EXPECT_TRUE(fs::exists(new2));
}

// What a launcher queued (a graph and its flags, no result) survives the
// tightest prune, while older results around it go.
TEST_F(EvictionTest, PendingEntriesSurviveATinyLimitAndNoTtl) {
  fs::path pending = make_entry('a', 100, now() - 90 * kDay);
  test::write_text(pending / kFlagsFile, "[]");
  unit::set_time(pending, now() - 90 * kDay);
  fs::path killed = make_entry('b', 100, now() - 80 * kDay); // a killed attempt left it pending
  test::write_text(killed / kFlagsFile, "[]");
  test::write_text(killed / kKilledLogFile, "killed");
  unit::set_time(killed, now() - 80 * kDay);
  fs::path done = make_entry('c', 100, now() - 5 * kDay);
  test::write_text(done / kFlagsFile, "[]");
  test::write_text(done / kNeffFile, std::string(500, 'n'));
  test::write_text(done / kDoneFile, "");
  unit::set_time(done / kNeffFile, now() - 5 * kDay);
  unit::set_time(done, now() - 5 * kDay);
  ASSERT_EQ(cache->entry(pending).inspect()->state, EntryState::pending);
  ASSERT_EQ(cache->entry(killed).inspect()->state, EntryState::pending);
  ASSERT_EQ(cache->entry(done).inspect()->state, EntryState::done);

  EvictionReport report = evict(*cache, {1, 0s});
  EXPECT_TRUE(report.ran);
  // The premise: the pass did evict, the done entry.
  EXPECT_EQ(keys_of(report.deleted), std::vector<std::string>{key_str('c')});
  EXPECT_FALSE(fs::exists(done));
  EXPECT_EQ(report.kept_pending, 2U);
  EXPECT_TRUE(fs::exists(pending / kGraphFile));
  EXPECT_TRUE(fs::exists(pending / kFlagsFile));
  EXPECT_TRUE(fs::exists(killed / kGraphFile));
  EXPECT_TRUE(fs::exists(killed / kKilledLogFile));
}

TEST_F(EvictionTest, LockedEntryIsKeptAndTheNextOneDeletedInstead) {
  fs::path x = make_entry('a', 1000, now() - 3 * kDay);
  fs::path y = make_entry('b', 1000, now() - 2 * kDay);
  fs::path z = make_entry('c', 1000, now() - 1 * kDay);
  auto lock = cache->entry(x).lock(1s);
  ASSERT_TRUE(lock.ok() && std::holds_alternative<npc::storage::Lock>(*lock)) << (lock.ok() ? "held elsewhere" : lock.error());
  unit::set_time(x, now() - 3 * kDay); // taking the lock created a file in it
  // 3000 bytes plus the two lock records (ours and the framework's, a few
  // hundred bytes); one 1000-byte entry must go.
  EvictionReport report = evict(*cache, {2600, std::chrono::seconds(hours(1))});
  EXPECT_EQ(report.kept_locked, 1U);
  EXPECT_EQ(keys_of(report.deleted), std::vector<std::string>{key_str('b')});
  EXPECT_EQ(report.bytes_after, report.bytes_before - 1000);
  EXPECT_TRUE(fs::exists(x / kGraphFile));
  EXPECT_FALSE(fs::exists(y));
  EXPECT_TRUE(fs::exists(z / kGraphFile));
}

TEST_F(EvictionTest, DryRunDeletesNothingButReportsTheSameList) {
  fs::path a = make_entry('a', 100, now() - 10 * kDay);
  fs::path b = make_entry('b', 100, now() - 5 * kDay);
  fs::path c = make_entry('c', 100, now() - 20 * kDay);
  fs::path d = make_entry('d', 100, now() - 2 * kDay);
  fs::path e = make_entry('e', 100, now() - hours(1));
  test::write_text(d / ".tmp-model.neff.1.stale", "t");
  unit::set_time(d / ".tmp-model.neff.1.stale", now() - hours(2));
  unit::set_time(d, now() - 2 * kDay);

  EvictionReport report = evict(*cache, {250, std::chrono::seconds(kDay)}, DryRun::yes);
  EXPECT_TRUE(report.ran);
  EXPECT_EQ(keys_of(report.deleted), (std::vector<std::string>{key_str('c'), key_str('a'), key_str('b')}));
  EXPECT_EQ(report.bytes_before, 501U);
  EXPECT_EQ(report.bytes_after, 201U);
  EXPECT_EQ(report.stale_temps_removed, 0U);
  for (const auto& p : {a, b, c, d, e}) EXPECT_TRUE(fs::exists(p / kGraphFile)) << p;
  EXPECT_TRUE(fs::exists(d / ".tmp-model.neff.1.stale"));

  // The real pass then deletes exactly what the dry run listed.
  EvictionReport real = evict(*cache, {250, std::chrono::seconds(kDay)});
  EXPECT_EQ(keys_of(real.deleted), keys_of(report.deleted));
}

TEST_F(EvictionTest, StaleTempFilesOfUnlockedEntriesAreRemoved) {
  fs::path p = make_entry('a', 10, now() - hours(1));
  fs::path q = make_entry('b', 10, now() - hours(1));
  auto lock = cache->entry(q).lock(1s);
  ASSERT_TRUE(lock.ok() && std::holds_alternative<npc::storage::Lock>(*lock)) << (lock.ok() ? "held elsewhere" : lock.error());
  const std::string old_name = ".tmp-model.neff.1.old", young_name = ".tmp-model.neff.2.young";
  test::write_text(p / old_name, "old");
  test::write_text(p / young_name, "young");
  test::write_text(q / old_name, "old, but its entry is locked");
  unit::set_time(p / old_name, now() - kStaleTempAge - 1min);
  unit::set_time(p / young_name, now() - kStaleTempAge + 1min);
  unit::set_time(q / old_name, now() - hours(5));

  EvictionReport report = evict(*cache, {1'000'000'000, std::chrono::seconds(kDay)});
  EXPECT_TRUE(report.deleted.empty());
  EXPECT_EQ(report.stale_temps_removed, 1U);
  EXPECT_FALSE(fs::exists(p / old_name));
  EXPECT_TRUE(fs::exists(p / young_name));
  EXPECT_TRUE(fs::exists(q / old_name));
  EXPECT_TRUE(fs::exists(p / kGraphFile));
}

TEST_F(EvictionTest, SecondEvictorSkipsWhileOneHoldsTheLock) {
  fs::path a = make_entry('a', 100, now() - 10 * kDay);
  auto held = util::FileLock::try_acquire(cache->private_dir() / kEvictionLock, util::LockHolder::self("other"));
  ASSERT_TRUE(held.ok()) << held.error();
  ASSERT_TRUE(held->has_value());
  EvictionReport report = evict(*cache, {0, 0s});
  EXPECT_FALSE(report.ran);
  EXPECT_TRUE(report.deleted.empty());
  EXPECT_EQ(report.entries_before, 0U);
  EXPECT_TRUE(fs::exists(a / kGraphFile));
  EXPECT_FALSE(fs::exists(cache->private_dir() / kEvictionStamp));
  (*held)->release();
  EvictionReport after = evict(*cache, {0, 0s});
  EXPECT_TRUE(after.ran);
  EXPECT_EQ(keys_of(after.deleted), std::vector<std::string>{key_str('a')});
}

TEST_F(EvictionTest, EvictionEmptiesLeftoverTrash) {
  fs::create_directories(cache->private_dir() / kTrashDir / "MODULE_aa+00.1.2");
  test::write_text(cache->private_dir() / kTrashDir / "MODULE_aa+00.1.2" / "model.neff", "x");
  EvictionReport report = evict(*cache, {1000, 0s});
  EXPECT_TRUE(report.ran);
  EXPECT_EQ(unit::names_in(cache->private_dir() / kTrashDir), std::vector<std::string>{});
}

TEST_F(EvictionTest, EvictAfterWriteRunsAtMostOncePerInterval) {
  const EvictionPolicy policy{0, std::chrono::seconds(hours(1))};
  fs::path a = make_entry('a', 100, now() - 2 * kDay);
  // No stamp yet: a pass runs.
  evict_after_write(*cache, policy);
  EXPECT_FALSE(fs::exists(a));
  ASSERT_TRUE(fs::exists(cache->private_dir() / kEvictionStamp));
  EXPECT_EQ(unit::file_time(cache->private_dir() / kEvictionStamp), at_unix(kT0));

  fs::path b = make_entry('b', 100, now() - 2 * kDay);
  clock.advance(kEvictionInterval - 1s);
  evict_after_write(*cache, policy);
  EXPECT_TRUE(fs::exists(b / kGraphFile)); // too soon after the last pass
  EXPECT_EQ(unit::file_time(cache->private_dir() / kEvictionStamp), at_unix(kT0));

  clock.advance(1s);
  evict_after_write(*cache, policy);
  EXPECT_FALSE(fs::exists(b));
  EXPECT_EQ(unit::file_time(cache->private_dir() / kEvictionStamp),
            at_unix(kT0) + kEvictionInterval);
}

// plan_eviction alone, on made-up entries.
class PlanEvictionTest : public ::testing::Test {
protected:
  EntryInfo info(char graph_digit, std::uint64_t bytes, util::WallTime last_used,
                 EntryState state = EntryState::done) {
    EntryInfo e;
    e.key = unit::repeated_key("1.0", graph_digit, '0');
    e.dir = fs::path("/cache") / e.key.relative_path();
    e.bytes = bytes;
    e.last_used = last_used;
    e.state = state;
    return e;
  }
  util::WallTime now = at_unix(kT0);
};

TEST_F(PlanEvictionTest, OrderAndStop) {
  std::vector<EntryInfo> entries = {info('a', 100, now - 10 * kDay), info('b', 100, now - 5 * kDay),
                                    info('c', 100, now - 20 * kDay), info('d', 100, now - 2 * kDay),
                                    info('e', 100, now - 1 * kDay)};
  std::size_t ttl_kept = 99, locked_kept = 99;
  auto plan = plan_eviction(entries, {250, std::chrono::seconds(hours(1))}, now, &ttl_kept, &locked_kept);
  ASSERT_EQ(plan.size(), 3U);
  EXPECT_EQ(plan[0], &entries[2]);
  EXPECT_EQ(plan[1], &entries[0]);
  EXPECT_EQ(plan[2], &entries[1]);
  EXPECT_EQ(ttl_kept, 0U);
  EXPECT_EQ(locked_kept, 0U);
}

TEST_F(PlanEvictionTest, StopsAsSoonAsTheTotalFits) {
  std::vector<EntryInfo> entries = {info('a', 500, now - 3 * kDay), info('b', 10, now - 2 * kDay),
                                    info('c', 10, now - 1 * kDay)};
  // Deleting the oldest (500 bytes) is enough; nothing else goes.
  auto plan = plan_eviction(entries, {100, 0s}, now);
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0], &entries[0]);
  // Exactly at the limit is within it.
  EXPECT_TRUE(plan_eviction(entries, {520, 0s}, now).empty());
  ASSERT_EQ(plan_eviction(entries, {519, 0s}, now).size(), 1U);
}

TEST_F(PlanEvictionTest, LockedEntriesAreSkipped) {
  std::vector<EntryInfo> entries = {info('a', 100, now - 3 * kDay, EntryState::locked),
                                    info('b', 100, now - 2 * kDay, EntryState::pending),
                                    info('c', 100, now - 1 * kDay, EntryState::failed)};
  std::size_t ttl_kept = 99, locked_kept = 99, pending_kept = 99;
  auto plan = plan_eviction(entries, {200, 0s}, now, &ttl_kept, &locked_kept, &pending_kept);
  // The locked and the pending entry are older, but only the failed one goes.
  ASSERT_EQ(plan.size(), 1U);
  EXPECT_EQ(plan[0], &entries[2]);
  EXPECT_EQ(locked_kept, 1U);
  EXPECT_EQ(pending_kept, 1U);
  EXPECT_EQ(ttl_kept, 0U);
}

TEST_F(PlanEvictionTest, PendingEntriesAreNeverPlannedEvenWhenTheCacheStaysOverTheLimit) {
  std::vector<EntryInfo> entries = {info('a', 100, now - 90 * kDay, EntryState::pending),
                                    info('b', 100, now - 60 * kDay, EntryState::pending),
                                    info('c', 100, now - 1 * kDay, EntryState::done),
                                    info('d', 100, now - 2 * kDay, EntryState::incomplete)};
  std::size_t pending_kept = 99;
  auto plan = plan_eviction(entries, {0, 0s}, now, nullptr, nullptr, &pending_kept);
  // Everything else goes, oldest first; the pending graphs stay.
  ASSERT_EQ(plan.size(), 2U);
  EXPECT_EQ(plan[0], &entries[3]);
  EXPECT_EQ(plan[1], &entries[2]);
  EXPECT_EQ(pending_kept, 2U);
}

TEST_F(PlanEvictionTest, TtlProtectsRecentEntries) {
  std::vector<EntryInfo> entries = {info('a', 100, now - 3 * kDay), info('b', 100, now - hours(2)),
                                    info('c', 100, now - hours(1)), info('d', 100, now - 2 * kDay)};
  std::size_t ttl_kept = 99, locked_kept = 99;
  auto plan = plan_eviction(entries, {0, std::chrono::seconds(kDay)}, now, &ttl_kept, &locked_kept);
  ASSERT_EQ(plan.size(), 2U);
  EXPECT_EQ(plan[0], &entries[0]);
  EXPECT_EQ(plan[1], &entries[3]);
  EXPECT_EQ(ttl_kept, 2U);
  EXPECT_EQ(locked_kept, 0U);
}

TEST_F(PlanEvictionTest, EmptyCacheAndNothingOverTheLimit) {
  std::vector<EntryInfo> none;
  EXPECT_TRUE(plan_eviction(none, {0, 0s}, now).empty());
  std::vector<EntryInfo> entries = {info('a', 100, now - 30 * kDay)};
  std::size_t ttl_kept = 99, locked_kept = 99;
  EXPECT_TRUE(plan_eviction(entries, {100, 0s}, now, &ttl_kept, &locked_kept).empty());
  EXPECT_EQ(ttl_kept, 0U);
  EXPECT_EQ(locked_kept, 0U);
}

// Regression (fixed): plan_eviction (and evict) compare `now - last_used` (nanoseconds) with
// policy.ttl (seconds); the comparison converts the TTL to nanoseconds, which
// overflows int64 for a TTL above ~292 years (e.g. --cache_ttl=1000000, a
// common way to say "never"). The TTL wraps negative and recently used
// entries are deleted.
TEST_F(PlanEvictionTest, VeryLongTtlStillProtectsRecentEntries) {
  std::vector<EntryInfo> entries = {info('a', 100, now - hours(1))};
  std::size_t ttl_kept = 0;
  const auto million_days = std::chrono::seconds(86400LL * 1'000'000);
  auto plan = plan_eviction(entries, {0, million_days}, now, &ttl_kept);
  EXPECT_TRUE(plan.empty());
  EXPECT_EQ(ttl_kept, 1U);
}

// A cache big enough to be listed and evicted on several threads: every
// entry is listed once with its size, and exactly the least recently used
// ones go, in order, whatever thread removed them.
TEST_F(EvictionTest, LargeCacheIsListedAndEvictedExactlyOnThreads) {
  constexpr std::size_t kEntries = 2100; // two listing ranges of 2048 or more
  std::vector<fs::path> dirs;
  for (std::size_t i = 0; i < kEntries; ++i) {
    char hex[24];
    std::snprintf(hex, sizeof hex, "%020zx", i);
    CacheKey key{"1.0", hex, std::string(kFlagsHashDigits, '0')};
    fs::path d = cache->entry_dir(key);
    fs::create_directories(d);
    test::write_text(d / kGraphFile, std::string(10, 'g'));
    unit::set_time(d, now() - kDay - std::chrono::seconds(kEntries - i)); // entry 0 is the oldest
    dirs.push_back(d);
  }
  auto listed = cache->list();
  ASSERT_EQ(listed.size(), kEntries);
  std::set<std::string> keys;
  for (const auto& e : listed) {
    keys.insert(e.key.str());
    EXPECT_EQ(e.bytes, 10U);
  }
  EXPECT_EQ(keys.size(), kEntries);

  // Keep the newest 1000: 1100 victims, several deletion ranges of 256.
  EvictionReport report = evict(*cache, {1000 * 10, std::chrono::seconds(hours(1))});
  ASSERT_EQ(report.deleted.size(), kEntries - 1000);
  for (std::size_t i = 0; i < report.deleted.size(); ++i)
    ASSERT_EQ(report.deleted[i].dir, dirs[i]) << "deletion order, position " << i;
  EXPECT_EQ(report.bytes_after, 1000U * 10);
  for (std::size_t i = 0; i < kEntries; ++i) ASSERT_EQ(fs::exists(dirs[i]), i >= kEntries - 1000) << dirs[i];
  EXPECT_EQ(unit::names_in(cache->private_dir() / kTrashDir), std::vector<std::string>{});
  EXPECT_EQ(cache->list().size(), 1000U);
}

} // namespace
} // namespace npc::cache

namespace npc::cache {
namespace {

// The framework loads a NEFF without telling us: only the file's atime moves.
class EvictionBesideTheFramework : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    cache.emplace(dir() / "root");
    ASSERT_TRUE(cache->ensure_root().ok());
  }
  // A done entry whose every time stamp is `days_ago` days old.
  fs::path make_done_entry(char graph_digit, int days_ago) {
    fs::path d = cache->entry_dir(unit::repeated_key("1.0", graph_digit, '0'));
    fs::create_directories(d);
    test::write_text(d / kGraphFile, "graph");
    test::write_text(d / kNeffFile, std::string(1000, 'n'));
    test::write_text(d / kDoneFile, "");
    struct timespec old[2] = {{::time(nullptr) - days_ago * 86400, 0}, {::time(nullptr) - days_ago * 86400, 0}};
    for (const char* name : {"model.hlo_module.pb", "model.neff", "model.done", ""})
      EXPECT_EQ(::utimensat(AT_FDCWD, (d / name).c_str(), old, 0), 0) << name;
    return d;
  }
  std::optional<Cache> cache;
};

TEST_F(EvictionBesideTheFramework, AnEntryWhoseNeffTheFrameworkReadIsNotEvicted) {
  fs::path read = make_done_entry('a', 60);
  fs::path unread = make_done_entry('b', 59);
  // What the framework does at a cache hit: open and read model.neff.
  std::string bytes = test::read_text(read / kNeffFile);
  ASSERT_EQ(bytes.size(), 1000u);
  EvictionReport report = evict(*cache, {0, std::chrono::seconds(kDay * 30)});
  EXPECT_EQ(keys_of(report.deleted), std::vector<std::string>{unit::repeated_key("1.0", 'b', '0').str()});
  EXPECT_TRUE(fs::exists(read / kNeffFile)) << "evicted although the framework used it just now";
  EXPECT_FALSE(fs::exists(unread));
}

TEST_F(EvictionBesideTheFramework, AnEntryWithAnyFrameworkLockIsNeverEvicted) {
  fs::path fresh = make_done_entry('a', 60);
  fs::path stale = make_done_entry('b', 60);
  fs::path free = make_done_entry('c', 60);
  test::write_text(fresh / kFrameworkLockFile, "");
  test::write_text(stale / kFrameworkLockFile, "garbage");
  struct timespec old[2] = {{::time(nullptr) - 30 * 86400, 0}, {::time(nullptr) - 30 * 86400, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (stale / kFrameworkLockFile).c_str(), old, 0), 0);
  for (const auto& d : {fresh, stale})
    ASSERT_EQ(::utimensat(AT_FDCWD, d.c_str(), old, 0), 0);
  EvictionReport report = evict(*cache, {0, std::chrono::seconds(kDay)});
  EXPECT_EQ(keys_of(report.deleted), std::vector<std::string>{unit::repeated_key("1.0", 'c', '0').str()});
  EXPECT_EQ(report.kept_locked, 2u);
  EXPECT_TRUE(fs::exists(fresh / kFrameworkLockFile));
  EXPECT_TRUE(fs::exists(stale / kFrameworkLockFile));
  EXPECT_FALSE(fs::exists(free));
}

} // namespace
} // namespace npc::cache
