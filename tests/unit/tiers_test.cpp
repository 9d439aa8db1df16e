// cache/tiers: what a cache is made of, as the settings name it. A directory
// cache is its own common cache and opens nothing; a cache named by URL has
// the shared store as its common cache (on the test run's RADOS Gateway),
// the directory as its mirror, and opens its connections once.

#include <npc/cache/tiers.hpp>

#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "s3_environment_test.hpp"
#include "temp_dir.hpp"

namespace npc::cache {
namespace {

class TiersTest : public test::TempDirTest {};

TEST_F(TiersTest, ADirectoryCacheIsItsOwnCommonCacheAndConnectsToNothing) {
  Tiers tiers(dir() / "cache", std::nullopt);
  EXPECT_FALSE(tiers.shared());
  EXPECT_FALSE(tiers.shared_url());
  EXPECT_EQ(tiers.directory().root(), dir() / "cache");
  EXPECT_TRUE(tiers.connect(4).empty());
  EXPECT_TRUE(tiers.common_connections(8).empty());
  EXPECT_EQ(&tiers.common(8), &tiers.directory());
  EXPECT_EQ(tiers.copies(8), std::vector<const Cache*>{&tiers.directory()});
  EXPECT_TRUE(tiers.worker_arguments().empty());
}

TEST_F(TiersTest, TheSettingsNameTheDirectoryAndTheStoreAndNothingIsOpenedYet) {
  config::Settings settings;
  settings.cache_root = dir() / "mirror";
  // A bucket name S3 refuses: opening the store throws at once, so what
  // does not throw here opened nothing.
  settings.shared_cache_url = "s3://b/team";
  Tiers tiers(settings);
  EXPECT_TRUE(tiers.shared());
  EXPECT_EQ(tiers.shared_url(), settings.shared_cache_url);
  EXPECT_EQ(tiers.directory().root(), dir() / "mirror");
  EXPECT_TRUE(tiers.directory().is_directory());
  EXPECT_EQ(tiers.worker_arguments(), (std::vector<std::string>{"--shared-cache", "s3://b/team"}));
  EXPECT_ANY_THROW(std::ignore = tiers.connect());
  EXPECT_ANY_THROW(std::ignore = tiers.common(1));
}

class TiersS3Test : public test::S3EnvironmentTest {};

TEST_F(TiersS3Test, ACacheNamedByUrlHasTheStoreInCommonAndTheMirrorAfterIt) {
  config::Settings settings;
  settings.cache_root = dir() / "mirror";
  settings.shared_cache_url = std::string("s3://") + test::kS3TestBucket + "/team";
  Tiers tiers(settings);

  const Cache& common = tiers.common(3);
  EXPECT_FALSE(common.is_directory());
  EXPECT_EQ(common.describe(), *settings.shared_cache_url);
  EXPECT_EQ(tiers.copies(3), (std::vector<const Cache*>{&common, &tiers.directory()}));

  // Opened once: a later call with another count gets the same connections.
  const auto opened = tiers.common_connections(3);
  ASSERT_EQ(opened.size(), 3u);
  EXPECT_EQ(tiers.common_connections(5), opened);
  EXPECT_EQ(&tiers.common(5), &common);

  // A connection of its own reaches the same store.
  const auto own = tiers.connect(2);
  ASSERT_EQ(own.size(), 2u);
  EXPECT_NE(own.front(), opened.front());
  ASSERT_TRUE(own.front()->write("probe", "written through its own connection", storage::IfPresent::replace).ok());
  auto read = common.storage()->read("probe", 1024);
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(*read, "written through its own connection");
}

// Whether the gateway honours create-only PUTs is learned over one
// connection and known on every connection the same Tiers opened, before or
// after (a launcher's probe learns it, its transfer threads use it); another
// Tiers (another program) learns for itself.
TEST_F(TiersS3Test, WhatOneConnectionLearnsEveryConnectionOfTheTiersKnows) {
  Tiers tiers(dir() / "mirror", std::string("s3://") + test::kS3TestBucket + "/team");
  const auto before = tiers.connect(2);
  const auto common = tiers.common_connections(2);
  for (const auto& connection : before) EXPECT_FALSE(connection->exclusive_create_is_exact());
  auto probe = before.front()->probe();
  ASSERT_EQ(probe.reach, storage::Reach::usable) << probe.detail;
  ASSERT_TRUE(before.front()->exclusive_create_is_exact()) << "the RADOS Gateway honours If-None-Match";
  for (const auto& connection : before) EXPECT_TRUE(connection->exclusive_create_is_exact());
  for (const auto& connection : common) EXPECT_TRUE(connection->exclusive_create_is_exact());
  for (const auto& connection : tiers.connect(3)) EXPECT_TRUE(connection->exclusive_create_is_exact());

  Tiers other(dir() / "other-mirror", std::string("s3://") + test::kS3TestBucket + "/team");
  EXPECT_FALSE(other.connect().front()->exclusive_create_is_exact());
}

} // namespace
} // namespace npc::cache
