// cache/shared_tier: a cache's shared tier used through a local mirror. Each
// test runs twice: with a directory as the shared tier, and with a real S3
// server (the run's RADOS Gateway, which verifies signatures and honours
// conditional writes). What the shared tier holds is looked at through its
// storage, as another host would; the mirror is a directory.
//
//   printf 'neff-bytes-0123456789' | sha256sum
//     -> 25600cf2a6729dc251b36588ae87d6f0d1017e7b3412178eddbeabbb12f8d9a7

#include <npc/cache/shared_tier.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/publish.hpp>
#include <npc/storage/local.hpp>
#include <npc/storage/lock.hpp>
#include <npc/storage/s3.hpp>
#include <npc/storage/s3_client.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/fs.hpp>

#include "files.hpp"
#include "forwarding_storage.hpp"
#include "s3_server.hpp"
#include "two_tiers.hpp"
#include "test_support.hpp"

namespace npc::cache {
namespace {

using namespace std::chrono_literals;

const std::string kRemoteGraph = "HloModule remote_test\n";
const std::vector<std::string> kRemoteFlags = {"-O2"};
const std::string kFlagsJson = "[\"-O2\"]\n";
const std::string kRemoteNeff = "neff-bytes-0123456789";
const std::string kRemoteNeffSha = "25600cf2a6729dc251b36588ae87d6f0d1017e7b3412178eddbeabbb12f8d9a7";
const std::vector<std::string> kDoneFiles = {"compile_flags.json", "model.done", "model.hlo_module.pb", "model.neff",
                                             "npc-entry.json"};

AttemptRecord recorded_attempt(const std::string& outcome) {
  AttemptRecord r;
  r.attempt = 1;
  r.outcome = outcome;
  r.exit = outcome == "success" ? "exit code 0" : "exit code 70";
  return r;
}

class SharedTierTest : public test::MirrorAndSharedTest {
protected:
  void SetUp() override {
    MirrorAndSharedTest::SetUp();
    if (HasFatalFailure()) return;
    key = make_key_for_graph(kRemoteGraph, kRemoteFlags, "1.0");
    remote = std::make_unique<SharedTier>(shared_storage(), *mirror);
  }

  // A done entry in `cache`, as our tools publish it (with its record).
  void publish_done(const Cache& cache, const std::string& neff = kRemoteNeff) {
    Entry entry = cache.entry(key);
    ASSERT_TRUE(entry.store_graph(kRemoteGraph, kRemoteFlags).ok());
    publish_result(entry, true, neff);
  }

  void publish_failed(const Cache& cache) {
    Entry entry = cache.entry(key);
    ASSERT_TRUE(entry.store_graph(kRemoteGraph, kRemoteFlags).ok());
    publish_result(entry, false, "error: out of cheese\n");
  }

  // The shared entry's files.
  std::vector<std::string> shared_names() const { return MirrorAndSharedTest::shared_names(key.relative_path()); }
  std::string shared_text(std::string_view name) const {
    return MirrorAndSharedTest::shared_text(key.relative_path() / name);
  }
  void write_shared(std::string_view name, const std::string& text) const {
    MirrorAndSharedTest::write_shared(key.relative_path() / name, text);
  }
  fs::path mirror_dir() const { return mirror->entry_dir(key); }

  CacheKey key;
  std::unique_ptr<SharedTier> remote;
};

INSTANTIATE_TEST_SUITE_P(DirectoryAndS3, SharedTierTest,
                         ::testing::Values(test::SharedBackend::directory, test::SharedBackend::s3),
                         test::shared_backend_name);

TEST_P(SharedTierTest, ADoneEntryIsDownloadedVerifiedAndPublishedIntoTheMirror) {
  ASSERT_NO_FATAL_FAILURE(publish_done(*origin));
  auto result = remote->fetch_result(key, 0ms);
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->outcome, FetchOutcome::copied) << result->detail;
  EXPECT_EQ(test::names_in(mirror_dir()), kDoneFiles);
  EXPECT_EQ(test::read_text(mirror_dir() / kNeffFile), kRemoteNeff);
  EXPECT_EQ(test::read_text(mirror_dir() / kGraphFile), kRemoteGraph);
  EXPECT_EQ(test::read_text(mirror_dir() / kFlagsFile), kFlagsJson);
  auto integrity = mirror->entry(key).verify_neff();
  ASSERT_TRUE(integrity);
  EXPECT_EQ(*integrity, Integrity::ok);
  auto meta = read_entry_meta(mirror_dir());
  ASSERT_TRUE(meta);
  EXPECT_EQ(meta->neff_sha256, kRemoteNeffSha);
  // The remote's history comes along.
  ASSERT_EQ(meta->attempts.size(), 1u);
  EXPECT_EQ(meta->attempts[0].outcome, "success");
  // A second fetch finds the mirror done and downloads nothing.
  auto again = remote->fetch_result(key, 0ms);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->outcome, FetchOutcome::already_done);
}

