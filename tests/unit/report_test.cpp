// launcher/report: the JSON report is written one graph at a time, and its
// text is exactly what nlohmann::json::dump(2) gives for the same document;
// the original tool's results files are exactly what its Python writes (the
// expected texts below were printed by python3's json.dumps(..., indent=4)
// for the same data, and the float texts by repr()).

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <npc/launcher/report.hpp>

#include "test_support.hpp"

namespace npc::launcher {
namespace {

WorkItem report_item(const std::string& key, double seconds) {
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
  Pool pool({report_item("MODULE_c+0", 3), report_item("MODULE_a+0", 1), report_item("MODULE_b \"quoted\"+0", 2)},
            {2, 0, 1});
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
  Pool pool({report_item("MODULE_a+0", 1)}, {1, 0, 0});
  auto written = write_report(pool, facts(), dir() / "missing-dir" / "report.json");
  EXPECT_FALSE(written.ok());
  EXPECT_FALSE(fs::exists(dir() / "missing-dir"));
}

// --- The original tool's results files ---------------------------------------

class OriginalResultsTest : public test::TempDirTest {
protected:
  void TearDown() override {
    ::unsetenv("NEURON_PARALLEL_COMPILE_DUMP_RESULTS");
    test::TempDirTest::TearDown();
  }
  static AttemptInfo took(double seconds, const std::string& exit) {
    AttemptInfo info;
    info.wall_seconds = seconds;
    info.exit = exit;
    return info;
  }
  // a cached, b compiled on its second attempt, c a cached failure, d locked
  // by another process to the end, e compiled by another process, f failed
  // twice. Listed out of order: the files list graphs sorted by path.
  static Pool mixed_pool() {
    Pool pool({report_item("MODULE_f+0", 1), report_item("MODULE_d+0", 1), report_item("MODULE_b+0", 1),
               report_item("MODULE_a+0", 1), report_item("MODULE_c+0", 1), report_item("MODULE_e+0", 1)},
              {4, 0, /*max_retries=*/1});
    pool.mark_cached(3);
    pool.mark_cached_failure(4, "/cache/neuronxcc-1.0/MODULE_c+0/model.log");
    pool.mark_locked_elsewhere(1, 0.0);
    pool.start(2, 0.0);
    pool.finish(2, AttemptEnd::failed, took(0.5, "exit code 70"), 0.5);
    pool.start(2, 1.0);
    pool.finish(2, AttemptEnd::compiled, took(1.25, "exit code 0"), 2.25);
    pool.start(5, 0.0);
    pool.finish(5, AttemptEnd::already_done, took(0.125, "exit code 0"), 0.125);
    pool.start(0, 0.0);
    pool.finish(0, AttemptEnd::failed, took(2.5, "exit code 1"), 2.5);
    pool.start(0, 3.0);
    pool.finish(0, AttemptEnd::failed, took(0.25, "exit code 1"), 3.25);
    return pool;
  }
};

TEST_F(OriginalResultsTest, ExactFilesInThePythonLayout) {
  Pool pool = mixed_pool();
  ASSERT_EQ(pool.progress()[1].state, ItemState::deferred);
  auto written = write_original_results(pool, 1732350000.5, 12.25, 20.125, dir(), 1732350012.123456);
  ASSERT_TRUE(written.ok()) << written.error();
  EXPECT_EQ(written->results, dir() / "neuron_parallel_compile_results_1732350012.123456.json");
  EXPECT_EQ(written->total, dir() / "total_neuron_parallel_compile_results_1732350012.123456.json");
  EXPECT_EQ(test::read_text(written->results),
            "{\n    \"compilation_summary\": {\n        \"true\": 3,\n        \"false\": 2\n    },\n"
            "    \"compilation_report\": {\n"
            "        \"/cache/neuronxcc-1.0/MODULE_a+0/model.hlo_module.pb\": {\n            \"status\": true,\n"
            "            \"retry\": 0,\n            \"compile_time\": 0.0\n        },\n"
            "        \"/cache/neuronxcc-1.0/MODULE_b+0/model.hlo_module.pb\": {\n            \"status\": true,\n"
            "            \"retry\": 1,\n            \"compile_time\": 1.75\n        },\n"
            "        \"/cache/neuronxcc-1.0/MODULE_c+0/model.hlo_module.pb\": {\n            \"status\": false,\n"
            "            \"retry\": 0,\n            \"compile_time\": 0.0\n        },\n"
            "        \"/cache/neuronxcc-1.0/MODULE_e+0/model.hlo_module.pb\": {\n            \"status\": true,\n"
            "            \"retry\": 0,\n            \"compile_time\": 0.0\n        },\n"
            "        \"/cache/neuronxcc-1.0/MODULE_f+0/model.hlo_module.pb\": {\n            \"status\": false,\n"
            "            \"retry\": 1,\n            \"compile_time\": 2.75\n        }\n"
            "    },\n    \"start_time\": 1732350000.5,\n    \"compilation_time\": 12.25\n}");
  EXPECT_EQ(test::read_text(written->total), "{\n    \"total_neuron_parallel_compile_time\": 20.125\n}");
  // Nothing else: no temp file left beside them.
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir())) ++files;
  EXPECT_EQ(files, 2U);
}

