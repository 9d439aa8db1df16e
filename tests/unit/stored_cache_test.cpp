// A cache in a storage that is no directory (store.hpp), and the
// maintenance of maintenance.hpp and eviction.hpp on it: neuron_cache's
// commands on an S3 cache's objects. The storage is a directory store here
// (the Storage contract is S3's; tests/e2e/s3_maintenance_test.cpp runs the
// commands over a real S3 server), so file times can be set and every file
// looked at.

#include <npc/cache/eviction.hpp>
#include <npc/cache/explain_target.hpp>
#include <npc/cache/maintenance.hpp>
#include <npc/cache/store.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/publish.hpp>
#include <npc/storage/lock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/fs.hpp>

#include "files.hpp"
#include "forwarding_storage.hpp"
#include "two_tiers.hpp"

namespace npc::cache {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string> kMaintenanceFlags = {"-O2"};

class StoredCacheTest : public test::TwoTiersTest {
protected:
  void SetUp() override {
    TwoTiersTest::SetUp();
    if (HasFatalFailure()) return;
    // Two connections: verify and prune share entries out over them.
    cache.emplace(std::vector<std::shared_ptr<storage::Storage>>{remote_storage(), remote_storage()});
  }
  CacheKey pending(const std::string& graph, const std::string& version = "1.0") {
    auto key = make_key_for_graph(graph, kMaintenanceFlags, version);
    EXPECT_TRUE(origin->entry(key).store_graph(graph, kMaintenanceFlags).ok());
    return key;
  }
  CacheKey done(const std::string& graph, const std::string& neff = "neff-bytes") {
    auto key = pending(graph);
    publish_result(origin->entry(key), true, neff);
    return key;
  }
  CacheKey failed(const std::string& graph) {
    auto key = pending(graph);
    publish_result(origin->entry(key), false, "error: no\n");
    return key;
  }
  // Every file of the entry dated `days_ago`.
  void age(const CacheKey& key, int days_ago) {
    auto when = std::chrono::system_clock::now() - std::chrono::days(days_ago);
    for (const auto& name : test::names_in(origin->entry_dir(key)))
      ASSERT_TRUE(util::set_mtime(origin->entry_dir(key) / name, when).ok());
  }
  // A lock record in the entry's folder, of another host, expiring in `ttl`.
  void lock_from_elsewhere(const CacheKey& key, std::chrono::seconds ttl) {
    storage::LockRecord record{"pid 1 on another-host (neuron_cc_wrapper)", "token",
                            std::chrono::duration_cast<std::chrono::seconds>(
                                (std::chrono::system_clock::now() + ttl).time_since_epoch())
                                .count()};
    test::write_text(origin->entry_dir(key) / kFrameworkLockFile, record.serialize());
  }
  const EntryInfo* find(const std::vector<EntryInfo>& entries, const CacheKey& key) {
    for (const auto& e : entries)
      if (e.key == key) return &e;
    return nullptr;
  }
  bool has(const CacheKey& key, std::string_view file) const {
    return fs::exists(origin->entry_dir(key) / file);
  }

  std::optional<Cache> cache;
};

TEST_F(StoredCacheTest, TheListingHasEveryEntryInItsState) {
  auto d = done("HloModule d\n");
  auto f = failed("HloModule f\n");
  auto p = pending("HloModule p\n");
  auto held = pending("HloModule held\n");
  lock_from_elsewhere(held, 600s);
  auto expired = pending("HloModule expired\n");
  lock_from_elsewhere(expired, -60s);
  auto other = pending("HloModule other version\n", "2.0");
  // Graph without flags: a writer that died.
  auto incomplete = pending("HloModule incomplete\n");
  fs::remove(origin->entry_dir(incomplete) / kFlagsFile);

  auto all = cache->list();
  ASSERT_EQ(all.size(), 7u);
  EXPECT_TRUE(std::is_sorted(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.key < b.key; }));
  EXPECT_EQ(find(all, d)->state, EntryState::done);
  EXPECT_EQ(find(all, f)->state, EntryState::failed);
  EXPECT_EQ(find(all, p)->state, EntryState::pending);
  EXPECT_EQ(find(all, held)->state, EntryState::locked);
  EXPECT_EQ(find(all, expired)->state, EntryState::pending);
  EXPECT_EQ(find(all, expired)->framework_lock.state, storage::LockState::stale_expired);
  EXPECT_EQ(find(all, other)->state, EntryState::pending);
  EXPECT_EQ(find(all, incomplete)->state, EntryState::incomplete);
  EXPECT_EQ(find(all, d)->dir, d.relative_path());
  EXPECT_EQ(cache->describe(*find(all, d)), (dir() / "remote" / d.relative_path()).string());
  // The bytes are every object of the entry.
  std::uint64_t bytes = 0;
  for (const auto& name : test::names_in(origin->entry_dir(d))) bytes += fs::file_size(origin->entry_dir(d) / name);
  EXPECT_EQ(find(all, d)->bytes, bytes);

