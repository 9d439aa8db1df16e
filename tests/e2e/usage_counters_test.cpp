// The cache's usage counters (cache/usage_stats.hpp) with something else in
// their place, through the real programs: a hit is neither held up nor
// failed by them; `neuron_cache stats` shows the entries and every counter it
// can read, names the others in one warning line and exits 0; `stats --zero`
// replaces what is not a shard and names, exit 3, what it cannot zero.

#include <sys/stat.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace npc::test {
namespace {

const std::string kRemedy = "remove it, or run neuron_cache stats --zero, which also empties the other counters";

class UsageCounters : public CacheTest {
protected:
  void SetUp() override {
    CacheTest::SetUp();
    if (HasFatalFailure()) return;
    write_text(graph(), "HloModule counted\n");
    auto miss = compile(dir() / "miss.neff");
    ASSERT_EQ(miss.exit_code, 0) << miss.describe();
    ASSERT_EQ(entries().size(), 1u);
  }
  fs::path graph() const { return dir() / "graphs" / "g.hlo"; }
  fs::path stats_dir() const { return cache_root() / ".npc" / "stats"; }
  fs::path shard(int i) const { return stats_dir() / (std::to_string(i) + ".json"); }
  RunResult compile(const fs::path& out) {
    return run_tool("neuron_cc_wrapper", {"compile", "--graph", graph().string(), "--output", out.string()});
  }
  // A hit: served as it was compiled, nothing compiled, nothing said.
  void expect_a_quiet_hit(const std::string& name) {
    auto hit = compile(dir() / name);
    ASSERT_EQ(hit.exit_code, 0) << hit.describe();
    EXPECT_FALSE(hit.timed_out);
    EXPECT_EQ(hit.err, "");
    EXPECT_EQ(compiles(), 1u);
    EXPECT_EQ(read_text(dir() / name), read_text(entries().front() / "model.neff"));
  }
  nlohmann::json stats_json() {
    auto r = run_tool("neuron_cache", {"--json", "stats"});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return nlohmann::json::parse(r.out, nullptr, false);
  }
  static bool has_line(const std::string& text, const std::string& line) {
    return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
  }
};

// A FIFO in every shard's place: a hit is served at once, uncounted; stats
// shows the entries and names each FIFO; --zero replaces them, and counting
// goes on.
TEST_F(UsageCounters, FifosInTheShardsPlacesNeitherHoldUpNorFailAHit) {
  fs::remove_all(stats_dir());
  fs::create_directories(stats_dir());
  for (int i = 0; i < 16; ++i) ASSERT_EQ(::mkfifo(shard(i).c_str(), 0600), 0);
  expect_a_quiet_hit("hit.neff");

  auto stats = run_tool("neuron_cache", {"stats"});
  EXPECT_EQ(stats.exit_code, 0) << stats.describe();
  EXPECT_TRUE(has_line(stats.out, "entries       1")) << stats.out;
  EXPECT_TRUE(has_line(stats.out, "  done        1")) << stats.out;
  std::string named;
  for (int i = 0; i < 16; ++i) named += (i == 0 ? "" : "; ") + shard(i).string() + " is a FIFO, not a file";
  EXPECT_EQ(stats.err, "neuron_cache: warning: the counters of 16 files are not in the sums: " + named +
                           " (remove them, or run neuron_cache stats --zero, which also empties the other "
                           "counters)\n");
  auto doc = stats_json();
  EXPECT_EQ(doc["entries"], 1);
  EXPECT_EQ(doc["usage"]["total"]["hits"], 0);
  ASSERT_EQ(doc["usage"]["unread"].size(), 16u) << doc.dump();
  EXPECT_EQ(doc["usage"]["unread"][3], (nlohmann::json{{"path", shard(3).string()}, {"fault", "not_a_file"},
                                                       {"detail", "FIFO"}}));

  auto zero = run_tool("neuron_cache", {"stats", "--zero"});
  ASSERT_EQ(zero.exit_code, 0) << zero.describe();
  std::string replaced;
  for (int i = 0; i < 16; ++i) replaced += "replaced " + shard(i).string() + " is a FIFO, not a file\n";
  EXPECT_EQ(zero.out, replaced + "usage counters of " + (cache_root() / ".npc").string() + " zeroed\n");
  EXPECT_EQ(zero.err, "");
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(shard(i)))) << i;

  expect_a_quiet_hit("again.neff");
  doc = stats_json();
  EXPECT_EQ(doc["usage"]["total"]["hits"], 1);
  EXPECT_EQ(doc["usage"]["unread"], nlohmann::json::array());
}