TEST_F(OriginalResultsTest, TotalGraphsCountsEveryGraphFoundAlsoThoseWithNoOutcome) {
  // MODULE_d is left to the process holding it: found, neither ok nor failed.
  EXPECT_EQ(original_summary_lines(mixed_pool()),
            (std::vector<std::string>{"Total graphs: 6", "Total successful compilations: 3",
                                      "Total failed compilations: 2"}));
  EXPECT_EQ(original_summary_lines(Pool({}, {1, 0, 0})),
            (std::vector<std::string>{"Total graphs: 0", "Total successful compilations: 0",
                                      "Total failed compilations: 0"}));
}

TEST_F(OriginalResultsTest, AZeroCountIsAbsentAndNonAsciiIsEscaped) {
  Pool pool({report_item("MODULE_\xc3\xa9+0", 1)}, {1, 0, 0});
  pool.mark_cached_failure(0, "/x/model.log");
  auto written = write_original_results(pool, 1.0, 0.0, 0.0, dir(), 5.0);
  ASSERT_TRUE(written.ok()) << written.error();
  EXPECT_EQ(written->results.filename(), "neuron_parallel_compile_results_5.0.json");
  EXPECT_EQ(test::read_text(written->results),
            "{\n    \"compilation_summary\": {\n        \"false\": 1\n    },\n"
            "    \"compilation_report\": {\n"
            "        \"/cache/neuronxcc-1.0/MODULE_\\u00e9+0/model.hlo_module.pb\": {\n            \"status\": false,\n"
            "            \"retry\": 0,\n            \"compile_time\": 0.0\n        }\n"
            "    },\n    \"start_time\": 1.0,\n    \"compilation_time\": 0.0\n}");
}

TEST_F(OriginalResultsTest, NoGraphs) {
  auto written = write_original_results(Pool({}, {1, 0, 0}), 1732350000.0, 0.0, 0.5, dir(), 1732350000.0);
  ASSERT_TRUE(written.ok()) << written.error();
  EXPECT_EQ(written->results.filename(), "neuron_parallel_compile_results_1732350000.0.json");
  EXPECT_EQ(test::read_text(written->results),
            "{\n    \"compilation_summary\": {},\n    \"compilation_report\": {},\n"
            "    \"start_time\": 1732350000.0,\n    \"compilation_time\": 0.0\n}");
  EXPECT_EQ(test::read_text(written->total), "{\n    \"total_neuron_parallel_compile_time\": 0.5\n}");
}

TEST_F(OriginalResultsTest, UnwritableDirectoryFailsNamingTheFile) {
  auto written = write_original_results(mixed_pool(), 1.0, 1.0, 1.0, dir() / "missing", 7.25);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.error().rfind("cannot write " + (dir() / "missing" / "neuron_parallel_compile_results_7.25.json").string() + ": ", 0), 0U)
      << written.error();
  EXPECT_FALSE(fs::exists(dir() / "missing"));
}

