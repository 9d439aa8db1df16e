// cache/explain and cache/same_graph: entries in a real directory.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/explain.hpp>
#include <npc/cache/explain_target.hpp>
#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>
#include <npc/cache/publish.hpp>
#include <npc/cache/same_graph.hpp>
#include <npc/cache/store.hpp>

#include "test_support.hpp"

namespace npc::cache {
namespace {

using Words = std::vector<std::string>;

const std::string kExplainGraph = "HloModule explain_a\n";
// The same size as kExplainGraph, other bytes: a size match that is no match.
const std::string kTwin = "HloModule explain_b\n";
const std::string kV1 = "2.14.0.1";
const std::string kV2 = "2.15.0.2";

class ExplainTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    cache.emplace(dir() / "root");
    ASSERT_TRUE(cache->ensure_root().ok());
  }
  enum class Done { no, yes };
  CacheKey add(const std::string& graph, const Words& flags, const std::string& version, Done done = Done::yes) {
    CacheKey key = make_key_for_graph(graph, flags, version);
    Entry entry = cache->entry(key);
    auto stored = entry.store_graph(graph, flags);
    EXPECT_TRUE(stored.ok()) << stored.error();
    if (done == Done::yes) {
      test::write_text(entry.neff_path(), "neff");
      test::write_text(entry.dir() / kDoneFile, "");
    }
    return key;
  }
  fs::path graph_file(const std::string& bytes) {
    fs::path path = dir() / "target.pb";
    test::write_text(path, bytes);
    return path;
  }
  Explanation explain(const std::string& bytes, const CurrentSettings& current) {
    auto x = explain_graph(cache->list(), graph_file(bytes), current);
    EXPECT_TRUE(x.ok()) << x.error();
    return x.ok() ? *x : Explanation{};
  }
  std::optional<Cache> cache;
};

TEST(DiffFlags, WordsAddedAndRemoved) {
  auto d = diff_flags({"-O1", "--auto-cast=none"}, {"--auto-cast=none", "-O2", "--verbose"});
  EXPECT_EQ(d.added, (Words{"--verbose", "-O2"}));
  EXPECT_EQ(d.removed, (Words{"-O1"}));
  EXPECT_FALSE(d.same);
  EXPECT_FALSE(d.order_only());
}

TEST(DiffFlags, OnlyTheOrderDiffers) {
  auto d = diff_flags({"-O1", "--verbose"}, {"--verbose", "-O1"});
  EXPECT_TRUE(d.added.empty());
  EXPECT_TRUE(d.removed.empty());
  EXPECT_FALSE(d.same);
  EXPECT_TRUE(d.order_only());
}

TEST(DiffFlags, RepeatedWordsCount) {
  auto d = diff_flags({"-v"}, {"-v", "-v"});
  EXPECT_EQ(d.added, (Words{"-v"}));
  EXPECT_TRUE(d.removed.empty());
}

TEST(DiffFlags, SameFlagsAreTheSameKey) {
  auto d = diff_flags({"-O1", "-v"}, {"-O1", "-v"});
  EXPECT_TRUE(d.same);
  EXPECT_FALSE(d.order_only());
  EXPECT_TRUE(diff_flags({}, {}).same);
}

TEST_F(ExplainTest, FlagsDifferUnderTheSameVersion) {
  CacheKey old_key = add(kExplainGraph, {"-O1"}, kV1);
  auto x = explain(kExplainGraph, {kV1, {"-O2"}});
  ASSERT_EQ(x.matches.size(), 1u);
  const auto& m = x.matches[0];
  EXPECT_EQ(m.entry.key, old_key);
  EXPECT_EQ(m.entry.state, EntryState::done);
  EXPECT_EQ(m.flags, (Words{"-O1"}));
  EXPECT_EQ(m.flags_diff.added, (Words{"-O2"}));
  EXPECT_EQ(m.flags_diff.removed, (Words{"-O1"}));
  EXPECT_EQ(m.same_version, true);
  EXPECT_EQ(x.verdict, Verdict::miss);
  EXPECT_FALSE(x.deciding);
  ASSERT_TRUE(x.current_key);
  EXPECT_EQ(*x.current_key, make_key_for_graph(kExplainGraph, {"-O2"}, kV1));
  EXPECT_EQ(x.graph_bytes, kExplainGraph.size());
}

