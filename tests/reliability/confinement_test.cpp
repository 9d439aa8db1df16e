// Paths a trial run reports are confined to the cache: whatever a training
// script prints in an "Extracting graphs (...)" line or writes to the
// cache-path log, the launcher only ever compiles a model.hlo_module.pb in an
// entry directory directly under <root>/neuronxcc-<our version>/. Tested on
// npc::launcher::Collector and parse_extraction_line directly, with hostile
// paths: outside, `..`, symlinks out (file, entry, version dir), relative,
// another version, the wrong file, the wrong depth, odd bytes.

#include <gtest/gtest.h>

#include <npc/cache/key.hpp>
#include <npc/launcher/collect.hpp>
#include <npc/launcher/trial.hpp>

#include "reliability.hpp"

namespace npc::reltest {
namespace {

using npc::launcher::Collector;
using npc::launcher::parse_extraction_line;

constexpr const char* kConfinementVersion = "2.14.213.0+standin";
constexpr const char* kModule = "MODULE_0123456789abcdef0123+01234567";

class ConfinementTest : public npc::test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    root_ = dir() / "cache" / "neuron-compile-cache";
    entry_ = root_ / (std::string("neuronxcc-") + kConfinementVersion) / kModule;
    fs::create_directories(entry_);
    npc::test::write_text(entry_ / "model.hlo_module.pb", "HloModule ok\n");
    fs::create_directories(dir() / "outside" / kModule);
    npc::test::write_text(dir() / "outside" / "model.hlo_module.pb", "HloModule evil\n");
    npc::test::write_text(dir() / "outside" / kModule / "model.hlo_module.pb", "HloModule evil\n");
  }
  // Whether the collector takes the path (and then it must name our entry).
  bool accepted(const std::string& path) {
    Collector collector(root_, kConfinementVersion);
    collector.add_graph_path(path, "test");
    for (const auto& e : collector.entries()) {
      auto key = npc::cache::parse_key(e.string());
      EXPECT_TRUE(key.has_value()) << e;
      EXPECT_EQ(e.parent_path().parent_path(), fs::weakly_canonical(root_)) << e;
    }
    EXPECT_EQ(collector.entries().size() + collector.refused().size(), 1u) << path;
    return collector.entries().size() == 1;
  }
  fs::path root_, entry_;
};

TEST_F(ConfinementTest, AcceptsTheGraphOfAnEntryOfOurVersion) {
  EXPECT_TRUE(accepted((entry_ / "model.hlo_module.pb").string()));
  EXPECT_TRUE(accepted("  " + (entry_ / "model.hlo_module.pb").string() + "\t")) << "surrounding blanks are trimmed";
  EXPECT_TRUE(accepted(
      (root_ / (std::string("neuronxcc-") + kConfinementVersion) / "." / kModule / "model.hlo_module.pb").string()));
}

