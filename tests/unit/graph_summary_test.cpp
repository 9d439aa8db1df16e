// cache/graph_summary and cache/nearest_graph: a graph read as a user tells
// two graphs apart (HLO text, and the binary HloModuleProto frameworks write,
// built here with the schema's own classes), and the trial's graph nearest a
// graph with what differs and the likely cause.

#include <npc/cache/graph_summary.hpp>
#include <npc/cache/nearest_graph.hpp>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/key.hpp>
#include <npc/storage/local.hpp>
#include <npc/util/sha256.hpp>

#include "files.hpp"
#include "hlo_module.pb.h"
#include "temp_dir.hpp"

namespace npc::cache {
namespace {

// HLO text as torch-xla dumps it (and the stand-in training script writes).
std::string hlo_text(long batch, bool eval = false) {
  const std::string b = std::to_string(batch);
  std::string text = "HloModule SyncTensorsGraph." + std::to_string(40 + batch) +
                     ", entry_computation_layout={(f32[" + b + ",512]{1,0}, f32[512,64]{1,0}" +
                     (eval ? "" : ", f32[]") + ")->(f32[], f32[" + b + ",64]{1,0})}\n\n";
  text += "%AddComputation.1 (x.2: f32[], y.3: f32[]) -> f32[] {\n"
          "  %x.2 = f32[] parameter(0)\n  %y.3 = f32[] parameter(1)\n"
          "  ROOT %add.4 = f32[] add(f32[] %x.2, f32[] %y.3)\n}\n\n";
  text += "ENTRY %SyncTensorsGraph.9 (p0.5: f32[" + b + ",512], p1.6: f32[512,64]) -> (f32[], f32[" + b +
          ",64]) {\n"
          "  %p0.5 = f32[" + b + ",512]{1,0} parameter(0)\n"
          "  %p1.6 = f32[512,64]{1,0} parameter(1)\n"
          "  %dot.7 = f32[" + b + ",64]{1,0} dot(f32[" + b + ",512]{1,0} %p0.5, f32[512,64]{1,0} %p1.6)\n"
          "  ROOT %tuple.8 = (f32[], f32[" + b + ",64]{1,0}) tuple(f32[] %c, f32[" + b + ",64]{1,0} %dot.7)\n}\n";
  return text;
}

void set_shape(npc::xla::ShapeProto& shape, int type, std::vector<std::int64_t> dims) {
  shape.set_element_type(type);
  for (auto d : dims) shape.add_dimensions(d);
}

// A binary module: entry (id 7) takes bf16[B,512] and s32[B], returns (f32[]).
std::string hlo_binary(long batch, bool host_program_shape) {
  npc::xla::HloModuleProto module;
  module.set_name("SyncTensorsGraph.301");
  module.set_entry_computation_name("SyncTensorsGraph.301");
  module.set_entry_computation_id(7);
  auto* callee = module.add_computations();
  callee->set_name("AddComputation.2");
  callee->set_id(2);
  for (int i = 0; i < 3; ++i) callee->add_instructions()->set_opcode("add");
  auto* entry = module.add_computations();
  entry->set_name("SyncTensorsGraph.301");
  entry->set_id(7);
  for (int i = 0; i < 5; ++i) entry->add_instructions()->set_opcode("dot");
  npc::xla::ProgramShapeProto& program = host_program_shape ? *module.mutable_host_program_shape()
                                                             : *entry->mutable_program_shape();
  set_shape(*program.add_parameters(), 16, {batch, 512});
  set_shape(*program.add_parameters(), 4, {batch});
  program.mutable_result()->set_element_type(13);
  set_shape(*program.mutable_result()->add_tuple_shapes(), 11, {});
  return module.SerializeAsString();
}

std::vector<std::string> texts(const std::vector<GraphShape>& shapes) {
  std::vector<std::string> all;
  for (const auto& s : shapes) all.push_back(s.text);
  return all;
}

TEST(GraphSummary, HloTextGivesItsModuleSignatureAndInstructionCount) {
  auto summary = summarize_graph(hlo_text(8));
  ASSERT_TRUE(summary) << summary.error();
  EXPECT_EQ(summary->form, GraphSummary::Form::text);
  EXPECT_EQ(summary->module_name, "SyncTensorsGraph.48");
  EXPECT_EQ(texts(summary->parameters), (std::vector<std::string>{"f32[8,512]", "f32[512,64]", "f32[]"}));
  EXPECT_EQ(texts(summary->results), (std::vector<std::string>{"f32[]", "f32[8,64]"}));
  EXPECT_EQ(summary->parameters[0].dims, (std::vector<std::int64_t>{8, 512}));
  EXPECT_EQ(summary->instructions, 7u);
}

TEST(GraphSummary, ABinaryHloModuleProtoGivesTheSameFromTheEntryComputation) {
  for (bool host : {true, false}) {
    auto summary = summarize_graph(hlo_binary(8, host));
    ASSERT_TRUE(summary) << summary.error();
    EXPECT_EQ(summary->form, GraphSummary::Form::binary);
    EXPECT_EQ(summary->module_name, "SyncTensorsGraph.301");
    EXPECT_EQ(texts(summary->parameters), (std::vector<std::string>{"bf16[8,512]", "s32[8]"})) << host;
    EXPECT_EQ(texts(summary->results), std::vector<std::string>{"f32[]"});
    EXPECT_EQ(summary->instructions, 8u);
  }
}

TEST(GraphSummary, FieldsTheSchemaDoesNotNameAreSkipped) {
  // Field 8 (input_output_alias, a message) and 5 (id, a varint), as XLA writes them.
  std::string bytes = hlo_binary(8, true) + std::string("\x42\x02\x0a\x00\x28\x07", 6);
  auto summary = summarize_graph(bytes);
  ASSERT_TRUE(summary) << summary.error();
  EXPECT_EQ(summary->parameters.size(), 2u);
}

TEST(GraphSummary, ANameThatIsNotUtf8IsReadAsItIs) {
  npc::xla::HloModuleProto module;
  module.ParseFromString(hlo_binary(8, true));
  module.set_name("Sync\xff.1");
  auto summary = summarize_graph(module.SerializeAsString());
  ASSERT_TRUE(summary) << summary.error();
  EXPECT_EQ(summary->module_name, "Sync\xff.1");
}

TEST(GraphSummary, BytesThatAreNeitherAreRefusedSayingSo) {
  auto garbage = summarize_graph(std::string("\xff\xff\xff\xff", 4));
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error(), "neither HLO text nor a serialized HloModuleProto");
  auto empty = summarize_graph("");
  ASSERT_FALSE(empty);
  auto headless = summarize_graph("HloModule m\n\nENTRY %m () -> f32[] {\n}\n");
  ASSERT_FALSE(headless);
  EXPECT_EQ(headless.error(), "HLO text without a module name or entry_computation_layout");
  auto huge = summarize_graph("HloModule m, entry_computation_layout={(f32[" + std::string(30, '5') + "])->f32[]}\n");
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.error(), "HLO text whose entry_computation_layout cannot be read");
  EXPECT_EQ(element_type_name(16), "bf16");
  EXPECT_EQ(element_type_name(99), "type99");
}

