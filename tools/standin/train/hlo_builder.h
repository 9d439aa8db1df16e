// Emits HLO text in the format torch-xla dumps (HloModule header, a reduction
// computation, one ENTRY computation). Names come from a running counter, so
// the same sequence of calls always produces byte-identical text.
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
};

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
  std::string build(const std::vector<Value>& outputs);

 private:
  std::string next_name(const std::string& hint);

  long next_id_ = 1;
  std::string add_computation_;
  std::string add_computation_text_;
  std::vector<Value> parameters_;
  std::vector<std::string> lines_;
};

}  // namespace standin::train
