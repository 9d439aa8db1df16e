// launcher/collect: which reported graph paths are accepted for compiling.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/launcher/collect.hpp>

#include "test_support.hpp"

namespace npc::launcher {
namespace {

const std::string kEntry = "MODULE_0123456789abcdef0123+89abcdef";

class CollectTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    // Canonical, so expected paths compare equal whatever links lie above it.
    base = fs::canonical(dir());
    root = base / "cache";
    entry = root / "neuronxcc-2.0" / kEntry;
    graph = entry / "model.hlo_module.pb";
    test::write_text(graph, "graph");
  }

  // The only refusal, which must mention `reason`; nothing was accepted.
  void expect_refused(const Collector& c, const std::string& path, const std::string& reason) {
    EXPECT_TRUE(c.entries().empty());
    ASSERT_EQ(c.refused().size(), 1U);
    const std::string& line = c.refused()[0];
    EXPECT_NE(line.find(path), std::string::npos) << line;
    EXPECT_NE(line.find(reason), std::string::npos) << line;
    EXPECT_NE(line.find("(from log)"), std::string::npos) << line;
  }

  fs::path base, root, entry, graph;
};

TEST_F(CollectTest, AcceptsAGraphInsideTheCache) {
  Collector c(root, "2.0");
  c.add_graph_path(graph.string(), "log");
  EXPECT_EQ(c.entries(), std::vector<fs::path>{entry});
  EXPECT_TRUE(c.refused().empty());
}

TEST_F(CollectTest, DeduplicatesTheSameEntry) {
  Collector c(root, "2.0");
  c.add_graph_path(graph.string(), "log");
  c.add_graph_path(graph.string(), "output");
  c.add_graph_path((root / "neuronxcc-2.0" / "." / kEntry / "model.hlo_module.pb").string(), "log");
  c.add_graph_path("  " + graph.string() + "\n", "log");
  c.add_entry_dir(entry);
  EXPECT_EQ(c.entries(), std::vector<fs::path>{entry});
  EXPECT_TRUE(c.refused().empty());
}

TEST_F(CollectTest, KeepsTheOrderOfFirstSight) {
  fs::path second = root / "neuronxcc-2.0" / "MODULE_aa+bb";
  test::write_text(second / "model.hlo_module.pb", "g2");
  Collector c(root, "2.0");
  c.add_graph_path((second / "model.hlo_module.pb").string(), "log");
  c.add_graph_path(graph.string(), "log");
  c.add_graph_path((second / "model.hlo_module.pb").string(), "log");
  EXPECT_EQ(c.entries(), (std::vector<fs::path>{second, entry}));
}

TEST_F(CollectTest, CacheRootBehindASymlink) {
  fs::create_directory_symlink(root, base / "link");
  Collector c(base / "link", "2.0");
  c.add_graph_path((base / "link" / "neuronxcc-2.0" / kEntry / "model.hlo_module.pb").string(), "log");
  c.add_graph_path(graph.string(), "output");
  EXPECT_EQ(c.entries(), std::vector<fs::path>{entry});
  EXPECT_TRUE(c.refused().empty());
}

TEST_F(CollectTest, RefusesARelativePath) {
  fs::path relative = fs::path("cache") / "neuronxcc-2.0" / kEntry / "model.hlo_module.pb";
  Collector c(root, "2.0");
  c.add_graph_path(relative.string(), "log");
  expect_refused(c, relative.string(), "not an absolute path");
}

TEST_F(CollectTest, RefusesAPathOutsideTheCache) {
  fs::path outside = base / "elsewhere" / "neuronxcc-2.0" / kEntry / "model.hlo_module.pb";
  test::write_text(outside, "graph");
  Collector c(root, "2.0");
  c.add_graph_path(outside.string(), "log");
  expect_refused(c, outside.string(), "outside the cache");
}