// The counters' folder as a file: stats still shows the entries (exit 0)
// and says what is wrong and what to do; --zero makes the folder again.
TEST_F(UsageCounters, AFileInTheFoldersPlaceHidesNoEntryAndZeroRepairsIt) {
  fs::remove_all(stats_dir());
  write_text(stats_dir(), "not the counters\n");
  expect_a_quiet_hit("hit.neff");

  auto stats = run_tool("neuron_cache", {"stats"});
  EXPECT_EQ(stats.exit_code, 0) << stats.describe();
  EXPECT_TRUE(has_line(stats.out, "entries       1")) << stats.out;
  EXPECT_EQ(stats.err, "neuron_cache: warning: the counters of 1 file are not in the sums: " + stats_dir().string() +
                           " is a regular file, not a directory (" + kRemedy + ")\n");

  auto zero = run_tool("neuron_cache", {"stats", "--zero"});
  ASSERT_EQ(zero.exit_code, 0) << zero.describe();
  EXPECT_EQ(zero.out, "replaced " + stats_dir().string() + " is a regular file, not a directory\n" +
                          "usage counters of " + (cache_root() / ".npc").string() + " zeroed\n");
  EXPECT_TRUE(fs::is_directory(stats_dir()));
  expect_a_quiet_hit("again.neff");
  EXPECT_EQ(stats_json()["usage"]["total"]["hits"], 1);
}

// What --zero cannot zero (a directory with files in a shard's place) is an
// error that names it and says what to do; every other shard is zeroed, and
// what was replaced (a link to a device) is said all the same.
TEST_F(UsageCounters, ZeroNamesWhatItCannotZeroAndZeroesTheRest) {
  // The miss of SetUp went to the shard of its pid, which may be 5 or 6.
  fs::remove(shard(5));
  write_text(shard(5) / "notes.txt", "mine\n");
  fs::remove(shard(6));
  fs::create_symlink("/dev/zero", shard(6));
  auto zero = run_tool("neuron_cache", {"stats", "--zero"});
  EXPECT_EQ(zero.exit_code, 3) << zero.describe();
  EXPECT_EQ(zero.out, "replaced " + shard(6).string() + " is a symbolic link, not a file\n");
  EXPECT_EQ(zero.err, "neuron_cache: error: stats --zero: 1 of the counters' files in " + stats_dir().string() +
                          " not zeroed: " + shard(5).string() + " is a directory with files in it, not a file " +
                          "(remove it yourself (rm -r " + shard(5).string() + ") and run again)\n");
  EXPECT_EQ(read_text(shard(5) / "notes.txt"), "mine\n");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(shard(6))));
  auto doc = stats_json();
  EXPECT_EQ(doc["usage"]["total"]["misses"], 0) << "the miss was zeroed";
  EXPECT_FALSE(doc["usage"]["zeroed_at"].is_null());
  ASSERT_EQ(doc["usage"]["unread"].size(), 1u);
  EXPECT_EQ(doc["usage"]["unread"][0]["path"], shard(5).string());
}

// Counters out of range are a torn shard: left out of the sums and named,
// never shown as garbage (18446744073709551611 hits, negative hours, 1889).
TEST_F(UsageCounters, OutOfRangeCountersAreLeftOutAndNamed) {
  auto written = names_in(stats_dir());
  ASSERT_EQ(written.size(), 1u) << "the miss is counted in one shard";
  const fs::path bad = written.front() == "0.json" ? shard(1) : shard(0);
  write_text(bad, R"({"programs":{"neuron_cc_wrapper":{"hits":-5,"compile_seconds":9.3e18}},)"
                  R"("zeroed_unix":-2556057600})");
  auto stats = run_tool("neuron_cache", {"stats"});
  EXPECT_EQ(stats.exit_code, 0) << stats.describe();
  EXPECT_EQ(stats.out.find("18446744073709551611"), std::string::npos) << stats.out;
  EXPECT_EQ(stats.out.find("-2562047788015215h"), std::string::npos) << stats.out;
  EXPECT_NE(stats.out.find(" since it was made "), std::string::npos) << stats.out;
  EXPECT_EQ(stats.err, "neuron_cache: warning: the counters of 1 file are not in the sums: " + bad.string() +
                           " is torn (zeroed_unix -2556057600 is not a time from 1970 to 2100) (the next count in it "
                           "rewrites it)\n");
  auto doc = stats_json();
  EXPECT_EQ(doc["usage"]["programs"]["neuron_cc_wrapper"]["hits"], 0);
  EXPECT_EQ(doc["usage"]["programs"]["neuron_cc_wrapper"]["misses"], 1);
  EXPECT_LT(doc["usage"]["total"]["compile_seconds"].get<double>(), 3600) << doc.dump();
  EXPECT_TRUE(doc["usage"]["zeroed_at"].is_null());
}

} // namespace
} // namespace npc::test
