// cluster/shared_graphs: the graphs a trial names by URL, brought into the
// local mirror. Each test runs with a directory and with a real S3 server as
// the shared tier (two_tiers.hpp); tests/e2e/s3_launcher_test.cpp runs the
// launcher itself over S3.

#include <npc/cluster/shared_graphs.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>
#include <npc/storage/lock.hpp>
#include <npc/storage/local.hpp>
#include <npc/util/error.hpp>
#include <npc/util/file_lock.hpp>

#include "files.hpp"
#include "two_tiers.hpp"
#include "test_support.hpp"

namespace npc::cluster {
namespace {

using namespace std::chrono_literals;

const std::string kRoot = "s3://bucket/team";
const std::vector<std::string> kGraphsFlags = {"-O2"};

class SharedGraphsTest : public test::MirrorAndSharedTest {
protected:
  void SetUp() override {
    MirrorAndSharedTest::SetUp();
    if (HasFatalFailure()) return;
    // Three connections, as the launcher's several: take_all and
    // take_pending share the graphs out over them, a thread each.
    std::vector<std::shared_ptr<storage::Storage>> connections;
    for (int i = 0; i < 3; ++i) connections.push_back(shared_storage());
    graphs.emplace(connections, *mirror, kRoot + "/", "1.0"); // a trailing slash, as users write it sometimes
  }
  // A pending entry in the remote, as extraction leaves it.
  cache::CacheKey pending(const std::string& graph, const std::string& version = "1.0") {
    auto key = cache::make_key_for_graph(graph, kGraphsFlags, version);
    EXPECT_TRUE(origin->entry(key).store_graph(graph, kGraphsFlags).ok());
    return key;
  }
  void finish(const cache::CacheKey& key, bool success) {
    publish_result(origin->entry(key), success, success ? "neff-bytes" : "error: no\n");
  }
  static std::string url(const cache::CacheKey& key) {
    return kRoot + "/" + key.relative_path().generic_string() + "/model.hlo_module.pb";
  }
  fs::path in_mirror(const cache::CacheKey& key) const { return mirror->entry_dir(key); }