GraphSummary summary_of(const std::string& bytes) {
  auto s = summarize_graph(bytes);
  EXPECT_TRUE(s) << s.error();
  return s ? *s : GraphSummary{};
}

TEST(CompareGraphs, OnlyTheFirstDimensionSmallerIsASmallerLastBatch) {
  auto c = compare_graphs(summary_of(hlo_text(3)), summary_of(hlo_text(8)));
  EXPECT_EQ(c.differences, (std::vector<std::string>{"parameter 0 is f32[3,512] here, f32[8,512] there",
                                                     "result 1 is f32[3,64] here, f32[8,64] there"}));
  EXPECT_EQ(c.hint, "a smaller last batch?");
  EXPECT_EQ(compare_graphs(summary_of(hlo_text(16)), summary_of(hlo_text(8))).hint,
            "a larger batch than the trial's?");
}

TEST(CompareGraphs, AnotherParameterCountIsAStepTheTrialDidNotRun) {
  auto c = compare_graphs(summary_of(hlo_text(8, true)), summary_of(hlo_text(8)));
  EXPECT_EQ(c.differences, std::vector<std::string>{"2 parameters here, 3 there"});
  EXPECT_EQ(c.hint, "a step the trial did not run (an evaluation step, or one past the trial's last)?");
}

