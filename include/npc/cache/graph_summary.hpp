#pragma once
// What a graph is, in the words a user tells two graphs apart by: its
// module's name, its parameters' and results' shapes and element types, and
// how many instructions it has. Read from the serialized HLO module a
// framework writes (model.hlo_module.pb: a binary xla.HloModuleProto, only
// the fields proto/hlo_module.proto names), or from HLO text where a graph is
// text (the stand-in training script, older dumps).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <npc/util/result.hpp>

namespace npc::cache {

struct GraphShape {
  std::string type;                 // "f32", "bf16", "pred"; "tuple" for a tuple
  std::vector<std::int64_t> dims;   // an array's; empty for a scalar or a tuple
  std::string text;                 // as HLO text writes it, without layout: "f32[8,512]", "(f32[], s32[2])"
  friend bool operator==(const GraphShape& a, const GraphShape& b) { return a.text == b.text; }
};

struct GraphSummary {
  enum class Form { binary, text };
  Form form = Form::binary;
  std::string module_name;
  std::vector<GraphShape> parameters;  // the entry computation's, in order
  std::vector<GraphShape> results;     // the entry's result: a tuple's elements each, or the one array
  std::size_t instructions = 0;        // in every computation of the module
};

// Fails, saying why, for bytes that are neither HLO text nor a binary
// HloModuleProto (or one without a module name or entry signature).
[[nodiscard]] Result<GraphSummary> summarize_graph(std::string_view bytes);

// "f32", "bf16", ... for an xla.PrimitiveType number; "type<N>" for a newer one.
[[nodiscard]] std::string element_type_name(std::int32_t type);

} // namespace npc::cache
