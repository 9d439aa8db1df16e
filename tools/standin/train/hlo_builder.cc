#include "hlo_builder.h"

namespace standin::train {
namespace {

constexpr char kElementType[] = "f32";

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string joined;
  for (std::size_t i = 0; i < parts.size(); ++i) joined += (i == 0 ? "" : separator) + parts[i];
  return joined;
}

std::string dims_text(const std::vector<long>& dims) {
  std::vector<std::string> parts;
  for (long dim : dims) parts.push_back(std::to_string(dim));
  return join(parts, ",");
}

std::string operand_list(const std::vector<Value>& operands) {
  std::vector<std::string> parts;
  for (const Value& operand : operands) parts.push_back(operand.shape.with_layout() + " " + operand.name);
  return join(parts, ", ");
}

std::string tuple_shape(const std::vector<Value>& values, bool layout) {
  std::vector<std::string> parts;
  for (const Value& value : values) {
    parts.push_back(layout ? value.shape.with_layout() : value.shape.without_layout());
  }
  return "(" + join(parts, ", ") + ")";
}

}  // namespace

std::string Shape::without_layout() const {
  return std::string(kElementType) + "[" + dims_text(dims) + "]";
}

std::string Shape::with_layout() const {
  if (dims.empty()) return without_layout();
  // XLA's default layout lists dimensions minor-to-major: {n-1,...,0}.
  std::vector<long> minor_to_major;
  for (long d = static_cast<long>(dims.size()) - 1; d >= 0; --d) minor_to_major.push_back(d);
  return without_layout() + "{" + dims_text(minor_to_major) + "}";
}

HloBuilder::HloBuilder() {
  add_computation_ = next_name("AddComputation");
  const std::string x = next_name("x");
  const std::string y = next_name("y");
  const std::string sum = next_name("add");
  add_computation_text_ = add_computation_ + " (" + x.substr(1) + ": f32[], " + y.substr(1) +
                          ": f32[]) -> f32[] {\n" +
                          "  " + x + " = f32[] parameter(0)\n" +
                          "  " + y + " = f32[] parameter(1)\n" +
                          "  ROOT " + sum + " = f32[] add(f32[] " + x + ", f32[] " + y + ")\n" +
                          "}\n";
}

std::string HloBuilder::next_name(const std::string& hint) {
  return "%" + hint + "." + std::to_string(next_id_++);
}

Value HloBuilder::parameter(const Shape& shape) {
  const long index = static_cast<long>(parameters_.size());
  Value value{next_name("p" + std::to_string(index)), shape};
  parameters_.push_back(value);
  lines_.push_back(value.name + " = " + shape.with_layout() + " parameter(" + std::to_string(index) + ")");
  return value;
}

Value HloBuilder::scalar_constant(const std::string& literal) {
  Value value{next_name("constant"), Shape{}};
  lines_.push_back(value.name + " = f32[] constant(" + literal + ")");
  return value;
}

Value HloBuilder::vector_constant(const std::vector<std::string>& literals) {
  Value value{next_name("constant"), Shape{{static_cast<long>(literals.size())}}};
  lines_.push_back(value.name + " = " + value.shape.with_layout() + " constant({" +
                   join(literals, ", ") + "})");
  return value;
}

Value HloBuilder::instruction(const std::string& opcode, const Shape& shape,
                              const std::vector<Value>& operands, const std::string& attributes) {
  Value value{next_name(opcode), shape};
  lines_.push_back(value.name + " = " + shape.with_layout() + " " + opcode + "(" +
                   operand_list(operands) + ")" + (attributes.empty() ? "" : ", " + attributes));
  return value;
}

std::string HloBuilder::build(const std::vector<Value>& outputs) {
  const std::string root = next_name("tuple");
  const std::string entry = "%SyncTensorsGraph." + std::to_string(next_id_);
  std::vector<std::string> signature;
  for (const Value& parameter : parameters_) {
    signature.push_back(parameter.name.substr(1) + ": " + parameter.shape.without_layout());
  }
  std::string text = "HloModule " + entry.substr(1) + ", entry_computation_layout={" +
                     tuple_shape(parameters_, true) + "->" + tuple_shape(outputs, true) + "}\n\n";
  text += add_computation_text_ + "\n";
  text += "ENTRY " + entry + " (" + join(signature, ", ") + ") -> " + tuple_shape(outputs, false) + " {\n";
  for (const std::string& line : lines_) text += "  " + line + "\n";
  text += "  ROOT " + root + " = " + tuple_shape(outputs, true) + " tuple(" + operand_list(outputs) + ")\n";
  text += "}\n";
  return text;
}

}  // namespace standin::train
