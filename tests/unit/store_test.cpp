// cache/store: entries in a real directory.
//
// sha256 of the NEFF bytes used here, computed with sha256sum:
//   printf 'neff-bytes-0123456789' | sha256sum
//     -> 25600cf2a6729dc251b36588ae87d6f0d1017e7b3412178eddbeabbb12f8d9a7

#include <algorithm>
#include <fstream>
#include <unistd.h>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/publish.hpp>
#include <npc/cache/store.hpp>
#include <npc/util/fs.hpp>

#include "test_support.hpp"
#include "unit_helpers.hpp"

namespace npc::cache {
namespace {

using namespace std::chrono_literals;
using unit::at_unix;
using unit::kT0;

const std::string kGraph = "HloModule golden_test\n";
const std::vector<std::string> kFlags = {"-O2", "a b"};
const std::string kNeff = "neff-bytes-0123456789";
const std::string kNeffSha = "25600cf2a6729dc251b36588ae87d6f0d1017e7b3412178eddbeabbb12f8d9a7";

class StoreTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    cache.emplace(dir() / "root", clock);
    ASSERT_TRUE(cache->ensure_root().ok());
    key = make_key_for_graph(kGraph, kFlags, "1.0");
    entry = cache->entry_dir(key);
  }

  AttemptRecord success_record(int n = 1) const {
    AttemptRecord r;
    r.attempt = n;
    r.outcome = "success";
    r.exit = "exit code 0";
    r.wall_seconds = 2.5;
    r.peak_rss_bytes = 1234;
    r.started_unix = kT0 - 3;
    return r;
  }

  AttemptRecord failure_record(int n = 1) const {
    AttemptRecord r;
    r.attempt = n;
    r.outcome = "failed";
    r.exit = "exit code 70";
    r.exit_code = 70;
    r.wall_seconds = 1.0;
    r.started_unix = kT0 - 2;
    return r;
  }

  EntryInfo inspect(const fs::path& d) const {
    auto info = cache->entry(d).inspect();
    EXPECT_TRUE(info.ok()) << (info.ok() ? "" : info.error());
    return info.ok() ? *info : EntryInfo{};
  }

  // A done entry, published through the cache with its integrity record.
  void make_done_entry() {
    ASSERT_TRUE(cache->entry(entry).store_graph(kGraph, kFlags).ok());
    auto lock = cache->entry(entry).lock(1s);
    ASSERT_TRUE(lock.ok() && std::holds_alternative<npc::storage::Lock>(*lock)) << (lock.ok() ? "held elsewhere" : lock.error());
    test::write_text(dir() / "new.neff", kNeff);
    auto published = cache->entry(entry).publish_success(dir() / "new.neff", success_record());
    ASSERT_TRUE(published.ok()) << published.error();
  }

  util::FakeClock clock{at_unix(kT0)};
  std::optional<Cache> cache;
  CacheKey key;
  fs::path entry;
};