  auto v2 = cache->list_version("2.0");
  ASSERT_EQ(v2.size(), 1u);
  EXPECT_EQ(v2[0].key, other);
  EXPECT_EQ(cache->list_version("1.0").size(), 6u);
  EXPECT_TRUE(cache->list_version("3.0").empty());
}

TEST_F(StoredCacheTest, TheLastUseIsTheNewestObjectOfTheEntry) {
  auto old = done("HloModule old\n");
  age(old, 40);
  auto recent = done("HloModule recent\n");
  age(recent, 2);
  auto all = cache->list();
  auto days = [&](const CacheKey& key) {
    return std::chrono::duration_cast<std::chrono::hours>(std::chrono::system_clock::now() - find(all, key)->last_used)
               .count() /
           24;
  };
  EXPECT_EQ(days(old), 40);
  EXPECT_EQ(days(recent), 2);
}

TEST_F(StoredCacheTest, ClearLocksRemovesWhatIsNotInForceAndForceRemovesAll) {
  auto held = pending("HloModule held\n");
  lock_from_elsewhere(held, 600s);
  auto expired = pending("HloModule expired\n");
  lock_from_elsewhere(expired, -60s);
  auto report = clear_locks(*cache, false);
  const std::string lock_name = std::string(kFrameworkLockFile);
  ASSERT_EQ(report.removed.size(), 1u);
  EXPECT_EQ(report.removed[0], origin->entry_dir(expired) / lock_name);
  ASSERT_EQ(report.held.size(), 1u);
  EXPECT_EQ(report.held[0], origin->entry_dir(held) / lock_name);
  EXPECT_FALSE(has(expired, kFrameworkLockFile));
  EXPECT_TRUE(has(held, kFrameworkLockFile));
  EXPECT_TRUE(has(expired, kGraphFile));

  auto forced = clear_locks(*cache, true);
  ASSERT_EQ(forced.removed.size(), 1u);
  EXPECT_TRUE(forced.held.empty());
  EXPECT_FALSE(has(held, kFrameworkLockFile));
}

TEST_F(StoredCacheTest, ClearFailedRemovesOnlyTheLogOfFailedEntries) {
  auto f = failed("HloModule f\n");
  auto d = done("HloModule d\n");
  auto cleared = clear_failed(*cache);
  ASSERT_EQ(cleared.size(), 1u);
  EXPECT_EQ(cleared[0].key, f);
  EXPECT_FALSE(has(f, kLogFile));
  EXPECT_TRUE(has(f, kGraphFile));
  EXPECT_TRUE(has(d, kNeffFile));
  EXPECT_EQ(cache->list_version("1.0").size(), 2u);
  EXPECT_TRUE(clear_failed(*cache).empty());
}

TEST_F(StoredCacheTest, RemoveKeepsALockedEntryAndRemovesTheRest) {
  auto d = done("HloModule d\n");
  auto held = pending("HloModule held\n");
  lock_from_elsewhere(held, -60s); // even a stale lock keeps it
  auto all = cache->list();
  EXPECT_TRUE(remove_unless_locked(*cache, *find(all, d)));
  EXPECT_FALSE(fs::exists(origin->entry_dir(d)));
  EXPECT_FALSE(remove_unless_locked(*cache, *find(all, held)));
  EXPECT_TRUE(has(held, kGraphFile));
}

TEST_F(StoredCacheTest, FindNamesAnEntryByItsKeyOrEveryVersionByItsModule) {
  auto one = done("HloModule same\n");
  auto two = make_key_for_graph("HloModule same\n", kMaintenanceFlags, "2.0");
  ASSERT_TRUE(origin->entry(two).store_graph("HloModule same\n", kMaintenanceFlags).ok());
  auto by_key = find_entries(*cache, one.str());
  ASSERT_EQ(by_key.size(), 1u);
  EXPECT_EQ(by_key[0].key, one);
  EXPECT_EQ(by_key[0].state, EntryState::done);
  EXPECT_EQ(by_key[0].dir, one.relative_path());
  auto by_module = find_entries(*cache, one.module_name());
  ASSERT_EQ(by_module.size(), 2u);
  EXPECT_EQ(by_module[0].key, one);
  EXPECT_EQ(by_module[1].key, two);
  EXPECT_TRUE(find_entries(*cache, "neuronxcc-9.9/" + one.module_name()).empty());
  EXPECT_THROW(std::ignore = find_entries(*cache, "not-a-key"), UsageError);
  // What rm does with what find gave: the entry goes, the other version stays.
  EXPECT_TRUE(remove_unless_locked(*cache, by_key[0]));
  EXPECT_FALSE(fs::exists(origin->entry_dir(one)));
  EXPECT_TRUE(fs::exists(origin->entry_dir(two)));
}

