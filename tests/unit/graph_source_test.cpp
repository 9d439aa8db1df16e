// launcher/graph_source: where the launcher's graphs come from, a cache
// directory or a cache named by URL (S3, on the test run's RADOS Gateway)
// through its mirror. The run's phases never ask which; these tests do.

#include <npc/launcher/graph_source.hpp>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/key.hpp>
#include <npc/util/error.hpp>

#include "files.hpp"
#include "s3_environment_test.hpp"
#include "temp_dir.hpp"

namespace npc::launcher {
namespace {

constexpr const char* kSourceVersion = "2.0.0";

class GraphSourceTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    tiers.emplace(dir() / "cache", std::nullopt);
    cache = &tiers->directory();
    ASSERT_TRUE(cache->ensure_root().ok());
  }
  // A graph stored as a pending entry of the directory, as an extraction leaves it.
  fs::path pending_graph(const std::string& text) {
    const cache::Entry entry = cache->entry(cache::make_key_for_graph(text, {}, kSourceVersion));
    EXPECT_TRUE(entry.store_graph(text, {}).ok());
    return entry.graph_path();
  }
  std::optional<cache::Tiers> tiers;
  cache::Cache* cache = nullptr; // the tiers' directory
};

TEST_F(GraphSourceTest, ADirectoryCacheCollectsPathsAndRefusesAGraphOfASharedCache) {
  GraphSource source(*tiers, kSourceVersion);
  EXPECT_FALSE(source.named_by_url());
  const fs::path graph = pending_graph("HloModule a\n");
  const std::string url = "s3://bucket/team/neuronxcc-2.0.0/MODULE_1+2/model.hlo_module.pb";
  EXPECT_FALSE(source.brings(graph.string()));
  EXPECT_FALSE(source.brings(url)) << "a URL is a graph to bring only into a cache named by one";

  Collector collector(cache->root(), kSourceVersion);
  source.collect(collector, {{graph.string(), "the trial's output"}, {url, "the trial's output"}});
  ASSERT_EQ(collector.entries().size(), 1u);
  EXPECT_EQ(collector.entries().front(), graph.parent_path());
  ASSERT_EQ(collector.refused().size(), 1u);
  EXPECT_NE(collector.refused().front().find(url), std::string::npos) << collector.refused().front();
  EXPECT_NE(collector.refused().front().find("set NEURON_COMPILE_CACHE_URL to that cache"), std::string::npos)
      << collector.refused().front();
}

TEST_F(GraphSourceTest, ADirectoryCacheHasNothingHeldElsewhereAndNoLookForIt) {
  GraphSource source(*tiers, kSourceVersion);
  const fs::path entry = pending_graph("HloModule a\n").parent_path();
  EXPECT_FALSE(source.held_elsewhere(entry));
  EXPECT_FALSE(source.graph_bytes_later(entry));
  EXPECT_EQ(source.held_look(false, cache::DownloadResult::yes), nullptr);
  Collector collector(cache->root(), kSourceVersion);
  source.collect_shared_pending(collector, true);
  EXPECT_TRUE(collector.entries().empty()) << "the directory's own pending graphs are listed by the caller";
  // What the launchers of a cluster leave for each other goes where every
  // host sees it: here, the directory itself.
  EXPECT_EQ(source.open_common_storage(), cache->storage());
}

// The same on S3, found as users' programs find it (s3_environment_test.hpp).
class GraphSourceS3Test : public test::S3EnvironmentTest {
protected:
  void SetUp() override {
    S3EnvironmentTest::SetUp();
    ASSERT_TRUE(cache::Cache(dir() / "mirror").ensure_root().ok());
    settings.cache_root = dir() / "mirror";
  }
  config::Settings settings;
};

TEST_F(GraphSourceS3Test, ACacheNamedByUrlBringsItsUrlsAndIsSeenByEveryHost) {
  settings.shared_cache_url = std::string("s3://") + test::kS3TestBucket + "/team";
  const cache::Tiers tiers(settings);
  GraphSource source(tiers, kSourceVersion);
  EXPECT_TRUE(source.named_by_url());
  EXPECT_TRUE(source.brings(*settings.shared_cache_url + "/neuronxcc-2.0.0/MODULE_1+2/model.hlo_module.pb"));
  EXPECT_FALSE(source.brings((dir() / "mirror" / "model.hlo_module.pb").string()));
  EXPECT_NE(source.held_look(false, cache::DownloadResult::no), nullptr);
  auto common = source.open_common_storage();
  ASSERT_NE(common, nullptr);
  EXPECT_NE(common, tiers.directory().storage()) << "the shared tier, not this host's mirror";
}

TEST_F(GraphSourceS3Test, ABucketThatIsNotThereIsFoundBeforeAnythingRuns) {
  settings.shared_cache_url = "s3://no-such-bucket-here/team";
  try {
    const cache::Tiers tiers(settings);
    GraphSource source(tiers, kSourceVersion);
    FAIL() << "a cache in a bucket that does not exist was taken";
  } catch (const EnvironmentError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the cache s3://no-such-bucket-here/team cannot be used"), std::string::npos) << what;
    EXPECT_NE(what.find("create it, or name an existing one"), std::string::npos) << what;
  }
}

} // namespace
} // namespace npc::launcher