TEST_F(OriginalResultsTest, RequestedWhenSetToAnyNonEmptyValue) {
  ::unsetenv("NEURON_PARALLEL_COMPILE_DUMP_RESULTS");
  EXPECT_FALSE(dump_results_requested());
  ::setenv("NEURON_PARALLEL_COMPILE_DUMP_RESULTS", "", 1);
  EXPECT_FALSE(dump_results_requested()); // Python's truthiness of ""
  for (const char* value : {"1", "0", "false", "yes", "/some/path.json"}) {
    ::setenv("NEURON_PARALLEL_COMPILE_DUMP_RESULTS", value, 1);
    EXPECT_TRUE(dump_results_requested()) << value;
  }
}

TEST(PythonFloatText, AsReprPrintsIt) {
  // Each expected text is python3's repr() of the same value.
  EXPECT_EQ(python_float_text(1732350012.123456), "1732350012.123456");
  EXPECT_EQ(python_float_text(1732350012.1234567), "1732350012.1234567");
  EXPECT_EQ(python_float_text(1732350000.0), "1732350000.0");
  EXPECT_EQ(python_float_text(0.0), "0.0");
  EXPECT_EQ(python_float_text(-0.0), "-0.0");
  EXPECT_EQ(python_float_text(100.0), "100.0");
  EXPECT_EQ(python_float_text(123.456), "123.456");
  EXPECT_EQ(python_float_text(1.0 / 3), "0.3333333333333333");
  EXPECT_EQ(python_float_text(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_text(1e16), "1e+16");
  EXPECT_EQ(python_float_text(2.5e22), "2.5e+22");
  EXPECT_EQ(python_float_text(0.0001), "0.0001");
  EXPECT_EQ(python_float_text(0.00001), "1e-05");
  EXPECT_EQ(python_float_text(1.5e-05), "1.5e-05");
  EXPECT_EQ(python_float_text(1e-300), "1e-300");
}

// The few slowest compiles, each with its time (its attempts summed) and
// that time's share of the compile phase: a graph near 100% is the run's
// critical path.
TEST_F(ReportTest, TheSlowestCompilesAreListedWithTheirShareOfTheCompilePhase) {
  Pool pool({report_item("MODULE_a+0", 1), report_item("MODULE_b+0", 1), report_item("MODULE_c+0", 1),
             report_item("MODULE_d+0", 1)},
            {4, 0, 1});
  pool.mark_cached(3);
  auto attempt = [&](std::size_t i, AttemptEnd end, double started, double seconds) {
    pool.start(i, started);
    AttemptInfo info;
    info.exit = end == AttemptEnd::compiled ? "exit code 0" : "exit code 70";
    info.wall_seconds = seconds;
    pool.finish(i, end, info, started + seconds);
  };
  attempt(0, AttemptEnd::compiled, 0, 2.0);
  attempt(1, AttemptEnd::compiled, 0, 8.0);
  attempt(2, AttemptEnd::failed, 0, 1.5);
  attempt(2, AttemptEnd::failed, 5, 1.0);
  RunFacts f = facts();
  f.compile_wall_seconds = 10;
  EXPECT_EQ(slowest_lines(pool, f), (std::vector<std::string>{"slowest compiles (share of the compile phase's 10.0s):",
                                                              "  8.0s  80%  MODULE_b+0",
                                                              "  2.5s  25%  MODULE_c+0 (failed) (2 attempts)",
                                                              "  2.0s  20%  MODULE_a+0"}));
  // They follow the totals in the summary.
  auto summary = summary_lines(pool, f);
  ASSERT_GE(summary.size(), 4u);
  EXPECT_EQ(summary[2], "slowest compiles (share of the compile phase's 10.0s):");
}

TEST_F(ReportTest, OneCompileHasNoSlowestList) {
  Pool pool({report_item("MODULE_a+0", 1), report_item("MODULE_b+0", 1)}, {2, 0, 0});
  pool.mark_cached(1);
  pool.start(0, 0);
  AttemptInfo info;
  info.exit = "exit code 0";
  info.wall_seconds = 3;
  pool.finish(0, AttemptEnd::compiled, info, 3);
  EXPECT_TRUE(slowest_lines(pool, facts()).empty());
}

} // namespace
} // namespace npc::launcher