TEST_F(ExplainTest, OrderOnlyDifferenceIsAMiss) {
  add(kExplainGraph, {"-O1", "-v"}, kV1);
  auto x = explain(kExplainGraph, {kV1, {"-v", "-O1"}});
  ASSERT_EQ(x.matches.size(), 1u);
  EXPECT_TRUE(x.matches[0].flags_diff.order_only());
  EXPECT_EQ(x.verdict, Verdict::miss);
}

TEST_F(ExplainTest, VersionDiffers) {
  CacheKey old_key = add(kExplainGraph, {"-O1"}, kV1);
  auto x = explain(kExplainGraph, {kV2, {"-O1"}});
  ASSERT_EQ(x.matches.size(), 1u);
  EXPECT_EQ(x.matches[0].entry.key, old_key);
  EXPECT_TRUE(x.matches[0].flags_diff.same);
  EXPECT_EQ(x.matches[0].same_version, false);
  EXPECT_EQ(x.verdict, Verdict::miss);
  EXPECT_EQ(x.current_key->compiler_version, kV2);
}

TEST_F(ExplainTest, UnknownVersionComparesFlagsOnly) {
  add(kExplainGraph, {"-O1"}, kV1);
  auto x = explain(kExplainGraph, {std::nullopt, {"-O1"}});
  ASSERT_EQ(x.matches.size(), 1u);
  EXPECT_EQ(x.matches[0].same_version, std::nullopt);
  EXPECT_FALSE(x.current_key);
  EXPECT_EQ(x.verdict, Verdict::hit);
}

TEST_F(ExplainTest, NoMatchForOtherBytesOfTheSameSize) {
  add(kTwin, {"-O1"}, kV1);
  ASSERT_EQ(kTwin.size(), kExplainGraph.size());
  auto x = explain(kExplainGraph, {kV1, {"-O1"}});
  EXPECT_TRUE(x.matches.empty());
  EXPECT_EQ(x.verdict, Verdict::miss);
}