TEST_P(SharedTierTest, AMissLeavesNothingInTheMirror) {
  auto result = remote->fetch_result(key, 0ms);
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->outcome, FetchOutcome::miss);
  EXPECT_EQ(test::names_in(dir() / "mirror"), std::vector<std::string>{".npc"});
  // A pending remote entry (graph, no result) is a miss too.
  ASSERT_TRUE(origin->entry(key).store_graph(kRemoteGraph, kRemoteFlags).ok());
  result = remote->fetch_result(key, 0ms);
  ASSERT_TRUE(result);
  EXPECT_EQ(result->outcome, FetchOutcome::miss);
  EXPECT_EQ(test::names_in(dir() / "mirror"), std::vector<std::string>{".npc"});
}

TEST_P(SharedTierTest, ANeffThatFailsItsRecordIsRejectedAndTheMirrorIsNotDone) {
  ASSERT_NO_FATAL_FAILURE(publish_done(*origin));
  write_shared(kNeffFile, "NEFF-bytes-0123456789"); // same size, other bytes
  auto result = remote->fetch_result(key, 0ms);
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->outcome, FetchOutcome::rejected);
  EXPECT_EQ(result->detail, remote->describe(key) + ": its NEFF does not match its integrity record");
  // Nothing published, no temp left behind.
  EXPECT_EQ(test::names_in(mirror_dir()), std::vector<std::string>{});
}

TEST_P(SharedTierTest, AnEntryWrittenByTheFrameworkIsAcceptedAndRecordedByItsHash) {
  // libneuronxla's files only: no npc-entry.json.
  ASSERT_NO_FATAL_FAILURE(write_shared(kGraphFile, kRemoteGraph));
  ASSERT_NO_FATAL_FAILURE(write_shared(kFlagsFile, kFlagsJson));
  ASSERT_NO_FATAL_FAILURE(write_shared(kNeffFile, kRemoteNeff));
  ASSERT_NO_FATAL_FAILURE(write_shared(kDoneFile, ""));
  auto result = remote->fetch_result(key, 0ms);
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->outcome, FetchOutcome::copied) << result->detail;
  EXPECT_EQ(test::names_in(mirror_dir()), kDoneFiles);
  auto meta = read_entry_meta(mirror_dir());
  ASSERT_TRUE(meta);
  EXPECT_EQ(meta->neff_sha256, kRemoteNeffSha);
  EXPECT_EQ(meta->neff_bytes, kRemoteNeff.size());
}

TEST_P(SharedTierTest, ACachedFailureIsCopiedAsOne) {
  ASSERT_NO_FATAL_FAILURE(publish_failed(*origin));
  auto result = remote->fetch_result(key, 0ms);
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->outcome, FetchOutcome::failure_copied);
  EXPECT_EQ(test::names_in(mirror_dir()),
            (std::vector<std::string>{"compile_flags.json", "model.hlo_module.pb", "model.log", "npc-entry.json"}));
  EXPECT_EQ(test::read_text(mirror_dir() / kLogFile), "error: out of cheese\n");
  EXPECT_TRUE(mirror->entry(key).looks_failed());
}

TEST_P(SharedTierTest, ABusyMirrorEntryIsReportedNotWaitedFor) {
  ASSERT_NO_FATAL_FAILURE(publish_done(*origin));
  auto held = mirror->entry(key).lock(0ms);
  ASSERT_TRUE(held && std::holds_alternative<storage::Lock>(*held));
  auto result = remote->fetch_result(key, 0ms);
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->outcome, FetchOutcome::busy);
  EXPECT_FALSE(mirror->entry(key).looks_done());
}