  std::optional<SharedGraphs> graphs;
};

INSTANTIATE_TEST_SUITE_P(DirectoryAndS3, SharedGraphsTest,
                         ::testing::Values(test::SharedBackend::directory, test::SharedBackend::s3),
                         test::shared_backend_name);

TEST_P(SharedGraphsTest, APendingGraphComesIntoTheMirrorPending) {
  auto key = pending("HloModule a\n");
  auto taken = graphs->take(url(key));
  ASSERT_TRUE(taken.graph) << taken.refused;
  EXPECT_EQ(*taken.graph, in_mirror(key) / "model.hlo_module.pb");
  EXPECT_EQ(test::names_in(in_mirror(key)), (std::vector<std::string>{"compile_flags.json", "model.hlo_module.pb"}));
  EXPECT_EQ(test::read_text(*taken.graph), "HloModule a\n");
  EXPECT_EQ(graphs->results_downloaded(), 0u);
}

TEST_P(SharedGraphsTest, ADoneOrFailedEntryComesWithItsResult) {
  auto done = pending("HloModule done\n");
  finish(done, true);
  auto failed = pending("HloModule failed\n");
  finish(failed, false);
  auto a = graphs->take(url(done));
  ASSERT_TRUE(a.graph) << a.refused;
  EXPECT_EQ(test::read_text(in_mirror(done) / "model.neff"), "neff-bytes");
  EXPECT_TRUE(fs::exists(in_mirror(done) / "model.done"));
  auto b = graphs->take(url(failed));
  ASSERT_TRUE(b.graph) << b.refused;
  EXPECT_EQ(test::read_text(in_mirror(failed) / "model.log"), "error: no\n");
  EXPECT_FALSE(fs::exists(in_mirror(failed) / "model.done"));
  EXPECT_EQ(graphs->results_downloaded(), 2u);
  // Taken again: already in the mirror, nothing downloaded.
  ASSERT_TRUE(graphs->take(url(done)).graph);
  EXPECT_EQ(graphs->results_downloaded(), 2u);
}

// An upload killed midway leaves the remote without the result the mirror
// has: taken again, the graph's result goes up, under the remote lock.
TEST_P(SharedGraphsTest, AResultOfTheMirrorThatTheRemoteLacksIsUploaded) {
  auto key = pending("HloModule a\n");
  cache::Entry in_the_mirror = mirror->entry(key);
  ASSERT_TRUE(in_the_mirror.store_graph("HloModule a\n", kGraphsFlags).ok());
  ASSERT_NO_FATAL_FAILURE(publish_result(in_the_mirror, true, "neff-bytes"));
  auto taken = graphs->take(url(key));
  ASSERT_TRUE(taken.graph) << taken.refused;
  EXPECT_EQ(graphs->results_uploaded(), 1u);
  EXPECT_EQ(graphs->results_downloaded(), 0u);
  EXPECT_EQ(shared_names(key.relative_path()),
            (std::vector<std::string>{"compile_flags.json", "model.done", "model.hlo_module.pb", "model.neff",
                                      "npc-entry.json"}));
  EXPECT_EQ(shared_text(key.relative_path() / "model.neff"), "neff-bytes");
  // Now the remote has it: the next look downloads nothing, uploads nothing.
  ASSERT_TRUE(graphs->take(url(key)).graph);
  EXPECT_EQ(graphs->results_uploaded(), 1u);
  EXPECT_EQ(graphs->results_downloaded(), 0u);
}

TEST_P(SharedGraphsTest, ManyAtOnceEachInItsPlace) {
  std::vector<std::string> urls;
  std::vector<cache::CacheKey> keys;
  for (int i = 0; i < 40; ++i) {
    keys.push_back(pending("HloModule g" + std::to_string(i) + "\n"));
    if (i % 4 == 0) finish(keys.back(), true);
    urls.push_back(url(keys.back()));
  }
  urls.push_back("s3://elsewhere/x");
  urls.push_back(kRoot);
  auto taken = graphs->take_all(urls);
  ASSERT_EQ(taken.size(), 42u);
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(taken[i].graph) << i << ": " << taken[i].refused;
    EXPECT_EQ(*taken[i].graph, in_mirror(keys[i]) / "model.hlo_module.pb");
    EXPECT_EQ(test::read_text(*taken[i].graph), "HloModule g" + std::to_string(i) + "\n");
    EXPECT_EQ(fs::exists(in_mirror(keys[i]) / "model.done"), i % 4 == 0) << i;
  }
  EXPECT_NE(taken[40].refused, "");
  EXPECT_FALSE(taken[41].graph);
  EXPECT_EQ(taken[41].refused, "");
  EXPECT_EQ(graphs->results_downloaded(), 10u);
}

TEST_P(SharedGraphsTest, TheFirstErrorOfManyIsThrownAndStopsTheRest) {
  std::vector<std::string> urls;
  for (int i = 0; i < 20; ++i) urls.push_back(url(pending("HloModule g" + std::to_string(i) + "\n")));
  // The mirror cannot take them: its version folder is a file.
  fs::remove_all(mirror->root() / "neuronxcc-1.0");
  test::write_text(mirror->root() / "neuronxcc-1.0", "not a folder");
  EXPECT_THROW(std::ignore = graphs->take_all(urls), EnvironmentError);
}

TEST_P(SharedGraphsTest, TheRootIsNothingToTakeAndOtherUrlsAreRefusedSayingWhy) {
  auto key = pending("HloModule a\n");
  for (const std::string& root : {kRoot, kRoot + "/"}) {
    auto taken = graphs->take(root);
    EXPECT_FALSE(taken.graph);
    EXPECT_EQ(taken.refused, "");
  }
  const std::string not_ours = "not in the shared cache s3://bucket/team (the launcher compiles into the cache "
                               "NEURON_COMPILE_CACHE_URL or --cache_dir names)";
  EXPECT_EQ(graphs->take("s3://bucket/other/" + key.relative_path().generic_string() + "/model.hlo_module.pb").refused,
            not_ours);
  EXPECT_EQ(graphs->take("s3://bucket/teamwork/x").refused, not_ours);
  EXPECT_EQ(graphs->take("s3://other-bucket/team").refused, not_ours);
  const std::string not_a_graph = "not a graph of a cache entry (<cache>/neuronxcc-<version>/MODULE_<hash>+<hash>/"
                                  "model.hlo_module.pb)";
  EXPECT_EQ(graphs->take(kRoot + "/" + key.relative_path().generic_string() + "/model.neff").refused, not_a_graph);
  EXPECT_EQ(graphs->take(kRoot + "/deeper/" + key.relative_path().generic_string() + "/model.hlo_module.pb").refused,
            not_a_graph);
  EXPECT_EQ(graphs->take(kRoot + "/neuronxcc-1.0/MODULE_zz/model.hlo_module.pb").refused, not_a_graph);
  auto other_version = pending("HloModule b\n", "2.0");
  EXPECT_EQ(graphs->take(url(other_version)).refused, "extracted for compiler version 2.0, but we compile with 1.0");
  auto absent = cache::make_key_for_graph("HloModule never stored\n", kGraphsFlags, "1.0");
  EXPECT_EQ(graphs->take(url(absent)).refused, "no such graph in s3://bucket/team");
  // Nothing of the refused ones came into the mirror, not even a folder.
  EXPECT_EQ(test::names_in(mirror->root() / "neuronxcc-1.0"), std::vector<std::string>{});
  EXPECT_FALSE(fs::exists(mirror->root() / "neuronxcc-2.0"));
}

// A lock object beside a pending graph: held elsewhere only while its
// record is in force (another host's, unexpired). The graph comes into the
// mirror pending either way, for a compile here once the lock expires.
TEST_P(SharedGraphsTest, AGraphWhoseLockIsInForceIsHeldElsewhere) {
  auto hold = [&](const cache::CacheKey& key, std::int64_t expires_in) {
    util::LockHolder holder;
    holder.pid = 4242;
    holder.host = "node-elsewhere";
    holder.boot_id = "0b0b0b0b-0000-0000-0000-000000000000";
    holder.tool = "neuron_cc_wrapper";
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    holder.start_unix = now;
    storage::LockRecord record{holder.serialize(), "token", now + expires_in};
    write_shared(key.relative_path() / "model.hlo_module.pb.lock", record.serialize());
  };
  auto held = pending("HloModule held\n");
  hold(held, 600);
  auto expired = pending("HloModule expired\n");
  hold(expired, -1);
  auto free = pending("HloModule free\n");
  auto done = pending("HloModule done and locked\n"); // a lock left beside a result
  finish(done, true);
  hold(done, 600);
  auto taken = graphs->take_all({url(held), url(expired), url(free), url(done)});
  ASSERT_EQ(taken.size(), 4u);
  for (const auto& one : taken) EXPECT_TRUE(one.graph) << one.refused;
  auto holder = graphs->held_elsewhere(in_mirror(held));
  ASSERT_TRUE(holder);
  EXPECT_EQ(holder->rfind("pid 4242 on node-elsewhere (neuron_cc_wrapper), since ", 0), 0u) << *holder;
  EXPECT_EQ(graphs->held_elsewhere(in_mirror(expired)), std::nullopt);
  EXPECT_EQ(graphs->held_elsewhere(in_mirror(free)), std::nullopt);
  EXPECT_EQ(graphs->held_elsewhere(in_mirror(done)), std::nullopt);
  // Pending in the mirror, to compile should the lock expire.
  EXPECT_EQ(test::names_in(in_mirror(held)), (std::vector<std::string>{"compile_flags.json", "model.hlo_module.pb"}));
  EXPECT_TRUE(fs::exists(in_mirror(done) / "model.done"));
  EXPECT_EQ(graphs->results_downloaded(), 1u);

  // --command compile sees it held too.
  auto other = pending("HloModule held, taken pending\n");
  hold(other, 600);
  auto graphs_now = graphs->take_pending(false);
  EXPECT_EQ(graphs_now.size(), 4u); // held, expired, free, other
  EXPECT_TRUE(graphs->held_elsewhere(in_mirror(other)));
  EXPECT_FALSE(fs::exists(in_mirror(other))); // its compile brings it, should the lock expire
  EXPECT_EQ(graphs->brought_later(in_mirror(held)), std::nullopt); // already in the mirror
}

TEST_P(SharedGraphsTest, PendingTakesEveryGraphWithoutAResultOfOurVersion) {
  auto a = pending("HloModule a\n");
  auto b = pending("HloModule b\n");
  auto done = pending("HloModule done\n");
  finish(done, true);
  auto failed = pending("HloModule failed\n");
  finish(failed, false);
  std::ignore = pending("HloModule other\n", "2.0");
  write_shared(fs::path("neuronxcc-1.0") / "not-an-entry" / "x", "x");
  auto sorted = [](std::vector<fs::path> paths) {
    std::sort(paths.begin(), paths.end());
    return paths;
  };
  EXPECT_EQ(sorted(graphs->take_pending(false)), sorted({in_mirror(a), in_mirror(b)}));
  EXPECT_EQ(sorted(graphs->take_pending(true)), sorted({in_mirror(a), in_mirror(b), in_mirror(failed)}));
  EXPECT_FALSE(fs::exists(in_mirror(done)));
  // Only pending there: left there for its compile to bring, its size known.
  EXPECT_FALSE(fs::exists(in_mirror(a)));
  EXPECT_FALSE(fs::exists(in_mirror(b)));
  EXPECT_EQ(graphs->brought_later(in_mirror(a)), std::string("HloModule a\n").size());
  EXPECT_EQ(graphs->brought_later(in_mirror(failed)), std::nullopt);
  // The failure came with its log (compiled again if the run retries failures).
  EXPECT_EQ(graphs->results_downloaded(), 1u);
  EXPECT_EQ(test::read_text(in_mirror(failed) / "model.log"), "error: no\n");
}

// take_pending (--command compile, on every host of a cluster at once)
// presumes held, unread, a lock written since the launcher started: another
// host took the graph a moment ago. Here its record has expired, which a
// read would find stale; a lock older than the launcher is read, and one
// found stale is not held (the directory backend can date it back).
TEST_P(SharedGraphsTest, TakePendingPresumesALockWrittenSinceItStartedHeld) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const storage::LockRecord expired{"someone", "token", now - 1};
  auto young = pending("HloModule young\n");
  write_shared(young.relative_path() / "model.hlo_module.pb.lock", expired.serialize());
  std::optional<cache::CacheKey> old;
  if (GetParam() == test::SharedBackend::directory) {
    old = pending("HloModule old\n");
    const fs::path lock = dir() / "shared" / old->relative_path() / "model.hlo_module.pb.lock";
    write_shared(old->relative_path() / "model.hlo_module.pb.lock", expired.serialize());
    fs::last_write_time(lock, fs::last_write_time(lock) - std::chrono::hours(1));
  }
  EXPECT_EQ(graphs->take_pending(false).size(), old ? 2u : 1u);
  auto holder = graphs->held_elsewhere(in_mirror(young));
  ASSERT_TRUE(holder);
  EXPECT_NE(holder->find(" ago (presumed held, not read)"), std::string::npos) << *holder;
  EXPECT_EQ(holder->rfind("a lock written ", 0), 0u) << *holder;
  if (old) {
    EXPECT_EQ(graphs->held_elsewhere(in_mirror(*old)), std::nullopt);
  }
}

// take_pending reads the flags of the graphs it leaves in the shared tier
// once per flags hash, for their takes; flags that do not hash to their
// key's (damaged, or a key of another scheme) are not kept.
TEST_P(SharedGraphsTest, TakePendingReadsTheFlagsOfEachHashOnce) {
  auto a = pending("HloModule a\n");
  auto b = pending("HloModule b\n");
  ASSERT_EQ(a.flags_hash, b.flags_hash);
  const std::vector<std::string> other_flags = {"-O1", "--lnc=2"};
  auto c = cache::make_key_for_graph("HloModule c\n", other_flags, "1.0");
  ASSERT_TRUE(origin->entry(c).store_graph("HloModule c\n", other_flags).ok());
  write_shared(c.relative_path() / "compile_flags.json", "[\"-O3\"]\n"); // not what c's key names
  EXPECT_EQ(graphs->take_pending(false).size(), 3u);
  EXPECT_EQ(graphs->flags_by_hash(),
            (std::map<std::string, std::string>{{a.flags_hash, cache::serialize_compile_flags(kGraphsFlags)}}));
}

} // namespace
} // namespace npc::cluster
