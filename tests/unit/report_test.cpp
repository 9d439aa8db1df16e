// launcher/report: the JSON report is written one graph at a time, and its
// text is exactly what nlohmann::json::dump(2) gives for the same document.

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <npc/launcher/report.hpp>

#include "test_support.hpp"

namespace npc::launcher {
namespace {

WorkItem item(const std::string& key, double seconds) {
  WorkItem w;
  w.entry_dir = fs::path("/cache/neuronxcc-1.0") / key;
  w.key = key;
  w.predicted.seconds = seconds;
  return w;
}

class ReportTest : public test::TempDirTest {
protected:
  RunFacts facts() const {
    RunFacts f;
    f.parallel = 2;
    f.compile_wall_seconds = 1.5;
    f.wall_seconds = 2.25;
    f.compiler_version = "1.0";
    f.start_time = "2026-11-22T10:00:00Z";
    f.refused = {"/elsewhere/model.hlo_module.pb: outside the cache"};
    return f;
  }
};

TEST_F(ReportTest, StreamedTextIsDumpOfTheDocument) {
  // Out of key order on purpose: the report lists graphs sorted by path.
  Pool pool({item("MODULE_c+0", 3), item("MODULE_a+0", 1), item("MODULE_b \"quoted\"+0", 2)}, {2, 0, 1});
  pool.mark_cached(1);
  pool.mark_cached_failure(2, "/cache/neuronxcc-1.0/MODULE_b/model.log");
  pool.start(0, 0.0);
  AttemptInfo info;
  info.exit = "exit code 0";
  info.wall_seconds = 1.25;
  info.peak_rss_bytes = 123456789;
  info.log_path = dir() / "c.log";
  pool.finish(0, AttemptEnd::compiled, info, 1.25);

  fs::path out = dir() / "report.json";
  auto written = write_report(pool, facts(), out);
  ASSERT_TRUE(written.ok()) << written.error();
  std::string text = test::read_text(out);
  nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_EQ(text, doc.dump(2) + "\n");

  const auto& graphs = doc["compilation_report"];
  ASSERT_EQ(graphs.size(), 3U);
  std::vector<std::string> order;
  for (const auto& [path, record] : graphs.items()) order.push_back(path);
  EXPECT_EQ(order, (std::vector<std::string>{"/cache/neuronxcc-1.0/MODULE_a+0/model.hlo_module.pb",
                                             "/cache/neuronxcc-1.0/MODULE_b \"quoted\"+0/model.hlo_module.pb",
                                             "/cache/neuronxcc-1.0/MODULE_c+0/model.hlo_module.pb"}));
  const auto& c = graphs["/cache/neuronxcc-1.0/MODULE_c+0/model.hlo_module.pb"];
  EXPECT_EQ(c["status"], "compiled");
  EXPECT_EQ(c["attempts"], 1);
  EXPECT_EQ(c["peak_rss_bytes"], 123456789);
  EXPECT_EQ(c["key"], "MODULE_c+0");
  EXPECT_EQ(graphs["/cache/neuronxcc-1.0/MODULE_a+0/model.hlo_module.pb"]["status"], "cached");
  EXPECT_EQ(graphs["/cache/neuronxcc-1.0/MODULE_b \"quoted\"+0/model.hlo_module.pb"]["status"], "failed_cached");
  EXPECT_EQ(doc["compilation_summary"]["total_graphs"], 3);
  EXPECT_EQ(doc["compilation_summary"]["compiled"], 1);
  EXPECT_EQ(doc["compilation_summary"]["already_cached"], 1);
  EXPECT_EQ(doc["compilation_summary"]["failed"], 1);
  EXPECT_EQ(doc["compilation_summary"]["refused_paths"].size(), 1U);
  EXPECT_EQ(doc["compilation_time"], 2.25);
  EXPECT_EQ(doc["start_time"], "2026-11-22T10:00:00Z");
}

TEST_F(ReportTest, NoGraphs) {
  Pool pool({}, {1, 0, 0});
  fs::path out = dir() / "report.json";
  ASSERT_TRUE(write_report(pool, facts(), out).ok());
  std::string text = test::read_text(out);
  nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_EQ(text, doc.dump(2) + "\n");
  EXPECT_TRUE(doc["compilation_report"].is_object());
  EXPECT_TRUE(doc["compilation_report"].empty());
}

TEST_F(ReportTest, UnwritablePlaceFailsAndLeavesNothing) {
  Pool pool({item("MODULE_a+0", 1)}, {1, 0, 0});
  auto written = write_report(pool, facts(), dir() / "missing-dir" / "report.json");
  EXPECT_FALSE(written.ok());
  EXPECT_FALSE(fs::exists(dir() / "missing-dir"));
}

} // namespace
} // namespace npc::launcher