TEST_F(StoredCacheTest, ExplainDownloadsTheTargetAndOnlyTheEntriesOfItsGraphSize) {
  auto same = done("HloModule same\n");
  auto other_flags = make_key_for_graph("HloModule same\n", {"-O1"}, "1.0");
  ASSERT_TRUE(origin->entry(other_flags).store_graph("HloModule same\n", {"-O1"}).ok());
  auto bigger = done("HloModule a graph of another size\n");
  const fs::path scratch = dir() / "scratch";
  auto target = find_target_graph(*cache, same.module_name(), scratch);
  ASSERT_TRUE(target);
  EXPECT_EQ(target->name, (dir() / "remote" / same.relative_path() / kGraphFile).string());
  EXPECT_EQ(test::read_text(target->file), "HloModule same\n");
  EXPECT_TRUE(target->file.string().starts_with(scratch.string()));

  auto x = explain_in_cache(*cache, target->file, {"1.0", kMaintenanceFlags}, scratch);
  ASSERT_TRUE(x.ok()) << x.error();
  ASSERT_EQ(x->matches.size(), 2u);
  EXPECT_EQ(x->verdict, Verdict::hit);
  for (const auto& m : x->matches)
    EXPECT_EQ(m.entry.dir, dir() / "remote" / m.entry.key.relative_path()) << m.entry.key.str();
  EXPECT_FALSE(fs::exists(scratch / "entries" / bigger.relative_path())); // another size: never downloaded
}

// A storage whose lock objects cannot be created (a bucket policy that
// denies them, say): every other call goes through.
class LockRefusingStorage final : public test::ForwardingStorage {
public:
  using ForwardingStorage::ForwardingStorage;
  Result<bool> write(std::string_view key, const storage::Body& body, storage::IfPresent if_present) override {
    if (key.ends_with(".lock")) return fail("PUT " + std::string(key) + ": 403 AccessDenied");
    return ForwardingStorage::write(key, body, if_present);
  }
};