TEST_F(ExplainTest, SeveralMatchesInKeyOrderAndTheHit) {
  CacheKey a = add(kExplainGraph, {"-O1"}, kV1);
  CacheKey b = add(kExplainGraph, {"-O2"}, kV1);
  CacheKey c = add(kExplainGraph, {"-O2"}, kV2);
  add(kTwin, {"-O2"}, kV1);
  auto x = explain(kExplainGraph, {kV1, {"-O2"}});
  ASSERT_EQ(x.matches.size(), 3u);
  std::vector<CacheKey> keys = {a, b, c};
  std::sort(keys.begin(), keys.end());
  for (std::size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(x.matches[i].entry.key, keys[i]);
  EXPECT_EQ(x.verdict, Verdict::hit);
  ASSERT_TRUE(x.deciding);
  EXPECT_EQ(x.matches[*x.deciding].entry.key, b);
  EXPECT_EQ(*x.current_key, b);
}

TEST_F(ExplainTest, PendingEntryWithTheSameSettingsIsNotAHit) {
  CacheKey key = add(kExplainGraph, {"-O1"}, kV1, Done::no);
  auto x = explain(kExplainGraph, {kV1, {"-O1"}});
  EXPECT_EQ(x.verdict, Verdict::not_done);
  ASSERT_TRUE(x.deciding);
  EXPECT_EQ(x.matches[*x.deciding].entry.key, key);
  EXPECT_EQ(x.matches[*x.deciding].entry.state, EntryState::pending);
}

// The framework's keys cannot be recomputed from the bytes: a graph named by
// its entry keeps the entry's graph part, with the current flags' part and
// the current version; a graph file alone gets the wrapper's key.
TEST_F(ExplainTest, TheCurrentKeyOfAnEntrysGraphKeepsTheFrameworksGraphPart) {
  CacheKey framework{kV1, "9993940051196728623", flags_hash({"-O1"})};
  Entry entry = cache->entry(framework);
  ASSERT_TRUE(entry.store_graph(kExplainGraph, {"-O1"}).ok());
  auto x = explain_graph(cache->list(), entry.dir() / kGraphFile, {kV2, {"-O2"}});
  ASSERT_TRUE(x.ok()) << x.error();
  ASSERT_TRUE(x->current_key);
  EXPECT_EQ(*x->current_key, (CacheKey{kV2, "9993940051196728623", flags_hash({"-O2"})}));
  EXPECT_EQ(x->current_key_source, KeySource::entry);
  auto file = explain(kExplainGraph, {kV2, {"-O2"}});
  EXPECT_EQ(*file.current_key, make_key_for_graph(kExplainGraph, {"-O2"}, kV2));
  EXPECT_EQ(file.current_key_source, KeySource::wrapper);
}

// An entry the masquerade made (its record says so) is compared with a
// neuronx-cc command line, never with NEURON_CC_FLAGS; one whose record does
// not say (every entry before the record did) as before.
TEST_F(ExplainTest, AnEntryTheMasqueradeMadeIsComparedWithTheCommandLine) {
  const Words words = {"--framework", "XLA", "-O2"};
  CacheKey masquerade = add(kExplainGraph, words, kV1);
  EntryMeta record;
  record.attempts.push_back(AttemptRecord{.attempt = 1, .outcome = "success", .wall_seconds = 1,
                                          .flags_from = FlagsOrigin::compiler_command_line});
  ASSERT_TRUE(write_entry_meta(cache->entry_dir(masquerade), record).ok());
  CacheKey older = add(kExplainGraph, {"-O1"}, kV1);
  record.attempts.back().flags_from = FlagsOrigin::neuron_cc_flags;
  ASSERT_TRUE(write_entry_meta(cache->entry_dir(older), record).ok());
  const std::string graph_hash = make_key_for_graph(kExplainGraph, {}, kV1).graph_hash;

  // No command line given: the masquerade's entry hits the same one again.
  auto x = explain(kExplainGraph, {kV1, {"-O3"}, std::nullopt, graph_hash});
  ASSERT_EQ(x.matches.size(), 2u);
  const GraphMatch& m = x.matches[0].entry.key == masquerade ? x.matches[0] : x.matches[1];
  const GraphMatch& o = x.matches[0].entry.key == masquerade ? x.matches[1] : x.matches[0];
  EXPECT_EQ(m.flags_from, FlagsOrigin::compiler_command_line);
  EXPECT_TRUE(m.flags_diff.same) << "not compared with NEURON_CC_FLAGS' -O3";
  EXPECT_TRUE(m.flags_diff.removed.empty());
  EXPECT_EQ(o.flags_from, FlagsOrigin::neuron_cc_flags);
  EXPECT_EQ(o.flags_diff.added, Words{"-O3"});
  EXPECT_EQ(x.verdict, Verdict::miss) << "NEURON_CC_FLAGS' run is judged over their entries only";
  ASSERT_TRUE(x.command_line);
  EXPECT_EQ(x.command_line->verdict, Verdict::hit);
  EXPECT_EQ(x.matches[*x.command_line->deciding].entry.key, masquerade);
  EXPECT_FALSE(x.command_line_key);

  // A command line given: its words against the entry's, and its key.
  const Words o1 = {"--framework", "XLA", "-O1"};
  x = explain(kExplainGraph, {kV1, {"-O1"}, o1, graph_hash});
  const GraphMatch& given = x.matches[0].entry.key == masquerade ? x.matches[0] : x.matches[1];
  EXPECT_EQ(given.flags_diff.added, Words{"-O1"});
  EXPECT_EQ(given.flags_diff.removed, Words{"-O2"});
  EXPECT_EQ(x.verdict, Verdict::hit) << "the older entry is NEURON_CC_FLAGS' -O1";
  EXPECT_EQ(x.command_line->verdict, Verdict::miss);
  EXPECT_EQ(x.command_line_key, make_key_for_graph(kExplainGraph, o1, kV1));

  // The graph part the masquerade would use now differs (a file the graph
  // names changed): the same command line misses.
  x = explain(kExplainGraph, {kV1, {}, std::nullopt, std::string(kGraphHashDigits, 'f')});
  const GraphMatch& changed = x.matches[0].entry.key == masquerade ? x.matches[0] : x.matches[1];
  EXPECT_TRUE(changed.named_files_changed);
  EXPECT_EQ(x.command_line->verdict, Verdict::miss);
}

// Without an entry of the masquerade or a command line, there is nothing to
// judge a command line by.
TEST_F(ExplainTest, NoCommandLineJudgedWithoutTheMasquerade) {
  add(kExplainGraph, {"-O1"}, kV1);
  auto x = explain(kExplainGraph, {kV1, {"-O1"}});
  EXPECT_FALSE(x.command_line);
  EXPECT_EQ(x.verdict, Verdict::hit);
}

TEST_F(ExplainTest, UnreadableGraphFails) {
  EXPECT_FALSE(explain_graph(cache->list(), dir() / "absent.pb", {kV1, {}}).ok());
}

TEST_F(ExplainTest, TargetIsAGraphAnEntryOrAKey) {
  CacheKey key = add(kExplainGraph, {"-O1"}, kV1);
  fs::path entry_graph = cache->entry_dir(key) / kGraphFile;
  const fs::path scratch = dir() / "scratch";
  auto target = [&](std::string_view name) -> std::optional<fs::path> {
    auto found = find_target_graph(*cache, name, scratch);
    if (!found) return std::nullopt;
    EXPECT_EQ(found->name, found->file.string()); // a directory's graphs are read in place
    return found->file;
  };
  EXPECT_EQ(target(entry_graph.string()), entry_graph);
  EXPECT_EQ(target(cache->entry_dir(key).string()), entry_graph);
  EXPECT_EQ(target(key.str()), entry_graph);
  EXPECT_EQ(target(key.module_name()), entry_graph); // as ls prints it
  EXPECT_FALSE(target("neuronxcc-9/MODULE_0+1"));
  EXPECT_FALSE(target("MODULE_0+1"));
  EXPECT_FALSE(target("not-a-key"));
  EXPECT_FALSE(target(dir().string())); // a directory without a graph
  EXPECT_FALSE(target(""));
  EXPECT_FALSE(fs::exists(scratch)); // nothing downloaded
}

TEST_F(ExplainTest, SameGraphIndexHashesOnlySameSizeEntries) {
  add(kExplainGraph, {"-O1"}, kV1);
  SameGraphIndex index(cache->list());
  auto found = index.find(graph_file("HloModule other size\n"));
  ASSERT_TRUE(found);
  EXPECT_TRUE(found->empty());
  EXPECT_FALSE(index.find(dir() / "absent.pb"));
  auto same = index.find(graph_file(kExplainGraph));
  ASSERT_TRUE(same);
  EXPECT_EQ(same->size(), 1u);
}

TEST_F(ExplainTest, CompiledGraphsSeenElsewhere) {
  CacheKey old_flags = add(kExplainGraph, {"-O1"}, kV1);
  CacheKey compiled = add(kExplainGraph, {"-O2"}, kV1);
  CacheKey fresh = add(kTwin, {"-O2"}, kV1);
  auto seen = compiled_graphs_seen_elsewhere(cache->list(), {cache->entry_dir(compiled), cache->entry_dir(fresh)});
  EXPECT_EQ(seen.graphs, 1u);
  EXPECT_EQ(seen.example, cache->entry_dir(compiled));

  auto none = compiled_graphs_seen_elsewhere(cache->list(), {cache->entry_dir(fresh)});
  EXPECT_EQ(none.graphs, 0u);
  EXPECT_FALSE(none.example);
  // Both compiled in this run: neither was there before it.
  auto both = compiled_graphs_seen_elsewhere(cache->list(), {cache->entry_dir(compiled), cache->entry_dir(old_flags)});
  EXPECT_EQ(both.graphs, 0u);
}

} // namespace
} // namespace npc::cache
