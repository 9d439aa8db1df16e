// cluster/share_owner: which launcher of a roll owns a graph, the same in
// every launcher that sees the same roll, spread evenly, and moved only
// from a launcher that leaves.

#include <npc/cluster/share_owner.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace npc::cluster {
namespace {

std::vector<std::string> launchers(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back("host-" + std::to_string(i) + ".1." + std::to_string(1000 + i));
  return names;
}

std::string graph(int i) { return "MODULE_" + std::to_string(7919 * i) + "+4fe3a1c2"; }

std::string owner(const std::string& key, const std::vector<std::string>& members) {
  return members[share_owner(key, members)];
}

// The order a launcher lists the roll in does not change any owner.
TEST(ShareOwner, TheOwnerIsTheSameWhateverTheRollsOrder) {
  auto members = launchers(7);
  auto reversed = members;
  std::reverse(reversed.begin(), reversed.end());
  for (int i = 0; i < 500; ++i) EXPECT_EQ(owner(graph(i), members), owner(graph(i), reversed)) << graph(i);
}

// Every build and process ranks alike: launchers of different builds of
// this release on one cache agree. The values are this hash's, written once.
TEST(ShareOwner, TheHashIsFixed) {
  const std::vector<std::string> members = {"a", "b", "c", "d"};
  std::vector<std::size_t> owners;
  for (int i = 1; i <= 8; ++i) owners.push_back(share_owner("MODULE_" + std::to_string(i) + "+abc", members));
  EXPECT_EQ(owners, (std::vector<std::size_t>{1, 1, 1, 3, 3, 3, 3, 0}));
}

// 16 launchers, 3,200 graphs: each owns close to a 16th.
TEST(ShareOwner, TheSharesAreEven) {
  auto members = launchers(16);
  std::map<std::string, int> owned;
  for (int i = 0; i < 3200; ++i) ++owned[owner(graph(i), members)];
  ASSERT_EQ(owned.size(), 16u);
  for (const auto& [name, n] : owned) {
    EXPECT_GT(n, 150) << name;
    EXPECT_LT(n, 250) << name;
  }
}

// A launcher that leaves moves only its own graphs; one that joins takes
// only from the others, about its share.
TEST(ShareOwner, ALauncherLeavingMovesOnlyItsOwnGraphs) {
  auto members = launchers(8);
  auto without = members;
  without.erase(without.begin() + 3);
  int moved_in = 0;
  for (int i = 0; i < 2000; ++i) {
    const std::string before = owner(graph(i), members);
    const std::string after = owner(graph(i), without);
    if (before != members[3]) EXPECT_EQ(before, after) << graph(i);
    else ++moved_in;
  }
  EXPECT_GT(moved_in, 150);
  EXPECT_LT(moved_in, 350);
}

TEST(ShareOwner, OneLauncherOwnsEverything) {
  EXPECT_EQ(share_owner("MODULE_1+abc", {"only"}), 0u);
  EXPECT_EQ(share_owner("MODULE_1+abc", {}), 0u);
}

} // namespace
} // namespace npc::cluster