TEST_P(SharedTierTest, TheLauncherLookFetchesAResultAndJudgesALock) {
  // Pending there, no lock: a compile here takes it.
  ASSERT_TRUE(origin->entry(key).store_graph(kRemoteGraph, kRemoteFlags).ok());
  EXPECT_EQ(remote->look(key, false), Found::pending);
  // Its lock held by a live process (this one): another host compiles it.
  {
    auto held = origin->entry(key).lock(0ms);
    ASSERT_TRUE(held && std::holds_alternative<storage::Lock>(*held));
    EXPECT_EQ(remote->look(key, false), Found::held_elsewhere);
  }
  EXPECT_EQ(remote->look(key, false), Found::pending) << "the lock was let go";
  // Done there: its result comes into the mirror.
  ASSERT_NO_FATAL_FAILURE(publish_done(*origin));
  EXPECT_EQ(remote->look(key, false), Found::done);
  EXPECT_EQ(test::read_text(mirror_dir() / "model.neff"), kRemoteNeff);
}

// --command compile's look: a result there is done, and stays there.
TEST_P(SharedTierTest, TheLauncherLookWithoutDownloadLeavesAResultThere) {
  ASSERT_NO_FATAL_FAILURE(publish_done(*origin));
  EXPECT_EQ(remote->look(key, false, DownloadResult::no), Found::done);
  EXPECT_FALSE(fs::exists(mirror_dir()));
  EXPECT_EQ(shared_names(), kDoneFiles) << "no use recorded, nothing written";
}

// Many entries looked at in one walk of their version folder: each judged as
// a look of its own would.
TEST_P(SharedTierTest, TheLauncherLooksAtManyInOneWalk) {
  ASSERT_NO_FATAL_FAILURE(publish_done(*origin));
  const CacheKey held = make_key_for_graph("HloModule held\n", kRemoteFlags, "1.0");
  const CacheKey free = make_key_for_graph("HloModule free\n", kRemoteFlags, "1.0");
  ASSERT_TRUE(origin->entry(held).store_graph("HloModule held\n", kRemoteFlags).ok());
  ASSERT_TRUE(origin->entry(free).store_graph("HloModule free\n", kRemoteFlags).ok());
  auto lock = origin->entry(held).lock(0ms);
  ASSERT_TRUE(lock && std::holds_alternative<storage::Lock>(*lock));
  LockMemo memo;
  EXPECT_EQ(remote->look_all({key, held, free}, false, DownloadResult::no, memo, LookListing::whole_version_folder),
            (std::vector<Found>{Found::done, Found::held_elsewhere, Found::pending}));
  EXPECT_EQ(remote->look_all({key, held, free}, false, DownloadResult::no, memo, LookListing::each_entry),
            (std::vector<Found>{Found::done, Found::held_elsewhere, Found::pending}));
}

// The shared storage, counting its listings.
class ListingCounter : public test::ForwardingStorage {
public:
  using ForwardingStorage::ForwardingStorage;
  Result<std::vector<std::string>> list(std::string_view dir) const override {
    ++listings;
    return ForwardingStorage::list(dir);
  }
  Result<std::vector<storage::TreeFile>> list_tree(std::string_view dir) const override {
    ++listings;
    return ForwardingStorage::list_tree(dir);
  }
  mutable int listings = 0;
};

// The look's listing serves the download of the result it finds: one
// listing in all, under both ways of looking.
TEST_P(SharedTierTest, TheLauncherLookListsAResultOnceToFetchIt) {
  ASSERT_NO_FATAL_FAILURE(publish_done(*origin));
  for (LookListing listing : {LookListing::whole_version_folder, LookListing::each_entry}) {
    std::error_code ec;
    fs::remove_all(mirror_dir(), ec);
    auto counted = std::make_shared<ListingCounter>(shared_storage());
    SharedTier tier(counted, *mirror);
    LockMemo memo;
    EXPECT_EQ(tier.look_all({key}, false, DownloadResult::yes, memo, listing), std::vector<Found>{Found::done});
    EXPECT_EQ(test::read_text(mirror_dir() / kNeffFile), kRemoteNeff);
    EXPECT_EQ(counted->listings, 1);
  }
}