TEST_F(StoreTest, EnsureRootCreatesAPrivateRoot) {
  EXPECT_TRUE(fs::is_directory(dir() / "root"));
  EXPECT_TRUE(fs::is_directory(dir() / "root" / ".npc"));
  EXPECT_EQ(cache->private_dir(), dir() / "root" / ".npc");
  auto perms = fs::status(dir() / "root").permissions();
  EXPECT_EQ(perms & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(entry, dir() / "root" / "neuronxcc-1.0" / key.module_name());
}

TEST_F(StoreTest, StoreGraphCreatesAPendingEntry) {
  ASSERT_TRUE(cache->entry(entry).store_graph(kGraph, kFlags).ok());
  EXPECT_EQ(test::read_text(entry / kGraphFile), kGraph);
  EXPECT_EQ(test::read_text(entry / kFlagsFile), "[\"-O2\",\"a b\"]\n");
  EntryInfo info = inspect(entry);
  EXPECT_EQ(info.state, EntryState::pending);
  EXPECT_EQ(info.key, key);
  EXPECT_EQ(info.dir, entry);
  EXPECT_TRUE(info.has_graph);
  EXPECT_FALSE(info.has_neff);
  EXPECT_FALSE(info.has_done);
  EXPECT_FALSE(info.has_log);
  EXPECT_FALSE(info.has_lock_file);
  EXPECT_EQ(info.graph_bytes, 22U);
  EXPECT_EQ(info.bytes, 22U + 14U); // the graph and compile_flags.json (["-O2","a b"] and a newline)
  EXPECT_TRUE(info.temp_files.empty());
  EXPECT_EQ(unit::names_in(entry), (std::vector<std::string>{"compile_flags.json", "model.hlo_module.pb"}));
}

TEST_F(StoreTest, StoreGraphFirstWriterWins) {
  ASSERT_TRUE(cache->entry(entry).store_graph(kGraph, kFlags).ok());
  ASSERT_TRUE(cache->entry(entry).store_graph("other bytes", {"-O1"}).ok());
  EXPECT_EQ(test::read_text(entry / kGraphFile), kGraph);
  EXPECT_EQ(test::read_text(entry / kFlagsFile), "[\"-O2\",\"a b\"]\n");
  EXPECT_EQ(unit::names_in(entry), (std::vector<std::string>{"compile_flags.json", "model.hlo_module.pb"}));
}

TEST_F(StoreTest, PublishSuccessUnderTheLockMakesTheEntryDone) {
  ASSERT_TRUE(cache->entry(entry).store_graph(kGraph, kFlags).ok());
  auto lock = cache->entry(entry).lock(1s);
  ASSERT_TRUE(lock.ok() && std::holds_alternative<npc::storage::Lock>(*lock)) << (lock.ok() ? "held elsewhere" : lock.error());
  EXPECT_EQ(inspect(entry).state, EntryState::locked);
  test::write_text(dir() / "new.neff", kNeff);
  clock.advance(5s);
  ASSERT_TRUE(cache->entry(entry).publish_success(dir() / "new.neff", success_record()).ok());

  EXPECT_FALSE(fs::exists(dir() / "new.neff")); // moved, not copied
  EXPECT_EQ(test::read_text(entry / kNeffFile), kNeff);
  EXPECT_TRUE(fs::is_regular_file(entry / kDoneFile));
  auto meta = read_entry_meta(entry);
  ASSERT_TRUE(meta.ok()) << meta.error();
  EXPECT_EQ(meta->neff_sha256, kNeffSha);
  EXPECT_EQ(meta->neff_bytes, 21U);
  EXPECT_EQ(meta->graph_bytes, 22U);
  ASSERT_EQ(meta->attempts.size(), 1U);
  EXPECT_EQ(meta->attempts[0].outcome, "success");
  EXPECT_EQ(meta->attempts[0].wall_seconds, 2.5);
  EXPECT_EQ(inspect(entry).state, EntryState::done); // done even while still locked
  EXPECT_EQ(unit::file_time(entry), at_unix(kT0 + 5)); // a publish is a use
  std::ignore = std::get<npc::storage::Lock>(*lock).release();
  EntryInfo info = inspect(entry);
  EXPECT_EQ(info.state, EntryState::done);
  EXPECT_TRUE(info.has_neff);
  EXPECT_TRUE(info.has_done);
  EXPECT_FALSE(info.has_lock_file);
}

TEST_F(StoreTest, PublishFailureRecordsTheLog) {
  ASSERT_TRUE(cache->entry(entry).store_graph(kGraph, kFlags).ok());
  {
    auto lock = cache->entry(entry).lock(1s);
    ASSERT_TRUE(lock.ok() && std::holds_alternative<npc::storage::Lock>(*lock)) << (lock.ok() ? "held elsewhere" : lock.error());
    test::write_text(dir() / "compile.log", "error: out of cheese\n");
    ASSERT_TRUE(cache->entry(entry).publish_failure(dir() / "compile.log", failure_record()).ok());
    EXPECT_EQ(inspect(entry).state, EntryState::locked);
  }
  EXPECT_FALSE(fs::exists(dir() / "compile.log"));
  EXPECT_EQ(test::read_text(entry / kLogFile), "error: out of cheese\n");
  EXPECT_FALSE(fs::exists(entry / kDoneFile));
  EntryInfo info = inspect(entry);
  EXPECT_EQ(info.state, EntryState::failed);
  EXPECT_TRUE(info.has_log);
  auto meta = read_entry_meta(entry);
  ASSERT_TRUE(meta.ok()) << meta.error();
  ASSERT_EQ(meta->attempts.size(), 1U);
  EXPECT_EQ(meta->attempts[0].outcome, "failed");
  EXPECT_EQ(meta->attempts[0].exit_code, 70);
  EXPECT_FALSE(meta->neff_sha256.has_value());
}

TEST_F(StoreTest, SuccessAfterFailureRemovesTheLogAndKeepsHistory) {
  ASSERT_TRUE(cache->entry(entry).store_graph(kGraph, kFlags).ok());
  auto lock = cache->entry(entry).lock(1s);
  ASSERT_TRUE(lock.ok() && std::holds_alternative<npc::storage::Lock>(*lock)) << (lock.ok() ? "held elsewhere" : lock.error());
  test::write_text(dir() / "compile.log", "boom\n");
  ASSERT_TRUE(cache->entry(entry).publish_failure(dir() / "compile.log", failure_record(1)).ok());
  test::write_text(dir() / "new.neff", kNeff);
  ASSERT_TRUE(cache->entry(entry).publish_success(dir() / "new.neff", success_record(2)).ok());
  std::ignore = std::get<npc::storage::Lock>(*lock).release();
  EXPECT_FALSE(fs::exists(entry / kLogFile));
  EXPECT_EQ(inspect(entry).state, EntryState::done);
  auto meta = read_entry_meta(entry);
  ASSERT_TRUE(meta.ok());
  ASSERT_EQ(meta->attempts.size(), 2U);
  EXPECT_EQ(meta->attempts[0].outcome, "failed");
  EXPECT_EQ(meta->attempts[1].outcome, "success");
  EXPECT_EQ(meta->last_success()->attempt, 2);
}

TEST_F(StoreTest, CopyNeffOfAGoodEntry) {
  make_done_entry();
  fs::path out = dir() / "out" / "model.neff";
  fs::create_directories(out.parent_path());
  auto integrity = cache->entry(entry).copy_neff(out);
  ASSERT_TRUE(integrity.ok()) << integrity.error();
  EXPECT_EQ(*integrity, Integrity::ok);
  EXPECT_EQ(test::read_text(out), kNeff);
  EXPECT_EQ(unit::names_in(out.parent_path()), std::vector<std::string>{"model.neff"});
  auto verified = cache->entry(entry).verify_neff();
  ASSERT_TRUE(verified.ok());
  EXPECT_EQ(*verified, Integrity::ok);
}

// Each way of damaging the NEFF after it was published.
enum class Damage { truncate, flip_byte, append_byte };

void PrintTo(Damage damage, std::ostream* out) {
  switch (damage) {
  case Damage::truncate: *out << "truncate"; break;
  case Damage::flip_byte: *out << "flip_byte"; break;
  case Damage::append_byte: *out << "append_byte"; break;
  }
}

class StoreIntegrityTest : public StoreTest, public ::testing::WithParamInterface<Damage> {};

TEST_P(StoreIntegrityTest, DamagedNeffIsAMismatchAndNothingIsCopied) {
  make_done_entry();
  std::string bytes = kNeff;
  switch (GetParam()) {
  case Damage::truncate: bytes.resize(bytes.size() - 1); break;
  case Damage::flip_byte: bytes[7] = static_cast<char>(bytes[7] ^ 0x01); break;
  case Damage::append_byte: bytes.push_back('x'); break;
  }
  {
    std::ofstream damage(entry / kNeffFile, std::ios::binary | std::ios::trunc);
    damage << bytes;
  }
  fs::path out = dir() / "out" / "model.neff";
  fs::create_directories(out.parent_path());
  auto integrity = cache->entry(entry).copy_neff(out);
  ASSERT_TRUE(integrity.ok()) << integrity.error();
  EXPECT_EQ(*integrity, Integrity::mismatch);
  EXPECT_FALSE(fs::exists(fs::symlink_status(out)));
  EXPECT_EQ(unit::names_in(out.parent_path()), std::vector<std::string>{}); // no temp left either
  auto verified = cache->entry(entry).verify_neff();
  ASSERT_TRUE(verified.ok());
  EXPECT_EQ(*verified, Integrity::mismatch);
}

INSTANTIATE_TEST_SUITE_P(Damage, StoreIntegrityTest,
                         ::testing::Values(Damage::truncate, Damage::flip_byte, Damage::append_byte),
                         [](const auto& info) {
                           switch (info.param) {
                           case Damage::truncate: return std::string("truncate");
                           case Damage::flip_byte: return std::string("flip_byte");
                           case Damage::append_byte: return std::string("append_byte");
                           }
                           return std::string("unknown");
                         });

TEST_F(StoreTest, EntryWithoutRecordIsUnverifiedAndServed) {
  // As another tool (torch-neuronx itself) writes an entry: no npc-entry.json.
  fs::create_directories(entry);
  test::write_text(entry / kGraphFile, kGraph);
  test::write_text(entry / kNeffFile, "foreign neff");
  test::write_text(entry / kDoneFile, "");
  EXPECT_EQ(inspect(entry).state, EntryState::done);
  fs::path out = dir() / "served.neff";
  auto integrity = cache->entry(entry).copy_neff(out);
  ASSERT_TRUE(integrity.ok()) << integrity.error();
  EXPECT_EQ(*integrity, Integrity::unverified);
  EXPECT_EQ(test::read_text(out), "foreign neff");
}

TEST_F(StoreTest, CorruptRecordIsAnErrorAndNothingIsCopied) {
  make_done_entry();
  test::write_text(entry / kMetaFile, "{not json");
  fs::path out = dir() / "served.neff";
  auto integrity = cache->entry(entry).copy_neff(out);
  EXPECT_FALSE(integrity.ok());
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(unit::names_in(dir()), (std::vector<std::string>{"root"}));
}

TEST_F(StoreTest, DemoteMakesTheEntryPendingAgain) {
  make_done_entry();
  ASSERT_TRUE(cache->entry(entry).demote().ok());
  EXPECT_FALSE(fs::exists(entry / kDoneFile));
  EXPECT_FALSE(fs::exists(entry / kNeffFile));
  EXPECT_TRUE(fs::exists(entry / kGraphFile));
  EXPECT_EQ(inspect(entry).state, EntryState::pending);
  auto meta = read_entry_meta(entry);
  ASSERT_TRUE(meta.ok());
  EXPECT_FALSE(meta->neff_sha256.has_value());
  EXPECT_FALSE(meta->neff_bytes.has_value());
  EXPECT_EQ(meta->attempts.size(), 1U); // the history stays
}

TEST_F(StoreTest, DemoteRemovesTheDoneMarkerFirst) {
  make_done_entry();
  // A NEFF that cannot be unlinked (a non-empty directory in its place) makes
  // demote fail after its first step: the done marker must already be gone.
  fs::remove(entry / kNeffFile);
  fs::create_directories(entry / kNeffFile / "x");
  auto status = cache->entry(entry).demote();
  EXPECT_FALSE(status.ok());
  EXPECT_FALSE(fs::exists(entry / kDoneFile));
  EXPECT_NE(inspect(entry).state, EntryState::done);
}

TEST_F(StoreTest, ClearFailureForgetsTheLog) {
  ASSERT_TRUE(cache->entry(entry).store_graph(kGraph, kFlags).ok());
  test::write_text(entry / kLogFile, "boom\n");
  EXPECT_EQ(inspect(entry).state, EntryState::failed);
  ASSERT_TRUE(cache->entry(entry).clear_failure().ok());
  EXPECT_FALSE(fs::exists(entry / kLogFile));
  EXPECT_EQ(inspect(entry).state, EntryState::pending);
  EXPECT_TRUE(cache->entry(entry).clear_failure().ok()); // nothing to clear is fine
}

TEST_F(StoreTest, RemoveEntryOfALockedEntryKeepsIt) {
  make_done_entry();
  auto lock = cache->entry(entry).lock(1s);
  ASSERT_TRUE(lock.ok() && std::holds_alternative<npc::storage::Lock>(*lock)) << (lock.ok() ? "held elsewhere" : lock.error());
  auto removed = cache->entry(entry).remove();
  ASSERT_TRUE(removed.ok()) << removed.error();
  EXPECT_FALSE(*removed);
  EXPECT_TRUE(fs::exists(entry / kNeffFile));
  EXPECT_TRUE(fs::exists(entry / kDoneFile));
  EXPECT_TRUE(fs::exists(entry / kGraphFile));
  EXPECT_EQ(inspect(entry).state, EntryState::done);
}

TEST_F(StoreTest, RemoveEntryRemovesItAndLeavesNoTrash) {
  make_done_entry();
  auto removed = cache->entry(entry).remove();
  ASSERT_TRUE(removed.ok()) << removed.error();
  EXPECT_TRUE(*removed);
  EXPECT_FALSE(fs::exists(entry));
  EXPECT_EQ(unit::names_in(cache->private_dir() / "trash"), std::vector<std::string>{});
  EXPECT_EQ(unit::names_in(dir() / "root" / "neuronxcc-1.0"), std::vector<std::string>{});
  EXPECT_TRUE(cache->list().empty());
}

TEST_F(StoreTest, EmptyTrashRemovesLeftovers) {
  fs::create_directories(cache->private_dir() / "trash" / "MODULE_aa+bb.1.2" / "sub");
  test::write_text(cache->private_dir() / "trash" / "MODULE_aa+bb.1.2" / "model.neff", "x");
  cache->empty_trash();
  EXPECT_EQ(unit::names_in(cache->private_dir() / "trash"), std::vector<std::string>{});
}

TEST_F(StoreTest, InspectCountsTheBytesOfRegularFiles) {
  fs::create_directories(entry / "subdir");
  test::write_text(entry / kGraphFile, std::string(100, 'g'));
  test::write_text(entry / kNeffFile, std::string(1000, 'n'));
  test::write_text(entry / kDoneFile, "");
  test::write_text(entry / kLogFile, "1234567");
  test::write_text(entry / ".tmp-model.neff.1.abc", "12345");
  test::write_text(entry / "subdir" / "ignored", std::string(50, 'x'));
  EntryInfo info = inspect(entry);
  EXPECT_EQ(info.bytes, 100U + 1000U + 0U + 7U + 5U);
  EXPECT_EQ(info.graph_bytes, 100U);
  EXPECT_EQ(info.temp_files, std::vector<std::string>{".tmp-model.neff.1.abc"});
  EXPECT_TRUE(info.has_graph);
  EXPECT_TRUE(info.has_neff);
  EXPECT_TRUE(info.has_done);
  EXPECT_TRUE(info.has_log);
  EXPECT_EQ(info.state, EntryState::done);
}

TEST_F(StoreTest, InspectStates) {
  fs::create_directories(entry);
  EXPECT_EQ(inspect(entry).state, EntryState::incomplete);
  test::write_text(entry / kGraphFile, kGraph);
  // A graph without its compile_flags.json is not yet compilable.
  EXPECT_EQ(inspect(entry).state, EntryState::incomplete);
  test::write_text(entry / kFlagsFile, "[]\n");
  EXPECT_EQ(inspect(entry).state, EntryState::pending);
  test::write_text(entry / kLogFile, "x");
  EXPECT_EQ(inspect(entry).state, EntryState::failed);
  // A lock file nobody holds does not make it locked.
  test::write_text(entry / kLockFile, "pid=999999 host=h start=1 tool=t\n");
  EntryInfo info = inspect(entry);
  EXPECT_TRUE(info.has_lock_file);
  EXPECT_EQ(info.state, EntryState::failed);
  // The done marker without a NEFF is not done.
  test::write_text(entry / kDoneFile, "");
  EXPECT_EQ(inspect(entry).state, EntryState::failed);
  EXPECT_FALSE(cache->entry(dir() / "root" / "neuronxcc-1.0" / "not-an-entry").inspect().ok());
  auto missing = cache->entry(dir() / "root" / "neuronxcc-1.0" / "MODULE_ab+cd").inspect();
  ASSERT_TRUE(missing.ok()) << missing.error();
  EXPECT_EQ(missing->state, EntryState::absent);
}

TEST(EntryStateNames, AreStable) {
  EXPECT_EQ(to_string(EntryState::absent), "absent");
  EXPECT_EQ(to_string(EntryState::pending), "pending");
  EXPECT_EQ(to_string(EntryState::locked), "locked");
  EXPECT_EQ(to_string(EntryState::done), "done");
  EXPECT_EQ(to_string(EntryState::failed), "failed");
  EXPECT_EQ(to_string(EntryState::incomplete), "incomplete");
}

TEST_F(StoreTest, ListCoversEveryVersion) {
  auto make = [&](const CacheKey& k) {
    fs::path d = cache->entry_dir(k);
    fs::create_directories(d);
    test::write_text(d / kGraphFile, "g");
  };
  make(unit::repeated_key("1.0", 'a', '1'));
  make(unit::repeated_key("1.0", 'b', '2'));
  make(unit::repeated_key("2.0+x", 'c', '3'));
  // Not entries: skipped.
  fs::create_directories(dir() / "root" / "neuronxcc-1.0" / "not_a_module");
  fs::create_directories(dir() / "root" / "other" / "MODULE_dd+44");
  fs::create_directories(dir() / "root" / "neuronxcc-bad version" / "MODULE_ee+55");

  std::vector<std::string> keys;
  for (const auto& e : cache->list()) keys.push_back(e.key.str());
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{unit::repeated_key("1.0", 'a', '1').str(),
                                            unit::repeated_key("1.0", 'b', '2').str(),
                                            unit::repeated_key("2.0+x", 'c', '3').str()}));
  EXPECT_EQ(cache->list_version("1.0").size(), 2U);
  EXPECT_EQ(cache->list_version("2.0+x").size(), 1U);
  EXPECT_EQ(cache->list_version("3.0").size(), 0U);
}

