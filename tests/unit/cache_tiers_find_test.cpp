// compile/cache_tiers: the lookup order (CacheTiers::find) on its own, with a
// `take` that records what it was offered: the directory first, the earlier
// release's key, the shared tier (on the test run's RADOS Gateway), the
// read-only secondary cache last and only when asked; an entry `take`
// refuses passes the question on.

#include <npc/compile/cache_tiers.hpp>

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/key.hpp>
#include <npc/util/sha256.hpp>

#include "s3_environment_test.hpp"
#include "temp_dir.hpp"
#include "two_tiers.hpp"

namespace npc::compile {
namespace {

const std::string kFindGraph = "HloModule cache_tiers_find_test\n";

// Publishes a done entry of `key` in `in`, its NEFF `neff`.
void publish_done(const cache::Cache& in, const cache::CacheKey& key, const std::string& neff,
                  const fs::path& scratch) {
  const cache::Entry entry = in.entry(key);
  ASSERT_TRUE(entry.store_graph(kFindGraph, {}).ok());
  test::publish_test_result(entry, true, neff, scratch);
}

// What find() offered `take`, and which it took.
struct Offers {
  std::vector<fs::path> offered;
  std::vector<fs::path> refused; // offered and not taken
  std::function<bool(const cache::Entry&)> take() {
    return [this](const cache::Entry& entry) {
      offered.push_back(entry.dir());
      const bool refuse = std::find(refused.begin(), refused.end(), entry.dir()) != refused.end();
      return !refuse;
    };
  }
};

class CacheTiersFindTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    tiers.emplace(dir() / "cache", std::nullopt);
    ASSERT_TRUE(directory().ensure_root().ok());
    key = cache::make_key(util::sha256_hex(kFindGraph), {}, "2.0.0");
    legacy = cache::make_key(util::sha256_hex(kFindGraph), {"--legacy"}, "2.0.0");
    secondary.emplace(dir() / "secondary");
    ASSERT_TRUE(secondary->ensure_root().ok());
  }

  cache::Cache& directory() { return tiers->directory(); }

  // find() for `key`, the legacy key and the secondary cache named; how
  // often the secondary's root was asked for goes into secondary_asked.
  std::optional<Found> find(Offers& offers) {
    CacheTiers cache_tiers(*tiers, CacheTiers::Unusable::fail);
    Lookup lookup{.key = key,
                  .legacy_key = legacy,
                  .secondary_root =
                      [this] {
                        ++secondary_asked;
                        return std::optional<fs::path>(secondary->root());
                      },
                  .lock_wait = std::chrono::seconds(5)};
    return cache_tiers.find(lookup, offers.take());
  }

  std::optional<cache::Tiers> tiers;
  std::optional<cache::Cache> secondary;
  cache::CacheKey key;
  cache::CacheKey legacy;
  int secondary_asked = 0;
};

TEST_F(CacheTiersFindTest, TheDirectorysEntryIsTakenFirstAndNothingElseIsAsked) {
  publish_done(directory(), key, "NEFF here", dir() / "r1");
  publish_done(directory(), legacy, "NEFF of the older key", dir() / "r2");
  publish_done(*secondary, key, "NEFF in the secondary", dir() / "r3");
  Offers offers;
  auto found = find(offers);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->entry.dir(), directory().entry_dir(key));
  EXPECT_FALSE(found->brought_in);
  EXPECT_EQ(offers.offered, std::vector<fs::path>{directory().entry_dir(key)});
  EXPECT_EQ(secondary_asked, 0);
}

TEST_F(CacheTiersFindTest, AnEntryRefusedPassesTheQuestionToTheEarlierReleasesKey) {
  publish_done(directory(), key, "NEFF that fails its check", dir() / "r1");
  publish_done(directory(), legacy, "NEFF of the older key", dir() / "r2");
  Offers offers;
  offers.refused = {directory().entry_dir(key)};
  auto found = find(offers);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->entry.dir(), directory().entry_dir(legacy));
  EXPECT_FALSE(found->brought_in);
  EXPECT_EQ(offers.offered, (std::vector<fs::path>{directory().entry_dir(key), directory().entry_dir(legacy)}));
  EXPECT_EQ(secondary_asked, 0);
}

TEST_F(CacheTiersFindTest, TheSecondarysEntryIsBroughtIntoTheDirectoryLast) {
  publish_done(*secondary, key, "NEFF in the secondary", dir() / "r1");
  Offers offers;
  auto found = find(offers);
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->brought_in);
  EXPECT_EQ(found->entry.dir(), directory().entry_dir(key));
  EXPECT_TRUE(directory().entry(key).looks_done());
  EXPECT_EQ(test::read_text(directory().entry(key).neff_path()), "NEFF in the secondary");
  EXPECT_EQ(offers.offered, std::vector<fs::path>{directory().entry_dir(key)});
  EXPECT_EQ(secondary_asked, 1);
}

TEST_F(CacheTiersFindTest, NowhereOrEveryEntryRefusedIsAMiss) {
  Offers none;
  EXPECT_FALSE(find(none));
  EXPECT_TRUE(none.offered.empty());
  EXPECT_EQ(secondary_asked, 1);
  EXPECT_FALSE(directory().entry(key).looks_done());

  publish_done(directory(), key, "NEFF that fails its check", dir() / "r1");
  Offers refusing;
  refusing.refused = {directory().entry_dir(key)};
  EXPECT_FALSE(find(refusing));
  EXPECT_EQ(refusing.offered, std::vector<fs::path>{directory().entry_dir(key)});
  EXPECT_EQ(secondary_asked, 2); // and the secondary, which lacks it
}

class CacheTiersFindS3Test : public test::S3EnvironmentTest {};

// A cache named by URL: the mirror misses, the shared tier's result is
// brought into it and offered there; the secondary is not asked.
TEST_F(CacheTiersFindS3Test, TheSharedTiersResultIsBroughtIntoTheMirrorBeforeTheSecondaryIsAsked) {
  cache::Tiers tiers(dir() / "mirror", std::string("s3://") + test::kS3TestBucket + "/team");
  ASSERT_TRUE(tiers.directory().ensure_root().ok());
  const cache::CacheKey key = cache::make_key(util::sha256_hex(kFindGraph), {}, "2.0.0");
  publish_done(tiers.common(1), key, "NEFF in the shared tier", dir() / "r1");

  CacheTiers cache_tiers(tiers, CacheTiers::Unusable::fail);
  int secondary_asked = 0;
  Lookup lookup{.key = key,
                .legacy_key = std::nullopt,
                .secondary_root =
                    [&] {
                      ++secondary_asked;
                      return std::optional<fs::path>();
                    },
                .lock_wait = std::chrono::seconds(5)};
  Offers offers;
  auto found = cache_tiers.find(lookup, offers.take());
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->brought_in);
  EXPECT_EQ(found->entry.dir(), tiers.directory().entry_dir(key));
  EXPECT_EQ(test::read_text(tiers.directory().entry(key).neff_path()), "NEFF in the shared tier");
  EXPECT_EQ(offers.offered, std::vector<fs::path>{tiers.directory().entry_dir(key)});
  EXPECT_EQ(secondary_asked, 0);
}

} // namespace
} // namespace npc::compile
