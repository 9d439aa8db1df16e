// util/trace_events and launcher/run_trace: the file Perfetto opens, the
// merge of several hosts' files, and where each task of a step writes its own.

#include <npc/util/trace_events.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <npc/launcher/run_trace.hpp>

#include "test_support.hpp"

namespace npc::util {
namespace {

using nlohmann::json;

class TraceEventsTest : public test::TempDirTest {};

TEST_F(TraceEventsTest, TheFileIsOneJsonObjectWithTheEventsOneALine) {
  TraceEvents trace(1);
  trace.name_process("host-a");
  trace.complete("MODULE_1+a", "compile", 2, 1'000'000, 250'000, {{"outcome", "compiled"}});
  trace.async_begin("MODULE_2+a", "wait", 7, 1'100'000);
  trace.async_end("MODULE_2+a", "wait", 7, 1'200'000);
  trace.counter("compiles running", 1'000'000, {{"running", 1}});
  const fs::path file = dir() / "t.json";
  ASSERT_TRUE(trace.write(file, {{"host", "host-a"}}));
  const std::string text = test::read_text(file);
  json doc = json::parse(text);
  EXPECT_EQ(doc["displayTimeUnit"], "ms");
  EXPECT_EQ(doc["otherData"]["host"], "host-a");
  ASSERT_EQ(doc["traceEvents"].size(), 5u);
  EXPECT_EQ(doc["traceEvents"][1],
            json::parse(R"({"ph":"X","name":"MODULE_1+a","cat":"compile","pid":1,"tid":2,"ts":1000000,"dur":250000,
                            "args":{"outcome":"compiled"}})"));
  EXPECT_EQ(doc["traceEvents"][2]["id"], "7");
  EXPECT_EQ(doc["traceEvents"][3]["ph"], "e");
  // Header, three lines of document, five events, the end.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3 + 5 + 1);
}

TEST_F(TraceEventsTest, AMergeMakesEachFileAProcessAndItsWaitIdsItsOwn) {
  for (int host = 0; host < 2; ++host) {
    TraceEvents trace(1);
    trace.name_process("host-" + std::to_string(host));
    trace.async_begin("MODULE_x", "wait", 3, 10);
    trace.async_end("MODULE_x", "wait", 3, 20);
    ASSERT_TRUE(trace.write(dir() / ("t" + std::to_string(host) + ".json"), {{"host", host}}));
  }
  auto merged = merge_traces({dir() / "t0.json", dir() / "t1.json"});
  ASSERT_TRUE(merged.ok()) << merged.error();
  json doc = json::parse(*merged);
  ASSERT_EQ(doc["traceEvents"].size(), 6u);
  std::vector<std::pair<int, std::string>> seen;
  for (const auto& e : doc["traceEvents"])
    seen.emplace_back(e["pid"].get<int>(), e["ph"] == "M" ? e["args"]["name"].get<std::string>() : e["id"].get<std::string>());
  EXPECT_EQ(seen, (std::vector<std::pair<int, std::string>>{
                      {1, "host-0"}, {1, "1:3"}, {1, "1:3"}, {2, "host-1"}, {2, "2:3"}, {2, "2:3"}}));
  EXPECT_EQ(doc["otherData"]["merged"][1]["otherData"]["host"], 1);
  EXPECT_EQ(doc["otherData"]["merged"][1]["file"], (dir() / "t1.json").string());
}

TEST_F(TraceEventsTest, AMergeNamesTheFileThatIsNoTrace) {
  test::write_text(dir() / "report.json", "{\"compilation_summary\": {}}");
  auto merged = merge_traces({dir() / "report.json"});
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.error(), (dir() / "report.json").string() + " is not a trace (a JSON object with a traceEvents array)");
  merged = merge_traces({dir() / "missing.json"});
  ASSERT_FALSE(merged.ok());
  EXPECT_NE(merged.error().find((dir() / "missing.json").string()), std::string::npos) << merged.error();
}

TEST(TracePathForTask, EachTaskOfAStepGetsItsOwnFile) {
  using launcher::trace_path_for_task;
  EXPECT_EQ(trace_path_for_task("/shared/trace.json", ""), fs::path("/shared/trace.json"));
  EXPECT_EQ(trace_path_for_task("/shared/trace.json", "node-a.task2"), fs::path("/shared/trace.node-a.task2.json"));
  EXPECT_EQ(trace_path_for_task("trace", "n.task0"), fs::path("trace.n.task0"));
}

} // namespace
} // namespace npc::util
