// The stand-in training script through the compile entry: extraction leaves
// exactly the expected pending entries and cache-path log lines; a normal run
// on a cache that holds them compiled compiles nothing.

#include "test_support.hpp"

namespace npc::test {
namespace {

class TrainFlow : public CacheTest {
protected:
  // steps=10, eval_every=5, graphs_per_step=2, late graph at step 20:
  // init + 2 train + eval = 4 graphs reached.
  std::vector<std::string> train_args(int steps) {
    return {"--nproc_per_node", "2", "--steps_this_run", std::to_string(steps), "--graphs_per_step", "2",
            "--eval_every", "5", "--late_graph_step", "20", "--layers", "2", "--hidden", "64"};
  }
};

TEST_F(TrainFlow, ExtractionThenCompileThenNormalRunCompilesNothing) {
  fs::path path_log = dir() / "paths.log";
  auto extract = run_tool("standin_train", train_args(10),
                          {{"NEURON_EXTRACT_GRAPHS_ONLY", "1"}, {"NEURON_PARALLEL_COMPILE_CACHE_PATH_LOG", path_log.string()}});
  ASSERT_EQ(extract.exit_code, 0) << extract.describe();
  EXPECT_EQ(compiles(), 0u);
  auto found = entries();
  ASSERT_EQ(found.size(), 4u);
  // Two ranks, four graphs each: eight log lines naming the four entries.
  EXPECT_EQ(count_lines(path_log), 8u);
  std::string log = read_text(path_log);
  for (const auto& e : found) {
    std::string line = (e / "model.hlo_module.pb").string() + "\n";
    size_t first = log.find(line);
    ASSERT_NE(first, std::string::npos) << e;
    EXPECT_NE(log.find(line, first + 1), std::string::npos) << "each rank reports it";
    EXPECT_TRUE(fs::exists(e / "compile_flags.json"));
    EXPECT_FALSE(fs::exists(e / "model.neff"));
  }
  EXPECT_EQ(train_total_field(extract.out, "jit_compiles"), 0);

  for (const auto& e : found) {
    auto r = run_tool("neuron_cc_wrapper", {"compile-entry", e.string()});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
  }
  EXPECT_EQ(compiles(), 4u);

  auto normal = run_tool("standin_train", train_args(10));
  ASSERT_EQ(normal.exit_code, 0) << normal.describe();
  EXPECT_EQ(train_total_field(normal.out, "jit_compiles"), 0) << normal.out;
  EXPECT_EQ(train_total_field(normal.out, "cache_hits"), 8) << normal.out;
  EXPECT_EQ(compiles(), 4u);

  // A longer run reaches the late graph, which the trial never saw.
  auto longer = run_tool("standin_train", train_args(25));
  ASSERT_EQ(longer.exit_code, 0) << longer.describe();
  EXPECT_EQ(train_total_field(longer.out, "jit_compiles"), 1) << longer.out;
  EXPECT_EQ(compiles(), 5u);
}

} // namespace
} // namespace npc::test
