// neuron_cache misses after neuron_parallel_compile, on the stand-ins: a
// trial of 10 steps, then training runs that differ from it the ways users
// meet (a longer run reaching a graph the trial never did, other compiler
// flags, an entry removed since), each graph they compiled listed by cause.

#include <nlohmann/json.hpp>

#include "test_support.hpp"

namespace npc::test {
namespace {

class Misses : public CacheTest {
protected:
  // init + 2 train + eval = 4 graphs in 10 steps; a late graph at step 20.
  // `protocol`: the stand-in's (wrapper, torch-neuronx, torch-neuronx-legacy).
  std::vector<std::string> train(int steps, const std::string& protocol = "wrapper") {
    return {"--protocol", protocol, "--nproc_per_node", "2", "--steps_this_run", std::to_string(steps),
            "--graphs_per_step", "2", "--eval_every", "5", "--late_graph_step", "20", "--layers", "2", "--hidden",
            "64", "--graph_format", graph_format, "--workdir", (dir() / "train").string()};
  }
  std::string graph_format = "binary"; // the stand-in's dumps: binary HloModuleProto, or HLO text
  void precompile(int steps, const std::string& protocol = "wrapper") {
    std::vector<std::string> args = {"--parallel_compile_workdir=" + (dir() / "wd").string(),
                                     tool_path("standin_train").string()};
    for (auto& a : train(steps, protocol)) args.push_back(a);
    auto run = run_tool("neuron_parallel_compile", args);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
  }
  void training(int steps, std::map<std::string, std::string> env = {}, const std::string& protocol = "wrapper") {
    auto run = run_tool("standin_train", train(steps, protocol), std::move(env));
    ASSERT_EQ(run.exit_code, 0) << run.describe();
  }
  nlohmann::json misses_json() {
    auto run = run_tool("neuron_cache", {"misses", "--json"});
    EXPECT_EQ(run.exit_code, 0) << run.describe();
    return nlohmann::json::parse(run.out);
  }
  std::size_t records() const {
    std::size_t n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache_root() / ".npc" / "precompiles", ec)) n += e.is_regular_file();
    return n;
  }
};