TEST_F(StoredCacheTest, ARepairThatCannotTakeTheLockFailsAndChangesNothing) {
  auto bad = done("HloModule bad\n", "neff-bytes");
  test::write_text(origin->entry_dir(bad) / kNeffFile, "tampered!!");
  const Cache refusing(std::vector<std::shared_ptr<storage::Storage>>{
      std::make_shared<LockRefusingStorage>(remote_storage())});
  // Looking needs no lock: the problem is found.
  auto report = verify_cache(refusing, Repair::no);
  ASSERT_EQ(report.problems.size(), 1u);
  // Repairing does: an error naming the refusal, not an entry "left bad".
  try {
    std::ignore = verify_cache(refusing, Repair::yes);
    ADD_FAILURE() << "a repair without its lock did not fail";
  } catch (const EnvironmentError& e) {
    EXPECT_NE(std::string(e.what()).find("403 AccessDenied"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(has(bad, kDoneFile));
  EXPECT_EQ(test::read_text(origin->entry_dir(bad) / kNeffFile), "tampered!!");
}

TEST_F(StoredCacheTest, VerifyFindsACorruptNeffAndRepairDemotesIt) {
  auto good = done("HloModule good\n");
  auto bad = done("HloModule bad\n", "neff-bytes");
  test::write_text(origin->entry_dir(bad) / kNeffFile, "tampered!!");
  auto foreign = done("HloModule foreign\n");
  fs::remove(origin->entry_dir(foreign) / kMetaFile); // another tool's entry: no record

  auto report = verify_cache(*cache, Repair::no);
  EXPECT_EQ(report.checked, 3u);
  EXPECT_EQ(report.unverified, 1u);
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0].entry.key, bad);
  EXPECT_EQ(report.problems[0].what, "NEFF does not match its integrity record");
  EXPECT_FALSE(report.problems[0].repaired);
  EXPECT_TRUE(has(bad, kDoneFile));

  auto repaired = verify_cache(*cache, Repair::yes);
  ASSERT_EQ(repaired.problems.size(), 1u);
  EXPECT_TRUE(repaired.problems[0].repaired);
  EXPECT_FALSE(has(bad, kDoneFile));
  EXPECT_FALSE(has(bad, kNeffFile));
  EXPECT_FALSE(has(bad, kFrameworkLockFile)); // the repair's lock is released
  auto record = read_entry_meta(origin->entry_dir(bad));
  ASSERT_TRUE(record.ok());
  EXPECT_FALSE(record->neff_sha256);
  EXPECT_EQ(record->attempts.size(), 1u);
  EXPECT_TRUE(has(good, kDoneFile));
  auto all = cache->list();
  EXPECT_EQ(find(all, bad)->state, EntryState::pending);
  EXPECT_TRUE(verify_cache(*cache, Repair::no).problems.empty());
}

TEST_F(StoredCacheTest, ClearResultLeavesTheGraphPending) {
  auto d = done("HloModule d\n");
  auto f = failed("HloModule f\n");
  auto all = cache->list();
  EXPECT_TRUE(forget_result(*cache, *find(all, d)));
  EXPECT_TRUE(forget_result(*cache, *find(all, f)));
  for (const auto& e : cache->list()) EXPECT_EQ(e.state, EntryState::pending) << e.key.str();
  auto held = done("HloModule held\n");
  lock_from_elsewhere(held, 600s);
  auto again = cache->list();
  EXPECT_FALSE(forget_result(*cache, *find(again, held)));
  EXPECT_TRUE(has(held, kDoneFile));
}

TEST_F(StoredCacheTest, EvictionTakesTheOldestFirstAndKeepsPendingAndRecent) {
  auto oldest = done("HloModule oldest\n");
  age(oldest, 90);
  auto older = done("HloModule older\n");
  age(older, 60);
  auto recent = done("HloModule recent\n");
  age(recent, 1);
  auto graph_only = pending("HloModule pending\n");
  age(graph_only, 120);
  std::uint64_t total = 0;
  auto all = cache->list();
  for (const auto& e : all) total += e.bytes;

  // Room for all but the oldest: it alone goes.
  EvictionPolicy policy{total - find(all, oldest)->bytes, std::chrono::days(30)};
  auto dry = evict(*cache, policy, DryRun::yes);
  ASSERT_TRUE(dry.ran);
  ASSERT_EQ(dry.deleted.size(), 1u);
  EXPECT_EQ(dry.deleted[0].key, oldest);
  EXPECT_EQ(dry.bytes_after, policy.max_bytes);
  EXPECT_TRUE(fs::exists(origin->entry_dir(oldest)));

  // No room: every done entry older than the TTL goes, oldest first.
  policy.max_bytes = 1;
  auto report = evict(*cache, policy, DryRun::no);
  ASSERT_TRUE(report.ran);
  ASSERT_EQ(report.deleted.size(), 2u);
  EXPECT_EQ(report.deleted[0].key, oldest);
  EXPECT_EQ(report.deleted[1].key, older);
  EXPECT_EQ(report.kept_by_ttl, 1u);
  EXPECT_EQ(report.kept_pending, 1u);
  EXPECT_EQ(report.entries_before, 4u);
  EXPECT_FALSE(fs::exists(origin->entry_dir(oldest)));
  EXPECT_FALSE(fs::exists(origin->entry_dir(older)));
  EXPECT_TRUE(fs::exists(origin->entry_dir(recent)));
  EXPECT_TRUE(fs::exists(origin->entry_dir(graph_only)));
  // The eviction lock is gone.
  EXPECT_FALSE(fs::exists(dir() / "remote" / kStoredEvictionLock));
}

TEST_F(StoredCacheTest, OneProcessEvictsARemoteAtATime) {
  auto old = done("HloModule old\n");
  age(old, 90);
  auto taken = storage::Lock::try_acquire(remote_storage(),
                                          std::string(kStoredEvictionLock),
                                          util::LockHolder::self("other"), {600s, 3600s}, std::chrono::system_clock::now());
  ASSERT_TRUE(taken.ok());
  ASSERT_TRUE(std::holds_alternative<storage::Lock>(*taken));
  auto report = evict(*cache, {1, std::chrono::seconds(0)}, DryRun::no);
  EXPECT_FALSE(report.ran);
  EXPECT_TRUE(fs::exists(origin->entry_dir(old)));
  // clear-locks keeps it while it is in force.
  auto cleared = clear_locks(*cache, false);
  EXPECT_TRUE(cleared.removed.empty());
  const fs::path where = remote_storage()->describe(std::string(kStoredEvictionLock));
  EXPECT_EQ(cleared.held, std::vector<fs::path>{where});
  // With --force it goes, and the next pass runs.
  auto forced = clear_locks(*cache, true);
  EXPECT_EQ(forced.removed, std::vector<fs::path>{where});
  EXPECT_TRUE(forced.held.empty());
  EXPECT_FALSE(fs::exists(dir() / "remote" / kStoredEvictionLock));
  EXPECT_TRUE(evict(*cache, {1, std::chrono::seconds(0)}, DryRun::no).ran);
  EXPECT_FALSE(fs::exists(origin->entry_dir(old)));
}

} // namespace
} // namespace npc::cache