// A caller's listing out of date (the result removed since): the fetch looks
// again, and finds a miss, as it would have with a listing of its own.
TEST_P(SharedTierTest, AFetchOverAListingOutOfDateLooksAgain) {
  auto counted = std::make_shared<ListingCounter>(shared_storage());
  auto result =
      cache::fetch_result(*counted, *mirror, key, {.lock_wait = 0ms, .failures = true, .listed = &kDoneFiles});
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->outcome, FetchOutcome::miss);
  EXPECT_EQ(counted->listings, 1);
  EXPECT_FALSE(mirror->entry(key).looks_done());
  // Republished meanwhile: the second look brings it.
  ASSERT_NO_FATAL_FAILURE(publish_done(*origin));
  const std::vector<std::string> a_failure = {"compile_flags.json", "model.hlo_module.pb", "model.log"};
  result = cache::fetch_result(*counted, *mirror, key, {.lock_wait = 0ms, .failures = true, .listed = &a_failure});
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->outcome, FetchOutcome::copied) << result->detail;
  EXPECT_EQ(counted->listings, 2);
  EXPECT_EQ(test::read_text(mirror_dir() / kNeffFile), kRemoteNeff);
}

TEST_P(SharedTierTest, TheLauncherLookTakesACachedFailureUnlessRetryingFailures) {
  ASSERT_NO_FATAL_FAILURE(publish_failed(*origin));
  EXPECT_EQ(remote->look(key, true), Found::pending);
  EXPECT_FALSE(fs::exists(mirror_dir() / "model.log")) << "nothing is copied when failures are retried";
  EXPECT_EQ(remote->look(key, false), Found::failed);
  EXPECT_TRUE(mirror->entry(key).looks_failed());
}

TEST_P(SharedTierTest, TheLauncherLookReportsABusyMirrorEntry) {
  ASSERT_NO_FATAL_FAILURE(publish_done(*origin));
  auto held = mirror->entry(key).lock(0ms);
  ASSERT_TRUE(held && std::holds_alternative<storage::Lock>(*held));
  EXPECT_EQ(remote->look(key, false), Found::locked);
}

TEST_P(SharedTierTest, PushOfADoneEntryWritesEveryFileWithTheMarkerLast) {
  ASSERT_NO_FATAL_FAILURE(publish_done(*mirror));
  ASSERT_TRUE(remote->push(key).ok());
  EXPECT_EQ(shared_names(), kDoneFiles);
  EXPECT_EQ(shared_text(kNeffFile), kRemoteNeff);
  auto integrity = origin->entry(key).verify_neff();
  ASSERT_TRUE(integrity);
  EXPECT_EQ(*integrity, Integrity::ok);
  // The mirror keeps its files, and no staging folder.
  EXPECT_EQ(test::names_in(mirror_dir()), kDoneFiles);
  EXPECT_EQ(test::read_text(mirror_dir() / kNeffFile), kRemoteNeff);
}

// Under the entry's lock, the listing made when it was taken is what the
// push goes by: it lists nothing again (files it shows are not sent).
TEST_P(SharedTierTest, PushOverAListingGoesByItAndListsNothing) {
  ASSERT_NO_FATAL_FAILURE(publish_done(*mirror));
  ASSERT_TRUE(remote->push_over(key, {"compile_flags.json", "model.hlo_module.pb"}).ok());
  EXPECT_EQ(shared_names(), (std::vector<std::string>{"model.done", "model.neff", "npc-entry.json"}));
  EXPECT_EQ(shared_text(kNeffFile), kRemoteNeff);
  // As a launcher's take lists a pending entry: every file of the result.
  ASSERT_TRUE(remote->push_over(key, {}).ok());
  EXPECT_EQ(shared_names(), kDoneFiles);
  EXPECT_EQ(*origin->entry(key).verify_neff(), Integrity::ok);
}

TEST_P(SharedTierTest, PushReplacesAFailureAndAnotherNeffThereButNotTheSameOne) {
  ASSERT_NO_FATAL_FAILURE(publish_failed(*origin));
  ASSERT_NO_FATAL_FAILURE(publish_done(*mirror));
  ASSERT_TRUE(remote->push(key).ok());
  EXPECT_EQ(shared_names(), kDoneFiles); // model.log gone
  // Another node's different NEFF: replaced by ours.
  ASSERT_TRUE(origin->entry(key).demote().ok());
  ASSERT_NO_FATAL_FAILURE(publish_done(*origin, "other-neff"));
  ASSERT_TRUE(remote->push(key).ok());
  EXPECT_EQ(shared_text(kNeffFile), kRemoteNeff);
  EXPECT_EQ(*origin->entry(key).verify_neff(), Integrity::ok);
}