TEST_F(Misses, EveryGraphTheTrainingRunsCompiledIsListedByCause) {
  precompile(10);
  ASSERT_EQ(records(), 1u);
  EXPECT_EQ(misses_json()["misses"].size(), 0u);
  // A run that takes no graph (none pending) records nothing: the trial's
  // record stays the last pre-compile.
  auto nothing = run_tool("neuron_parallel_compile",
                          {"--command", "compile", "--parallel_compile_workdir=" + (dir() / "wd").string()});
  ASSERT_EQ(nothing.exit_code, 0) << nothing.describe();
  EXPECT_EQ(records(), 1u);
  auto none = run_tool("neuron_cache", {"misses"});
  EXPECT_EQ(none.out.rfind("no graph compiled after the pre-compile of ", 0), 0u) << none.out;
  EXPECT_NE(none.out.find(": 4 graph(s)\n"), std::string::npos) << none.out;

  training(10);                                                          // what the trial saw: nothing new
  training(25);                                                          // the late graph
  training(10, {{"NEURON_CC_FLAGS", "--cache_dir=" + cache_root().string() + " -O1"}}); // 4 graphs under -O1
  nlohmann::json j = misses_json();
  EXPECT_EQ(j["entries"], 9u);
  ASSERT_EQ(j["misses"].size(), 5u) << j.dump(1);
  EXPECT_EQ(j["by_cause"], (nlohmann::json{{"not_in_trial", 1}, {"other_flags", 4}}));
  EXPECT_EQ(j["misses"][0]["cause"], "not_in_trial");
  EXPECT_EQ(j["misses"][0]["state"], "done");
  for (std::size_t i = 1; i < 5; ++i) {
    const auto& m = j["misses"][i];
    EXPECT_EQ(m["cause"], "other_flags");
    EXPECT_EQ(m["flags_added"], nlohmann::json::array({"-O1"}));
    EXPECT_EQ(m["flags_removed"], nlohmann::json::array());
    // The trial's graph: the same graph part, the flags part of no flags.
    const std::string key = m["key"], trial = m["trial_key"];
    EXPECT_EQ(key.substr(0, key.find('+')), trial.substr(0, trial.find('+')));
  }
  ASSERT_EQ(j["precompile"].size(), 1u);
  EXPECT_EQ(j["precompile"][0]["graphs"], 4);
  EXPECT_EQ(j["precompile"][0]["compiler_version"], kStandinVersion);

  auto text = run_tool("neuron_cache", {"misses"});
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_EQ(text.out.rfind("5 graph(s) compiled after the pre-compile of ", 0), 0u) << text.out;
  EXPECT_NE(text.out.find("\nnever produced by the trial (1):\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\nthe trial's graph under other compiler flags (4):\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("flags here, not in the trial: -O1"), std::string::npos) << text.out;

  // From another time: the header names it, and what the listing is judged against.
  auto since = run_tool("neuron_cache", {"misses", "--since", "2000-01-01"});
  ASSERT_EQ(since.exit_code, 0) << since.describe();
  EXPECT_EQ(since.out.rfind("5 graph(s) compiled since 2000-01-01T00:00:00.000Z, judged against the pre-compile of ", 0),
            0u)
      << since.out;
}

// A graph the trial never produced is compared with the trial's graphs: the
// nearest is named, with what differs and the likely cause.
TEST_F(Misses, AGraphTheTrialNeverProducedIsExplainedByTheNearestTrialGraph) {
  // As torch-neuronx dumps them (binary HloModuleProto), and as HLO text.
  for (const std::string format : {"binary", "text"}) {
    SCOPED_TRACE(format);
    graph_format = format;
    fs::remove_all(cache_root());
    precompile(10);
    std::vector<std::string> args = train(10);
    args.insert(args.end(), {"--last_batch", "3"});
    auto run = run_tool("standin_train", args);
    ASSERT_EQ(run.exit_code, 0) << run.describe();
    nlohmann::json j = misses_json();
    ASSERT_EQ(j["misses"].size(), 1u) << j.dump(1);
    const auto& m = j["misses"][0];
    EXPECT_EQ(m["cause"], "not_in_trial");
    EXPECT_EQ(m["hint"], "a smaller last batch?");
    EXPECT_EQ(m["differences"], nlohmann::json::array({"parameter 0 is f32[3,64] here, f32[8,64] there"}))
        << m.dump(1);
    // The trial's train0: the graph of a full batch of 8 rows, in the format asked for.
    const std::string trial_key = m["trial_key"];
    auto graph = test::read_text(cache_root() / trial_key / "model.hlo_module.pb");
    EXPECT_EQ(graph.rfind("HloModule ", 0) == 0, format == "text") << graph.substr(0, 100);

    auto text = run_tool("neuron_cache", {"misses"});
    ASSERT_EQ(text.exit_code, 0) << text.describe();
    EXPECT_NE(text.out.find("  nearest the trial's " + trial_key.substr(trial_key.find('/') + 1) +
                            ": parameter 0 is f32[3,64] here, f32[8,64] there: a smaller last batch?\n"),
              std::string::npos)
        << text.out;
  }
}

// Current torch-neuronx, and older releases, whose cache is
// DIR/neuron-compile-cache: the record is where neuron_cache finds the graphs.
TEST_F(Misses, TheLateGraphIsListedUnderEachFrameworkProtocol) {
  for (const std::string protocol : {"torch-neuronx", "torch-neuronx-legacy"}) {
    SCOPED_TRACE(protocol);
    fs::remove_all(cache_root());
    precompile(10, protocol);
    training(25, {}, protocol);
    nlohmann::json j = misses_json();
    ASSERT_EQ(j["misses"].size(), 1u) << j.dump(1);
    EXPECT_EQ(j["misses"][0]["cause"], "not_in_trial");
    // The framework's own entries are read as the wrapper's are: the trial's
    // graph nearest the late one (a train step, the late graph's signature
    // its own) is named, with what differs.
    EXPECT_TRUE(j["misses"][0]["trial_key"].is_string()) << j.dump(1);
    EXPECT_EQ(j["misses"][0]["hint"], "a step the trial did not run (an evaluation step, or one past the trial's last)?")
        << j.dump(1);
    ASSERT_EQ(j["precompile"].size(), 1u) << j.dump(1);
    EXPECT_EQ(j["precompile"][0]["graphs"], 4);
  }
}

TEST_F(Misses, AGraphOfThePrecompileRemovedSinceIsMadeAgain) {
  precompile(10);
  auto listed = run_tool("neuron_cache", {"ls", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.describe();
  const std::string key = nlohmann::json::parse(listed.out)["entries"][0]["key"];
  EXPECT_EQ(nlohmann::json::parse(listed.out)["entries"][0]["path"], (cache_root() / key).string());
  auto removed = run_tool("neuron_cache", {"rm", key});
  ASSERT_EQ(removed.exit_code, 0) << removed.describe();
  training(10);
  nlohmann::json j = misses_json();
  ASSERT_EQ(j["misses"].size(), 1u) << j.dump(1);
  EXPECT_EQ(j["misses"][0]["key"], key);
  EXPECT_EQ(j["misses"][0]["cause"], "made_again");
  EXPECT_EQ(j["misses"][0]["trial_key"], key);
}

// A record the cache refuses costs one warning; the pre-compile itself stands.
TEST_F(Misses, ARecordTheCacheRefusesIsAWarningAndTheRunStands) {
  fs::create_directories(cache_root() / ".npc");
  write_text(cache_root() / ".npc" / "precompiles", "a file where the records' folder belongs");
  std::vector<std::string> args = {"--parallel_compile_workdir=" + (dir() / "wd").string(),
                                   tool_path("standin_train").string()};
  for (auto& a : train(10)) args.push_back(a);
  auto run = run_tool("neuron_parallel_compile", args);
  EXPECT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_EQ(compiles(), 4u);
  EXPECT_NE(run.err.find("warning: cannot record the pre-compile in " +
                         (cache_root() / ".npc" / "precompiles").string()),
            std::string::npos)
      << run.err;
  auto misses = run_tool("neuron_cache", {"misses"});
  EXPECT_EQ(misses.exit_code, 3) << misses.describe();
  EXPECT_NE(misses.err.find("move that aside"), std::string::npos) << misses.err;
}

TEST_F(Misses, WithoutAPrecompileOnlySinceATimeAndABadTimeIsRefused) {
  training(10);
  auto no_record = run_tool("neuron_cache", {"misses"});
  EXPECT_EQ(no_record.exit_code, 1) << no_record.describe();
  EXPECT_NE(no_record.err.find("no pre-compile is recorded in " + cache_root().string()), std::string::npos)
      << no_record.err;
  EXPECT_NE(no_record.err.find("give --since TIME"), std::string::npos) << no_record.err;

  auto since = run_tool("neuron_cache", {"misses", "--json", "--since", "2000-01-01"});
  ASSERT_EQ(since.exit_code, 0) << since.describe();
  nlohmann::json j = nlohmann::json::parse(since.out);
  EXPECT_TRUE(j["precompile"].is_null());
  EXPECT_EQ(j["since"], "2000-01-01T00:00:00.000Z");
  EXPECT_EQ(j["by_cause"], (nlohmann::json{{"no_precompile", 4}}));

  auto bad = run_tool("neuron_cache", {"misses", "--since", "last tuesday"});
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
  EXPECT_NE(bad.err.find("--since has the bad value 'last tuesday'"), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty());
}

} // namespace
} // namespace npc::test