TEST_F(CollectTest, RefusesADirectoryThatMerelyStartsLikeTheRoot) {
  fs::path lookalike = base / "cache2" / "neuronxcc-2.0" / kEntry / "model.hlo_module.pb";
  test::write_text(lookalike, "graph");
  Collector c(root, "2.0");
  c.add_graph_path(lookalike.string(), "log");
  expect_refused(c, lookalike.string(), "outside the cache");
}

TEST_F(CollectTest, RefusesDotDotEscapes) {
  fs::path outside = base / "elsewhere" / "neuronxcc-2.0" / kEntry / "model.hlo_module.pb";
  test::write_text(outside, "graph");
  std::string escape = (root / "neuronxcc-2.0" / ".." / ".." / "elsewhere" / "neuronxcc-2.0" / kEntry /
                        "model.hlo_module.pb")
                           .string();
  Collector c(root, "2.0");
  c.add_graph_path(escape, "log");
  expect_refused(c, escape, "outside the cache");
}

TEST_F(CollectTest, RefusesASymlinkedGraphPointingOutside) {
  fs::path outside = base / "elsewhere" / "model.hlo_module.pb";
  test::write_text(outside, "graph");
  fs::path link_entry = root / "neuronxcc-2.0" / "MODULE_aa+bb";
  fs::create_directories(link_entry);
  fs::create_symlink(outside, link_entry / "model.hlo_module.pb");
  Collector c(root, "2.0");
  c.add_graph_path((link_entry / "model.hlo_module.pb").string(), "log");
  expect_refused(c, (link_entry / "model.hlo_module.pb").string(), "outside the cache");
}

TEST_F(CollectTest, RefusesASymlinkedEntryPointingOutside) {
  fs::path outside = base / "elsewhere" / "MODULE_cc+dd";
  test::write_text(outside / "model.hlo_module.pb", "graph");
  fs::create_directory_symlink(outside, root / "neuronxcc-2.0" / "MODULE_cc+dd");
  std::string path = (root / "neuronxcc-2.0" / "MODULE_cc+dd" / "model.hlo_module.pb").string();
  Collector c(root, "2.0");
  c.add_graph_path(path, "log");
  expect_refused(c, path, "outside the cache");
}

// A missing folder and ".." before the link: the path is resolved only up to
// the missing part at first, and the link after it must still be seen.
TEST_F(CollectTest, RefusesASymlinkedEntryReachedThroughAMissingFolderAndDotDot) {
  fs::path outside = base / "elsewhere" / "MODULE_cc+dd";
  test::write_text(outside / "model.hlo_module.pb", "graph");
  fs::create_directory_symlink(outside, root / "neuronxcc-2.0" / "MODULE_cc+dd");
  std::string path = (root / "no-such-folder" / ".." / "neuronxcc-2.0" / "MODULE_cc+dd" / "model.hlo_module.pb").string();
  Collector c(root, "2.0");
  c.add_graph_path(path, "log");
  expect_refused(c, path, "outside the cache");
  EXPECT_TRUE(c.entries().empty());
}

TEST_F(CollectTest, RefusesTheWrongFileName) {
  test::write_text(entry / "model.neff", "neff");
  Collector c(root, "2.0");
  c.add_graph_path((entry / "model.neff").string(), "log");
  expect_refused(c, (entry / "model.neff").string(), "not a model.hlo_module.pb file");
}

TEST_F(CollectTest, RefusesAGraphOutsideAnEntryDirectory) {
  test::write_text(root / "model.hlo_module.pb", "graph");
  test::write_text(entry / "sub" / "model.hlo_module.pb", "graph");
  Collector a(root, "2.0");
  a.add_graph_path((root / "model.hlo_module.pb").string(), "log");
  expect_refused(a, (root / "model.hlo_module.pb").string(), "not in a cache entry directory");
  Collector b(root, "2.0");
  b.add_graph_path((entry / "sub" / "model.hlo_module.pb").string(), "log");
  expect_refused(b, (entry / "sub" / "model.hlo_module.pb").string(), "not in a cache entry directory");
}