TEST_P(SharedTierTest, PushOfAFailureLeavesAnotherNodesSuccess) {
  ASSERT_NO_FATAL_FAILURE(publish_done(*origin));
  ASSERT_NO_FATAL_FAILURE(publish_failed(*mirror));
  ASSERT_TRUE(remote->push(key).ok());
  EXPECT_EQ(shared_names(), kDoneFiles);
  EXPECT_EQ(shared_text(kNeffFile), kRemoteNeff);
}

TEST_P(SharedTierTest, PushOfAFailureWritesItsLog) {
  ASSERT_NO_FATAL_FAILURE(publish_failed(*mirror));
  ASSERT_TRUE(remote->push(key).ok());
  EXPECT_EQ(shared_names(),
            (std::vector<std::string>{"compile_flags.json", "model.hlo_module.pb", "model.log", "npc-entry.json"}));
  EXPECT_EQ(shared_text(kLogFile), "error: out of cheese\n");
}

TEST_P(SharedTierTest, APendingEntryPushesNothing) {
  ASSERT_TRUE(mirror->entry(key).store_graph(kRemoteGraph, kRemoteFlags).ok());
  ASSERT_TRUE(remote->push(key).ok());
  EXPECT_EQ(shared_names(), std::vector<std::string>{});
}

TEST_P(SharedTierTest, PushUnlessThereKeepsTheRemotesResult) {
  // Another node's different NEFF stays, where push would replace it.
  ASSERT_NO_FATAL_FAILURE(publish_done(*origin, "other-neff"));
  ASSERT_NO_FATAL_FAILURE(publish_done(*mirror));
  auto pushed = remote->push_unless_there(key);
  ASSERT_TRUE(pushed.ok()) << pushed.error();
  EXPECT_FALSE(*pushed);
  EXPECT_EQ(shared_text(kNeffFile), "other-neff");
}

TEST_P(SharedTierTest, PushUnlessThereKeepsAFailureForAFailureButNotForASuccess) {
  ASSERT_NO_FATAL_FAILURE(publish_failed(*origin));
  ASSERT_NO_FATAL_FAILURE(publish_failed(*mirror));
  auto failure = remote->push_unless_there(key);
  ASSERT_TRUE(failure.ok()) << failure.error();
  EXPECT_FALSE(*failure);
  // Our success stands over the failure there.
  ASSERT_TRUE(util::remove_tree(mirror_dir()).ok());
  ASSERT_NO_FATAL_FAILURE(publish_done(*mirror));
  auto success = remote->push_unless_there(key);
  ASSERT_TRUE(success.ok()) << success.error();
  EXPECT_TRUE(*success);
  EXPECT_EQ(shared_names(), kDoneFiles);
}

TEST_P(SharedTierTest, PushUnlessThereWritesAnEntryTheRemoteLacks) {
  ASSERT_NO_FATAL_FAILURE(publish_done(*mirror));
  auto pushed = remote->push_unless_there(key);
  ASSERT_TRUE(pushed.ok()) << pushed.error();
  EXPECT_TRUE(*pushed);
  EXPECT_EQ(shared_names(), kDoneFiles);
  EXPECT_EQ(*origin->entry(key).verify_neff(), Integrity::ok);
}

// Flags given (another entry's of the same flags hash): only the graph is
// downloaded. The shared entry's flags object is not read: here it is gone.
TEST_P(SharedTierTest, AGraphFetchedWithItsFlagsGivenDownloadsOnlyTheGraph) {
  ASSERT_TRUE(remote->store_graph(key, kRemoteGraph, kRemoteFlags).ok());
  ASSERT_TRUE(shared_storage()->remove((key.relative_path() / kFlagsFile).generic_string()).ok());
  auto without = remote->fetch_graph(key);
  ASSERT_TRUE(without) << without.error();
  EXPECT_FALSE(*without) << "no flags there, none given";
  auto got = remote->fetch_graph(key, kFlagsJson);
  ASSERT_TRUE(got) << got.error();
  EXPECT_TRUE(*got);
  EXPECT_EQ(test::names_in(mirror_dir()), (std::vector<std::string>{"compile_flags.json", "model.hlo_module.pb"}));
  EXPECT_EQ(test::read_text(mirror_dir() / kFlagsFile), kFlagsJson);
  EXPECT_EQ(test::read_text(mirror_dir() / kGraphFile), kRemoteGraph);
}

