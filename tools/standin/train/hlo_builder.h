// Emits a graph as torch-xla dumps it (HloModule header, a reduction
// computation, one ENTRY computation): HLO text, or the binary
// xla.HloModuleProto that torch-neuronx writes as model.hlo_module.pb
// (standin_hlo_module.proto). Names come from a running counter, so the same sequence
// of calls always produces byte-identical output.
#pragma once

#include <string>
#include <vector>

namespace standin::train {

struct Shape {
  std::vector<long> dims;  // empty: scalar

  std::string with_layout() const;     // "f32[8,256]{1,0}"
  std::string without_layout() const;  // "f32[8,256]"
};

struct Value {
  std::string name;  // "%dot.12"
  Shape shape;
  long id = 0;       // 12
};

enum class GraphFormat { kText, kBinary };

class HloBuilder {
 public:
  HloBuilder();

  Value parameter(const Shape& shape);
  Value scalar_constant(const std::string& literal);
  Value vector_constant(const std::vector<std::string>& literals);
  // "%<opcode>.<n> = <shape> <opcode>(<operands>)<, attributes>"
  Value instruction(const std::string& opcode, const Shape& shape,
                    const std::vector<Value>& operands, const std::string& attributes = "");

  // Name of the scalar add computation, for reduce and all-reduce.
  const std::string& add_computation() const { return add_computation_; }

  // The whole module, whose ENTRY returns a tuple of `outputs`.
  std::string build(const std::vector<Value>& outputs, GraphFormat format = GraphFormat::kText);

 private:
  // An ENTRY instruction, as the binary form writes it.
  struct Recorded {
    long id;
    std::string name;  // without '%'
    std::string opcode;
    Shape shape;
    std::vector<long> operands;
    std::vector<float> literal;  // a constant's values
    long parameter_number = -1;
    bool calls_add = false;      // reduce and all-reduce apply the add computation
  };
  std::string build_text(const std::vector<Value>& outputs);
  std::string build_binary(const std::vector<Value>& outputs);
  Value record(const std::string& hint, const std::string& opcode, const Shape& shape);
  long add_id_ = 0;
  std::vector<Recorded> recorded_;
  std::string next_name(const std::string& hint);

  long next_id_ = 1;
  std::string add_computation_;
  std::string add_computation_text_;
  std::vector<Value> parameters_;
  std::vector<std::string> lines_;
};

}  // namespace standin::train
