// launcher/held_summary: graphs held by others said in one line, counted by
// holder, however many they are.

#include <npc/launcher/held_summary.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace npc::launcher {
namespace {

HeldGraph held(const std::string& graph, const std::string& holder) {
  return {graph, holder, holder + " (the lock of " + graph + ")"};
}

// Those holding the most first, each with a few of its graphs; past the
// third, the holders and their graphs are counted.
TEST(HeldSummary, TheGraphsAreCountedByHolderMostFirstAFewNamed) {
  std::vector<HeldGraph> graphs = {held("MODULE_1", "pid 12 on a"), held("MODULE_2", "pid 13 on b"),
                                   held("MODULE_3", "pid 12 on a"), held("MODULE_4", "pid 14 on c"),
                                   held("MODULE_5", "pid 12 on a"), held("MODULE_6", "pid 13 on b"),
                                   held("MODULE_7", "pid 15 on d"), held("MODULE_8", "pid 16 on e")};
  EXPECT_EQ(held_by_holder(graphs),
            "8 graphs: 3 held by pid 12 on a (MODULE_1, MODULE_3 and 1 more); 2 held by pid 13 on b (MODULE_2, "
            "MODULE_6); 1 held by pid 14 on c (MODULE_4); and 2 more held by 2 other holders");
  graphs.pop_back();
  EXPECT_EQ(held_by_holder(graphs),
            "7 graphs: 3 held by pid 12 on a (MODULE_1, MODULE_3 and 1 more); 2 held by pid 13 on b (MODULE_2, "
            "MODULE_6); 1 held by pid 14 on c (MODULE_4); and 1 more held by 1 other holder");
}

class TellHeld : public ::testing::Test {
protected:
  void SetUp() override {
    out = std::tmpfile();
    ASSERT_NE(out, nullptr);
  }
  void TearDown() override { std::fclose(out); }
  std::string said() {
    std::fflush(out);
    std::rewind(out);
    std::string text;
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, out)) > 0;) text.append(buffer, n);
    return text;
  }
  void tell(const std::vector<HeldGraph>& graphs) {
    ProgressDisplay progress(out, false, false);
    tell_held(progress, graphs, [](const HeldGraph& g) { return "waiting for " + g.graph + ", held by " + g.described; },
              "waiting for ");
  }
  std::FILE* out = nullptr;
};

// One graph keeps its own line, naming its holder's lock.
TEST_F(TellHeld, OneGraphIsSaidByName) {
  tell({held("MODULE_1", "pid 12 on a")});
  EXPECT_EQ(said(), "neuron_parallel_compile: waiting for MODULE_1, held by pid 12 on a (the lock of MODULE_1)\n");
}

// A thousand are one line, not a thousand.
TEST_F(TellHeld, AThousandGraphsAreOneLine) {
  std::vector<HeldGraph> graphs;
  for (int i = 0; i < 1000; ++i) graphs.push_back(held("MODULE_" + std::to_string(i), "pid " + std::to_string(i % 16)));
  tell(graphs);
  EXPECT_EQ(said(), "neuron_parallel_compile: waiting for 1000 graphs: 63 held by pid 0 (MODULE_0, MODULE_16 and 61 "
                    "more); 63 held by pid 1 (MODULE_1, MODULE_17 and 61 more); 63 held by pid 2 (MODULE_2, MODULE_18 "
                    "and 61 more); and 811 more held by 13 other holders\n");
}

TEST_F(TellHeld, NoGraphIsNoLine) {
  tell({});
  EXPECT_EQ(said(), "");
}

} // namespace
} // namespace npc::launcher