TEST_F(StoreTest, TouchSetsTheEntryTimeToTheCacheClock) {
  ASSERT_TRUE(cache->entry(entry).store_graph(kGraph, kFlags).ok());
  ASSERT_TRUE(cache->entry(entry).touch().ok());
  EXPECT_EQ(unit::file_time(entry), at_unix(kT0));
  EXPECT_EQ(inspect(entry).last_used, at_unix(kT0));
  clock.advance(std::chrono::hours(1));
  ASSERT_TRUE(cache->entry(entry).touch().ok());
  EXPECT_EQ(unit::file_time(entry), at_unix(kT0 + 3600));
  EXPECT_EQ(inspect(entry).last_used, at_unix(kT0 + 3600));
  EXPECT_FALSE(cache->entry(dir() / "missing").touch().ok());
}

TEST_F(StoreTest, LockToolNameIsRecorded) {
  std::string before = lock_tool_name();
  set_lock_tool_name("unit_test_tool");
  auto lock = cache->entry(entry).lock(1s);
  set_lock_tool_name(before);
  ASSERT_TRUE(lock.ok() && std::holds_alternative<npc::storage::Lock>(*lock)) << (lock.ok() ? "held elsewhere" : lock.error());
  auto record = storage::LockRecord::parse(test::read_text(entry / "model.hlo_module.pb.lock"));
  ASSERT_TRUE(record.has_value());
  auto holder = record->holder();
  ASSERT_TRUE(holder.has_value());
  EXPECT_EQ(holder->tool, "unit_test_tool");
  EXPECT_EQ(holder->pid, ::getpid());
  EXPECT_FALSE(fs::exists(entry / "npc-compile.lock")) << "only older releases take it";
  auto second = cache->entry(entry).try_lock();
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->has_value());
}

} // namespace
} // namespace npc::cache
