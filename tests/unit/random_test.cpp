// util/random: numbers in the asked range, covering it, and different from
// call to call (what temporary names and back-off jitter rely on).

#include <npc/util/random.hpp>

#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace npc::util {
namespace {

TEST(Random, BetweenStaysInItsRangeAndCoversIt) {
  std::vector<int> seen(11, 0);
  for (int i = 0; i < 5000; ++i) {
    auto v = random_between(10, 20);
    ASSERT_GE(v, 10);
    ASSERT_LE(v, 20);
    ++seen[static_cast<std::size_t>(v - 10)];
  }
  for (int count : seen) EXPECT_GT(count, 250); // about 454 each
}

TEST(Random, AnEmptyOrReversedRangeGivesItsLowEnd) {
  EXPECT_EQ(random_between(7, 7), 7);
  EXPECT_EQ(random_between(9, 3), 9);
}

TEST(Random, TheWholeRangeIsAllowed) {
  auto v = random_between(INT64_MIN, INT64_MAX);
  (void)v; // any value; must not divide by zero
  EXPECT_GE(random_between(INT64_MIN, INT64_MIN + 1), INT64_MIN);
}

TEST(Random, ValuesDoNotRepeat) {
  std::set<std::uint64_t> values;
  for (int i = 0; i < 1000; ++i) values.insert(random_u64());
  EXPECT_EQ(values.size(), 1000u);
}

} // namespace
} // namespace npc::util