TEST_F(ConfinementTest, RefusesEverythingElse) {
  std::string v = std::string("neuronxcc-") + kConfinementVersion;
  // A symlinked entry, version dir and graph file, each pointing outside.
  fs::create_directory_symlink(dir() / "outside", root_ / v / "MODULE_1111111111111111aaaa+bbbbbbbb");
  fs::create_directories(root_ / v / "MODULE_2222222222222222aaaa+bbbbbbbb");
  fs::create_symlink(dir() / "outside" / "model.hlo_module.pb",
                     root_ / v / "MODULE_2222222222222222aaaa+bbbbbbbb" / "model.hlo_module.pb");
  fs::create_directory_symlink(dir() / "outside", root_ / "neuronxcc-9.9.9");
  const std::vector<std::string> hostile = {
      "/etc/passwd",
      (dir() / "outside" / "model.hlo_module.pb").string(),
      (dir() / "outside" / kModule / "model.hlo_module.pb").string(),
      (root_ / v / ".." / ".." / ".." / "outside" / kModule / "model.hlo_module.pb").string(),
      (root_ / v / kModule / ".." / ".." / ".." / ".." / "outside" / "model.hlo_module.pb").string(),
      (root_.string() + "/../neuron-compile-cache-evil/" + v + "/" + kModule + "/model.hlo_module.pb"),
      (root_.string() + "-evil/" + v + "/" + kModule + "/model.hlo_module.pb"), // a sibling sharing the prefix
      (root_ / v / "MODULE_1111111111111111aaaa+bbbbbbbb" / "model.hlo_module.pb").string(),
      (root_ / v / "MODULE_2222222222222222aaaa+bbbbbbbb" / "model.hlo_module.pb").string(),
      (root_ / "neuronxcc-9.9.9" / kModule / "model.hlo_module.pb").string(),
      (root_ / "neuronxcc-2.0.0" / kModule / "model.hlo_module.pb").string(), // another version
      (root_ / v / kModule / "model.neff").string(),                          // not the graph
      (root_ / v / kModule / "compile_flags.json").string(),
      (root_ / v / kModule).string(),                                         // the entry, not its graph
      (root_ / v / "model.hlo_module.pb").string(),                           // too shallow
      (root_ / v / kModule / "sub" / "model.hlo_module.pb").string(),         // too deep
      (root_ / v / "MODULE_XYZ+1" / "model.hlo_module.pb").string(),          // not a key
      (root_ / "model.hlo_module.pb").string(),
      root_.string(),
      (root_ / ".npc" / "compilers" / "x").string(),
      "relative/path/model.hlo_module.pb",
      v + "/" + kModule + "/model.hlo_module.pb",
      "~/" + v + "/" + kModule + "/model.hlo_module.pb",
      "file://" + (entry_ / "model.hlo_module.pb").string(),
      (root_ / v / "MODULE_aaaa+bbbb" / "model.hlo_module.pb").string(), // no such file
  };
  int refused = 0;
  for (const auto& path : hostile) {
    EXPECT_FALSE(accepted(path)) << "accepted a hostile path: " << path;
    ++refused;
  }
  record_figures({{"bad_inputs", static_cast<std::uint64_t>(refused)}});
}

TEST_F(ConfinementTest, RefusalsAreReportedNotDropped) {
  Collector collector(root_, kConfinementVersion);
  collector.add_graph_path("/etc/passwd", "the trial's output");
  collector.add_graph_path("relative/x", "the cache-path log");
  collector.add_graph_path((entry_ / "model.hlo_module.pb").string(), "the trial's output");
  collector.add_graph_path((entry_ / "model.hlo_module.pb").string(), "the cache-path log"); // duplicate
  ASSERT_EQ(collector.entries().size(), 1u);
  ASSERT_EQ(collector.refused().size(), 2u);
  EXPECT_EQ(collector.refused()[0], "'/etc/passwd' (from the trial's output): outside the cache " +
                                        fs::weakly_canonical(root_).string());
  EXPECT_EQ(collector.refused()[1], "'relative/x' (from the cache-path log): not an absolute path");
}

TEST(ExtractionLine, TakesThePathBetweenTheMarkers) {
  EXPECT_EQ(parse_extraction_line("Extracting graphs (/c/x/model.hlo_module.pb) for ahead-of-time parallel "
                                  "compilation. No compilation was done."),
            "/c/x/model.hlo_module.pb");
  EXPECT_EQ(parse_extraction_line("2026-01-01 INFO Extracting graphs (/a (b)/c) for ahead-of-time parallel compilation"),
            "/a (b)/c");
  EXPECT_EQ(parse_extraction_line("Extracting graphs (/no/suffix)"), "/no/suffix");
  EXPECT_EQ(parse_extraction_line("Extracting graphs ()"), "");
  EXPECT_EQ(parse_extraction_line("Extracting graphs ("), "");
  EXPECT_EQ(parse_extraction_line("nothing to see"), "");
  EXPECT_EQ(parse_extraction_line(""), "");
  EXPECT_EQ(parse_extraction_line(")Extracting graphs ("), "");
}

} // namespace
} // namespace npc::reltest
