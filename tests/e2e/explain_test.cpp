// neuron_cache explain, and the launcher's hint about graphs it compiled that
// the cache held under other settings, against the stand-in compiler.
//
// The keys below, computed with Python's hashlib:
//   sha256(b"HloModule e2e_explain\n")[:20]  231ccaf97faae7b7d7b3 (22 bytes)
//   md5(b"-O1")[:8]                          c0404986
//   md5(b"-O2")[:8]                          b5fb2f64

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace npc::test {
namespace {

const std::string kGraph = "HloModule e2e_explain\n";
const std::string kVersionDir = std::string("neuronxcc-") + kStandinVersion;
const std::string kKeyO1 = kVersionDir + "/MODULE_231ccaf97faae7b7d7b3+c0404986";
const std::string kKeyO2 = kVersionDir + "/MODULE_231ccaf97faae7b7d7b3+b5fb2f64";
const std::string kAsTheWrapperNamesIt =
    " as neuron_cc_wrapper compile names it; the framework names a graph by a hash of its own that cannot be "
    "computed from the bytes: give its entry to see that key";

class Explain : public CacheTest {
protected:
  void SetUp() override {
    CacheTest::SetUp();
    if (HasFatalFailure()) return;
    write_text(graph(), kGraph);
  }
  [[nodiscard]] fs::path graph() const { return dir() / "graphs" / "g.pb"; }
  [[nodiscard]] std::map<std::string, std::string> flags(const std::string& words) const {
    return {{"NEURON_CC_FLAGS", "--cache_dir=" + cache_root().string() + " " + words}};
  }
  // A cache holding the graph compiled under -O1.
  void compile_with_o1() {
    auto r = run_tool("neuron_cc_wrapper",
                      {"compile", "--graph", graph().string(), "--output", (dir() / "o1.neff").string()}, flags("-O1"));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    ASSERT_TRUE(fs::exists(cache_root() / kKeyO1 / "model.done"));
  }
  // A pre-compile whose trial hands the graph to the wrapper, as a framework would.
  RunResult launch(const std::string& words) {
    return run_tool("neuron_parallel_compile",
                    {"--parallel_compile_workdir=" + (dir() / "wd").string(), program("neuron_cc_wrapper").string(),
                     "compile", "--graph", graph().string(), "--output", (dir() / "trial.neff").string()},
                    flags(words));
  }
  static std::size_t lines_with(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
    return n;
  }
};

TEST_F(Explain, OtherFlagsMissWithTheWordsThatDiffer) {
  compile_with_o1();
  auto r = run_tool("neuron_cache", {"explain", graph().string()}, flags("-O2"));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "graph: " + graph().string() + " (22 bytes)\n"
                   "current: compiler version " + kStandinVersion + ", flags -O2\n"
                   "1 entry has this graph:\n"
                   "  " + kKeyO1 + ": done; flags added: -O2; flags removed: -O1; same compiler version\n"
                   "a run with the current flags and compiler (key " + kKeyO2 + kAsTheWrapperNamesIt +
                   ") will miss: no entry has this graph with these flags and this version\n");
  EXPECT_EQ(r.err, "");
}

TEST_F(Explain, SameFlagsHitWhenTargetIsAnEntryOrAKey) {
  compile_with_o1();
  fs::path entry = cache_root() / kKeyO1;
  std::string expected = "graph: " + (entry / "model.hlo_module.pb").string() + " (22 bytes)\n"
                         "current: compiler version " + kStandinVersion + ", flags -O1\n"
                         "1 entry has this graph:\n"
                         "  " + kKeyO1 + ": done; same flags; same compiler version\n"
                         "a run with the current flags and compiler (key " + kKeyO1 + ") will hit: entry " +
                         kKeyO1 + " is done\n";
  // The module name alone is what `neuron_cache ls` prints.
  for (const std::string& target : {entry.string(), kKeyO1, fs::path(kKeyO1).filename().string()}) {
    auto r = run_tool("neuron_cache", {"explain", target}, flags("-O1"));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(r.out, expected) << target;
  }
}

TEST_F(Explain, JsonHasTheSameFacts) {
  compile_with_o1();
  auto r = run_tool("neuron_cache", {"explain", graph().string(), "--json"}, flags("-O2"));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["target"], graph().string());
  EXPECT_EQ(j["current"]["version"], kStandinVersion);
  EXPECT_EQ(j["current"]["flags"], nlohmann::json::array({"-O2"}));
  EXPECT_EQ(j["current"]["key"], kKeyO2);
  ASSERT_EQ(j["matches"].size(), 1u);
  const auto& m = j["matches"][0];
  EXPECT_EQ(m["key"], kKeyO1);
  EXPECT_EQ(m["state"], "done");
  EXPECT_EQ(m["version"], kStandinVersion);
  EXPECT_EQ(m["flags_added"], nlohmann::json::array({"-O2"}));
  EXPECT_EQ(m["flags_removed"], nlohmann::json::array({"-O1"}));
  EXPECT_EQ(m["same_flags"], false);
  EXPECT_EQ(m["same_version"], true);
  EXPECT_EQ(j["outcome"], "miss");
  EXPECT_EQ(j["current"]["key_source"], "neuron_cc_wrapper");
  EXPECT_EQ(j["verdict"], "a run with the current flags and compiler (key " + kKeyO2 + kAsTheWrapperNamesIt +
                              ") will miss: no entry has this graph with these flags and this version");
}

TEST_F(Explain, BadTargetIsAUsageError) {
  compile_with_o1();
  auto r = run_tool("neuron_cache", {"explain", "nowhere"}, flags("-O2"));
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "neuron_cache: error: explain: 'nowhere' is no graph file, entry directory or key of the cache " +
                       cache_root().string() +
                       " (give a model.hlo_module.pb, an entry directory, "
                       "neuronxcc-<version>/MODULE_<hash>+<hash>, or MODULE_<hash>+<hash> as neuron_cache ls prints "
                       "it)\n");
}

TEST_F(Explain, MissingCacheIsUnusable) {
  auto r = run_tool("neuron_cache", {"explain", graph().string()}, flags("-O2"));
  EXPECT_EQ(r.exit_code, 3) << r.describe();
  EXPECT_EQ(r.err, "neuron_cache: error: cache " + cache_root().string() +
                       " is not a directory (name the cache with --cache_dir or NEURON_CC_FLAGS)\n");
}

TEST_F(Explain, LauncherHintsWhenItCompiledAGraphCachedUnderOtherFlags) {
  compile_with_o1();
  auto r = launch("-O2");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(fs::exists(cache_root() / kKeyO2 / "model.done")) << r.err;
  std::string hint = "neuron_parallel_compile: note: 1 graph(s) compiled in this run already had entries under other "
                     "compiler flags or another compiler version; `neuron_cache explain " +
                     (cache_root() / kKeyO2).string() + "` shows what differs\n";
  EXPECT_NE(r.err.find(hint), std::string::npos) << r.err;
  EXPECT_EQ(lines_with(r.err, "note: "), 1u) << r.err;

  // Nothing compiled the second time: no hint.
  auto again = launch("-O2");
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(lines_with(again.err, "note: "), 0u) << again.err;
}

TEST_F(Explain, LauncherSaysNothingOfAGraphNewToTheCache) {
  auto r = launch("-O2");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(fs::exists(cache_root() / kKeyO2 / "model.done")) << r.err;
  EXPECT_EQ(lines_with(r.err, "note: "), 0u) << r.err;
}

} // namespace
} // namespace npc::test