TEST_P(SharedTierTest, TheGraphOfARemoteEntryComesIntoTheMirrorPending) {
  auto none = remote->fetch_graph(key);
  ASSERT_TRUE(none) << none.error();
  EXPECT_FALSE(*none);
  ASSERT_TRUE(remote->store_graph(key, kRemoteGraph, kRemoteFlags).ok());
  EXPECT_EQ(shared_names(), (std::vector<std::string>{"compile_flags.json", "model.hlo_module.pb"}));
  auto got = remote->fetch_graph(key);
  ASSERT_TRUE(got) << got.error();
  EXPECT_TRUE(*got);
  EXPECT_EQ(test::names_in(mirror_dir()), (std::vector<std::string>{"compile_flags.json", "model.hlo_module.pb"}));
  EXPECT_EQ(test::read_text(mirror_dir() / kGraphFile), kRemoteGraph);
  EXPECT_EQ(test::read_text(mirror_dir() / kFlagsFile), kFlagsJson);
  auto info = mirror->entry(key).inspect();
  ASSERT_TRUE(info);
  EXPECT_EQ(info->state, EntryState::pending);
}

// Through a real S3 server: one node pushes, another's mirror fetches.
class SharedTierS3Test : public test::S3ServerTest {};

TEST_F(SharedTierS3Test, AnEntryPushedByOneNodeIsFetchedByAnother) {
  auto open = [&] {
    auto client = storage::S3Client::create(server_.config());
    if (!client) throw std::runtime_error(client.error());
    return std::make_shared<storage::S3Storage>(std::move(*client),
                                                storage::S3Location{test::kS3TestBucket, "team/cache"});
  };
  Cache node_a(dir() / "a"), node_b(dir() / "b");
  ASSERT_TRUE(node_a.ensure_root().ok());
  ASSERT_TRUE(node_b.ensure_root().ok());
  CacheKey key = make_key_for_graph(kRemoteGraph, kRemoteFlags, "1.0");
  SharedTier a(open(), node_a), b(open(), node_b);

  ASSERT_TRUE(a.store_graph(key, kRemoteGraph, kRemoteFlags).ok());
  auto graph = b.fetch_graph(key);
  ASSERT_TRUE(graph && *graph);
  // Node b compiles it (here: publishes a NEFF) and pushes.
  Entry entry = node_b.entry(key);
  test::write_text(dir() / "new.neff", kRemoteNeff);
  {
    auto taken = entry.lock(0ms);
    ASSERT_TRUE(taken && std::holds_alternative<storage::Lock>(*taken));
    ASSERT_TRUE(entry.publish_success(dir() / "new.neff", recorded_attempt("success")).ok());
  }
  ASSERT_TRUE(b.push(key).ok());
  auto listed = a.storage()->list(key.relative_path().generic_string());
  ASSERT_TRUE(listed) << listed.error();
  EXPECT_EQ(*listed, (std::vector<std::string>{"compile_flags.json", "model.done", "model.hlo_module.pb",
                                                "model.neff", "npc-entry.json"}));

  auto fetched = a.fetch_result(key, 0ms);
  ASSERT_TRUE(fetched) << fetched.error();
  EXPECT_EQ(fetched->outcome, FetchOutcome::copied) << fetched->detail;
  EXPECT_EQ(test::read_text(node_a.entry_dir(key) / kNeffFile), kRemoteNeff);
  EXPECT_EQ(*node_a.entry(key).verify_neff(), Integrity::ok);
  EXPECT_EQ(a.describe(key), "s3://test-bucket/team/cache/" + key.relative_path().generic_string());
}