// Older releases kept the cache of --cache_dir=DIR at DIR/neuron-compile-cache
// and named no root in the cache-path log: the graph's path tells it.
TEST_F(CollectTest, LearnsTheRootOfAGraphInsideAKnownRoot) {
  fs::path older_entry = root / "neuron-compile-cache" / "neuronxcc-2.0" / kEntry;
  test::write_text(older_entry / "model.hlo_module.pb", "graph");
  Collector c(root, "2.0");
  c.add_graph_path((older_entry / "model.hlo_module.pb").string(), "log");
  EXPECT_EQ(c.entries(), std::vector<fs::path>{older_entry});
  EXPECT_TRUE(c.refused().empty());
  EXPECT_EQ(c.roots(), (std::vector<fs::path>{root, root / "neuron-compile-cache"}));
}

// Older releases that write graph paths into the cache-path log: the
// graph's root is learned from the log line, before the trial's output
// names the same graph, on a fresh cache under DIR/neuron-compile-cache.
TEST_F(CollectTest, AGraphPathInThePathLogNamesItsRoot) {
  fs::path older_root = base / "elsewhere" / "neuron-compile-cache";
  fs::path older_entry = older_root / "neuronxcc-2.0" / kEntry;
  test::write_text(older_entry / "model.hlo_module.pb", "graph");
  Collector c(root, "2.0");
  c.add_path_log_line((older_entry / "model.hlo_module.pb").string() + "\n");
  c.add_graph_path((older_entry / "model.hlo_module.pb").string(), "output");
  EXPECT_EQ(c.entries(), std::vector<fs::path>{older_entry});
  EXPECT_TRUE(c.refused().empty());
  EXPECT_EQ(c.roots(), (std::vector<fs::path>{root, older_root}));
}

TEST_F(CollectTest, RefusesARootInsideAnotherEntry) {
  fs::path nested = entry / "neuronxcc-2.0" / kEntry / "model.hlo_module.pb";
  test::write_text(nested, "graph");
  Collector c(root, "2.0");
  c.add_graph_path(nested.string(), "log");
  expect_refused(c, nested.string(), "not in a cache entry directory");
  EXPECT_EQ(c.roots(), std::vector<fs::path>{root});
}

TEST_F(CollectTest, RefusesAnotherCompilerVersion) {
  fs::path other = root / "neuronxcc-1.0" / kEntry / "model.hlo_module.pb";
  test::write_text(other, "graph");
  Collector c(root, "2.0");
  c.add_graph_path(other.string(), "log");
  expect_refused(c, other.string(), "compiler version 1.0");
}

TEST_F(CollectTest, RefusesAMissingFile) {
  fs::path missing = root / "neuronxcc-2.0" / "MODULE_dead+beef" / "model.hlo_module.pb";
  Collector c(root, "2.0");
  c.add_graph_path(missing.string(), "log");
  expect_refused(c, missing.string(), "no such graph file");
}

TEST_F(CollectTest, RefusalsDoNotStopLaterAcceptances) {
  Collector c(root, "2.0");
  c.add_graph_path("relative/model.hlo_module.pb", "log");
  c.add_graph_path((base / "x" / "model.hlo_module.pb").string(), "output");
  c.add_graph_path(graph.string(), "output");
  EXPECT_EQ(c.entries(), std::vector<fs::path>{entry});
  ASSERT_EQ(c.refused().size(), 2U);
  EXPECT_NE(c.refused()[1].find("(from output)"), std::string::npos) << c.refused()[1];
  EXPECT_TRUE(fs::exists(base / "cache" / "neuronxcc-2.0" / kEntry / "model.hlo_module.pb"));
}

TEST_F(CollectTest, ReadPathLogSkipsBlankLinesAndTrims) {
  test::write_text(base / "paths.log", "/a/model.hlo_module.pb\n\n  /b c/model.hlo_module.pb  \n/c\n");
  EXPECT_EQ(read_path_log(base / "paths.log"),
            (std::vector<std::string>{"/a/model.hlo_module.pb", "/b c/model.hlo_module.pb", "/c"}));
  EXPECT_TRUE(read_path_log(base / "missing.log").empty());
}

} // namespace
} // namespace npc::launcher