TEST(CompareGraphs, AnotherElementTypeIsAnotherPrecisionAndTheSameSignatureDiffersInside) {
  std::string f32 = hlo_text(8), bf16 = f32;
  for (std::size_t at = bf16.find("f32[8,512]"); at != std::string::npos; at = bf16.find("f32[8,512]", at))
    bf16.replace(at, 3, "bf16");
  EXPECT_EQ(compare_graphs(summary_of(bf16), summary_of(f32)).hint,
            "another precision (a cast, or XLA_USE_BF16 / XLA_DOWNCAST_BF16 set otherwise)?");
  auto same = compare_graphs(summary_of(f32), summary_of(f32));
  EXPECT_EQ(same.differences, std::vector<std::string>{"the same parameters, results and instruction count"});
  EXPECT_EQ(same.hint, "the graph differs inside (a constant, or an operation): a setting other than the trial's?");
}

class NearestTrialGraphTest : public test::TempDirTest {
protected:
  CacheKey put(const std::string& graph) {
    CacheKey key = make_key(util::sha256_hex(graph), {}, "2.0.0");
    test::write_text(dir() / "cache" / key.relative_path() / "model.hlo_module.pb", graph);
    return key;
  }
};

TEST_F(NearestTrialGraphTest, TheTrialsNearestGraphIsNamedWithWhatDiffers) {
  const CacheKey eval = put(hlo_text(8, true));
  const CacheKey train = put(hlo_text(8));
  const CacheKey binary = put(hlo_binary(8, true));
  const CacheKey missing = make_key(util::sha256_hex("evicted"), {}, "2.0.0"); // its graph is gone
  const storage::LocalStorage storage(dir() / "cache", dir() / "trash");
  NearestTrialGraph nearest(storage, {eval, missing, train, binary});

  auto verdict = nearest.judge(put(hlo_text(3)));
  EXPECT_TRUE(verdict.undecodable.empty()) << verdict.undecodable;
  ASSERT_TRUE(verdict.trial_key);
  EXPECT_EQ(*verdict.trial_key, train);
  EXPECT_EQ(verdict.comparison.hint, "a smaller last batch?");

  auto of_binary = nearest.judge(put(hlo_binary(2, false)));
  ASSERT_TRUE(of_binary.trial_key);
  EXPECT_EQ(*of_binary.trial_key, binary);
  EXPECT_EQ(of_binary.comparison.hint, "a smaller last batch?");

  auto undecodable = nearest.judge(put("not a graph"));
  EXPECT_EQ(undecodable.undecodable, "neither HLO text nor a serialized HloModuleProto");
  EXPECT_FALSE(undecodable.trial_key);
}

TEST_F(NearestTrialGraphTest, NoTrialGraphLeftToReadNamesNone) {
  const storage::LocalStorage storage(dir() / "cache", dir() / "trash");
  NearestTrialGraph nearest(storage, {make_key(util::sha256_hex("gone"), {}, "2.0.0")});
  auto verdict = nearest.judge(put(hlo_text(3)));
  EXPECT_TRUE(verdict.undecodable.empty());
  EXPECT_FALSE(verdict.trial_key);
}

} // namespace
} // namespace npc::cache