// The lock memo, where a test can set an object's time: a directory.
class SharedTierLockMemoTest : public SharedTierTest {
protected:
  // A record of another host, expiring `expires_in` from now.
  static std::string record_of_another_host(std::chrono::seconds expires_in) {
    util::LockHolder holder;
    holder.pid = 4242;
    holder.host = "node-elsewhere";
    holder.boot_id = "0b0b0b0b-0000-0000-0000-000000000000";
    holder.start_unix = 1700000000;
    holder.tool = "neuron_cc_wrapper";
    const auto expires = std::chrono::duration_cast<std::chrono::seconds>(
        (std::chrono::system_clock::now() + expires_in).time_since_epoch());
    return storage::LockRecord{holder.serialize(), "token-elsewhere", expires.count()}.serialize();
  }
  fs::path lock_file() const { return dir() / "shared" / key.relative_path() / std::string(kFrameworkLockFile); }
};

INSTANTIATE_TEST_SUITE_P(Directory, SharedTierLockMemoTest, ::testing::Values(test::SharedBackend::directory),
                         test::shared_backend_name);

// A lock object listed again with its size and time is judged from what was
// read of it; written anew (a renewal), it is read again.
TEST_P(SharedTierLockMemoTest, AnUnchangedLockIsJudgedFromWhatWasReadARewrittenOneIsReadAgain) {
  ASSERT_TRUE(origin->entry(key).store_graph(kRemoteGraph, kRemoteFlags).ok());
  write_shared(kFrameworkLockFile, record_of_another_host(600s));
  LockMemo memo;
  auto look = [&] { return remote->look_all({key}, false, DownloadResult::no, memo, LookListing::each_entry).front(); };
  EXPECT_EQ(look(), Found::held_elsewhere);
  // Bytes no holder would write in place (the same size, the same time,
  // expired): the memo's judgement stands, which only a read would change.
  const auto written = fs::last_write_time(lock_file());
  const std::string expired = record_of_another_host(-600s);
  ASSERT_EQ(expired.size(), fs::file_size(lock_file()));
  test::write_text(lock_file(), expired);
  fs::last_write_time(lock_file(), written);
  EXPECT_EQ(look(), Found::held_elsewhere);
  EXPECT_EQ(remote->look(key, false), Found::pending) << "a look without the memo reads the expired record";
  // Written anew: read again.
  fs::last_write_time(lock_file(), written + 5s);
  EXPECT_EQ(look(), Found::pending);
}

// The memo tells when the lease of a lock it read ends, the expiry its
// record names; nothing for a lock never read, nor one let go since.
TEST_P(SharedTierLockMemoTest, TheLeaseOfALockReadEndsAtItsRecordsExpiry) {
  ASSERT_TRUE(origin->entry(key).store_graph(kRemoteGraph, kRemoteFlags).ok());
  LockMemo memo;
  EXPECT_EQ(memo.lease_ends(remote->lock_key(key)), std::nullopt);
  const std::string record = record_of_another_host(45s);
  write_shared(kFrameworkLockFile, record);
  ASSERT_EQ(remote->look_all({key}, false, DownloadResult::no, memo, LookListing::each_entry).front(), Found::held_elsewhere);
  auto parsed = storage::LockRecord::parse(record);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(memo.lease_ends(remote->lock_key(key)), storage::Time(std::chrono::seconds(parsed->expires_unix)));
  fs::remove(lock_file());
  ASSERT_EQ(remote->look_all({key}, false, DownloadResult::no, memo, LookListing::each_entry).front(),
            Found::pending);
  EXPECT_EQ(memo.lease_ends(remote->lock_key(key)), std::nullopt) << "let go: no lease";
}

// A lock object written after the watcher started and less than ten seconds
// ago is presumed held without reading; older ones, and any when the watcher
// presumes nothing, are read.
TEST(LockMemoPresumption, OnlyYoungLocksWrittenSinceTheWatcherStarted) {
  using namespace std::chrono_literals;
  const auto started = std::chrono::system_clock::now();
  LockMemo memo;
  EXPECT_FALSE(memo.presumed_held(started + 1s, started + 2s));
  memo.presume_held_since(started);
  EXPECT_TRUE(memo.presumed_held(started + 1s, started + 2s));
  EXPECT_TRUE(memo.presumed_held(started, started + 9s));
  EXPECT_FALSE(memo.presumed_held(started, started + 10s)) << "ten seconds old: read";
  EXPECT_FALSE(memo.presumed_held(started - 1s, started + 2s)) << "left by a run before the watcher: read";
  EXPECT_FALSE(memo.presumed_held(started + 30s, started)) << "from far ahead of our clock: read";
}

} // namespace
} // namespace npc::cache
