#include "hlo_builder.h"

#include <string>

#include "standin_hlo_module.pb.h"

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
  add_id_ = next_id_;
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

Value HloBuilder::record(const std::string& hint, const std::string& opcode, const Shape& shape) {
  const long id = next_id_;
  Value value{next_name(hint), shape, id};
  recorded_.push_back({id, value.name.substr(1), opcode, shape, {}, {}, -1, false});
  return value;
}

Value HloBuilder::parameter(const Shape& shape) {
  const long index = static_cast<long>(parameters_.size());
  Value value = record("p" + std::to_string(index), "parameter", shape);
  recorded_.back().parameter_number = index;
  parameters_.push_back(value);
  lines_.push_back(value.name + " = " + shape.with_layout() + " parameter(" + std::to_string(index) + ")");
  return value;
}

Value HloBuilder::scalar_constant(const std::string& literal) {
  Value value = record("constant", "constant", Shape{});
  recorded_.back().literal.push_back(std::stof(literal));
  lines_.push_back(value.name + " = f32[] constant(" + literal + ")");
  return value;
}

Value HloBuilder::vector_constant(const std::vector<std::string>& literals) {
  Value value = record("constant", "constant", Shape{{static_cast<long>(literals.size())}});
  for (const std::string& literal : literals) recorded_.back().literal.push_back(std::stof(literal));
  lines_.push_back(value.name + " = " + value.shape.with_layout() + " constant({" +
                   join(literals, ", ") + "})");
  return value;
}

Value HloBuilder::instruction(const std::string& opcode, const Shape& shape,
                              const std::vector<Value>& operands, const std::string& attributes) {
  Value value = record(opcode, opcode, shape);
  for (const Value& operand : operands) recorded_.back().operands.push_back(operand.id);
  recorded_.back().calls_add = attributes.find("to_apply=") != std::string::npos;
  lines_.push_back(value.name + " = " + shape.with_layout() + " " + opcode + "(" +
                   operand_list(operands) + ")" + (attributes.empty() ? "" : ", " + attributes));
  return value;
}

std::string HloBuilder::build(const std::vector<Value>& outputs, GraphFormat format) {
  return format == GraphFormat::kBinary ? build_binary(outputs) : build_text(outputs);
}

namespace {

constexpr int kF32 = 11;    // xla.PrimitiveType
constexpr int kTuple = 13;

void set_shape(standin::xla::ShapeProto& proto, const Shape& shape) {
  proto.set_element_type(kF32);
  for (long dim : shape.dims) proto.add_dimensions(dim);
}

void set_tuple(standin::xla::ShapeProto& proto, const std::vector<Value>& values) {
  proto.set_element_type(kTuple);
  for (const Value& value : values) set_shape(*proto.add_tuple_shapes(), value.shape);
}

}  // namespace

std::string HloBuilder::build_binary(const std::vector<Value>& outputs) {
  const long root_id = next_id_++;
  const long entry_id = next_id_;
  const std::string entry = "SyncTensorsGraph." + std::to_string(entry_id);
  standin::xla::HloModuleProto module;
  module.set_name(entry);
  module.set_entry_computation_name(entry);
  module.set_entry_computation_id(entry_id);
  module.set_id(entry_id);

  // The scalar add computation: two parameters and their sum (ids as in the text).
  standin::xla::HloComputationProto* add = module.add_computations();
  add->set_name(add_computation_.substr(1));
  add->set_id(add_id_);
  add->set_root_id(add_id_ + 3);
  for (long i = 0; i < 3; ++i) {
    standin::xla::HloInstructionProto* instruction = add->add_instructions();
    instruction->set_id(add_id_ + 1 + i);
    instruction->set_name(i == 0 ? "x" : i == 1 ? "y" : "add");
    instruction->set_opcode(i < 2 ? "parameter" : "add");
    if (i < 2) instruction->set_parameter_number(i);
    else {
      instruction->add_operand_ids(add_id_ + 1);
      instruction->add_operand_ids(add_id_ + 2);
    }
    instruction->mutable_shape()->set_element_type(kF32);
  }
  for (int i = 0; i < 2; ++i) add->mutable_program_shape()->add_parameters()->set_element_type(kF32);
  add->mutable_program_shape()->mutable_result()->set_element_type(kF32);

  standin::xla::HloComputationProto* computation = module.add_computations();
  computation->set_name(entry);
  computation->set_id(entry_id);
  computation->set_root_id(root_id);
  for (const Recorded& r : recorded_) {
    standin::xla::HloInstructionProto* instruction = computation->add_instructions();
    instruction->set_id(r.id);
    instruction->set_name(r.name);
    instruction->set_opcode(r.opcode);
    set_shape(*instruction->mutable_shape(), r.shape);
    if (r.parameter_number >= 0) instruction->set_parameter_number(r.parameter_number);
    for (long operand : r.operands) instruction->add_operand_ids(operand);
    if (r.calls_add) instruction->add_called_computation_ids(add_id_);
    if (r.opcode == "constant") {
      set_shape(*instruction->mutable_literal()->mutable_shape(), r.shape);
      for (float value : r.literal) instruction->mutable_literal()->add_f32s(value);
    }
  }
  standin::xla::HloInstructionProto* root = computation->add_instructions();
  root->set_id(root_id);
  root->set_name("tuple." + std::to_string(root_id));
  root->set_opcode("tuple");
  set_tuple(*root->mutable_shape(), outputs);
  for (const Value& output : outputs) root->add_operand_ids(output.id);

  standin::xla::ProgramShapeProto* program = computation->mutable_program_shape();
  for (const Value& parameter : parameters_) {
    set_shape(*program->add_parameters(), parameter.shape);
    program->add_parameter_names(parameter.name.substr(1));
  }
  set_tuple(*program->mutable_result(), outputs);
  *module.mutable_host_program_shape() = *program;
  return module.SerializeAsString();
}

std::string HloBuilder::build_text(const std::vector<Value>& outputs) {
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
