#include <npc/cache/graph_summary.hpp>

#include <array>
#include <cctype>
#include <optional>

#include "hlo_module.pb.h"

namespace npc::cache {

namespace {

// xla.PrimitiveType's numbers (xla/xla_data.proto), as HLO text names them.
constexpr std::array<std::string_view, 23> kElementTypes = {
    "invalid", "pred", "s8",  "s16",   "s32",   "s64",  "u8",    "u16",    "u32",      "u64", "f16", "f32",
    "f64",     "tuple", "opaque", "c64", "bf16", "token", "c128", "f8e5m2", "f8e4m3fn", "s4",  "u4"};

std::string joined_text(const std::vector<GraphShape>& shapes) {
  std::string text = "(";
  for (std::size_t i = 0; i < shapes.size(); ++i) text += (i == 0 ? "" : ", ") + shapes[i].text;
  return text + ")";
}

GraphShape tuple_of(std::vector<GraphShape> elements) {
  return {"tuple", {}, joined_text(elements)};
}

GraphShape array_of(std::string type, std::vector<std::int64_t> dims) {
  std::string text = type + "[";
  for (std::size_t i = 0; i < dims.size(); ++i) text += (i == 0 ? "" : ",") + std::to_string(dims[i]);
  return {std::move(type), std::move(dims), text + "]"};
}

// ---- binary ----

GraphShape shape_of(const npc::xla::ShapeProto& proto) {
  const std::string type = element_type_name(proto.element_type());
  if (type == "tuple") {
    std::vector<GraphShape> elements;
    for (const auto& e : proto.tuple_shapes()) elements.push_back(shape_of(e));
    return tuple_of(std::move(elements));
  }
  return array_of(type, {proto.dimensions().begin(), proto.dimensions().end()});
}

void set_signature(const npc::xla::ProgramShapeProto& program, GraphSummary& summary) {
  for (const auto& p : program.parameters()) summary.parameters.push_back(shape_of(p));
  GraphShape result = shape_of(program.result());
  if (result.type == "tuple")
    for (const auto& e : program.result().tuple_shapes()) summary.results.push_back(shape_of(e));
  else
    summary.results.push_back(std::move(result));
}

Result<GraphSummary> summarize_binary(std::string_view bytes) {
  npc::xla::HloModuleProto module;
  if (bytes.size() > static_cast<std::size_t>(INT32_MAX) ||
      !module.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return fail("neither HLO text nor a serialized HloModuleProto");
  if (module.name().empty() || module.computations_size() == 0)
    return fail("a serialized HloModuleProto without a module name or computations");
  GraphSummary summary;
  summary.form = GraphSummary::Form::binary;
  summary.module_name = module.name();
  const npc::xla::HloComputationProto* entry = nullptr;
  for (const auto& c : module.computations()) {
    summary.instructions += static_cast<std::size_t>(c.instructions_size());
    if ((module.entry_computation_id() != 0 && c.id() == module.entry_computation_id()) ||
        (!module.entry_computation_name().empty() && c.name() == module.entry_computation_name()))
      entry = &c;
  }
  if (!entry) entry = &module.computations(module.computations_size() - 1); // callees come first
  set_signature(module.has_host_program_shape() ? module.host_program_shape() : entry->program_shape(), summary);
  return summary;
}

// ---- text ----

class ShapeParser {
public:
  explicit ShapeParser(std::string_view text) : text_(text) {}

  std::optional<GraphShape> shape() {
    if (peek() == '(') {
      // Nested tuples this deep are no signature a framework writes: refused
      // before they could exhaust the stack.
      if (++depth_ > kMaxDepth) return std::nullopt;
      ++at_;
      std::vector<GraphShape> elements;
      while (peek() != ')') {
        auto e = shape();
        if (!e) return std::nullopt;
        elements.push_back(std::move(*e));
        if (peek() == ',') ++at_;
        skip_spaces();
        if (at_ >= text_.size()) return std::nullopt;
      }
      ++at_;
      --depth_;
      return tuple_of(std::move(elements));
    }
    std::string type;
    while (at_ < text_.size() && std::isalnum(static_cast<unsigned char>(text_[at_]))) type += text_[at_++];
    if (type.empty() || peek() != '[') return std::nullopt;
    ++at_;
    std::vector<std::int64_t> dims;
    while (peek() != ']') {
      if (text_.substr(at_, 2) == "<=") at_ += 2; // a dynamic dimension's bound
      std::int64_t dim = 0;
      bool digits = false;
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
        if (dim > (INT64_MAX - 9) / 10) return std::nullopt; // no dimension is that large
        dim = dim * 10 + (text_[at_++] - '0');
        digits = true;
      }
      if (!digits) return std::nullopt;
      dims.push_back(dim);
      if (peek() == ',') ++at_;
      else if (peek() != ']') return std::nullopt;
    }
    ++at_;
    if (peek() == '{') skip_braces(); // the layout
    return array_of(type, std::move(dims));
  }

  bool take(std::string_view word) {
    skip_spaces();
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

private:
  char peek() {
    skip_spaces();
    return at_ < text_.size() ? text_[at_] : '\0';
  }
  void skip_spaces() {
    while (at_ < text_.size() && text_[at_] == ' ') ++at_;
  }
  void skip_braces() {
    int depth = 0;
    do {
      if (text_[at_] == '{') ++depth;
      else if (text_[at_] == '}') --depth;
      ++at_;
    } while (depth > 0 && at_ < text_.size());
  }

  static constexpr int kMaxDepth = 64;
  std::string_view text_;
  std::size_t at_ = 0;
  int depth_ = 0;
};

bool is_instruction_line(std::string_view line) {
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  if (line.starts_with("ROOT ")) line.remove_prefix(5);
  std::size_t name = 0;
  while (name < line.size() && line[name] != ' ' && line[name] != '=') ++name;
  return name > 0 && line.substr(name).starts_with(" = ") && !line.starts_with("HloModule");
}

Result<GraphSummary> summarize_text(std::string_view text) {
  GraphSummary summary;
  summary.form = GraphSummary::Form::text;
  const std::size_t start = text.find("HloModule ") + 10;
  std::size_t end = start;
  while (end < text.size() && text[end] != ',' && text[end] != ' ' && text[end] != '\n') ++end;
  summary.module_name = std::string(text.substr(start, end - start));
  const std::size_t header_end = text.find('\n');
  const std::string_view header = text.substr(0, header_end);
  const std::size_t layout = header.find("entry_computation_layout={");
  if (summary.module_name.empty() || layout == std::string_view::npos)
    return fail("HLO text without a module name or entry_computation_layout");
  ShapeParser parser(header.substr(layout + 26));
  auto parameters = parser.shape();
  if (!parameters || parameters->type != "tuple" || !parser.take("->"))
    return fail("HLO text whose entry_computation_layout cannot be read");
  auto result = parser.shape();
  if (!result) return fail("HLO text whose entry_computation_layout cannot be read");
  // The parameters' tuple is the list itself.
  ShapeParser again(header.substr(layout + 26));
  again.take("(");
  while (!again.take(")")) {
    auto p = again.shape();
    if (!p) return fail("HLO text whose entry_computation_layout cannot be read");
    summary.parameters.push_back(std::move(*p));
    again.take(",");
  }
  if (result->type == "tuple") {
    ShapeParser elements(result->text);
    elements.take("(");
    while (!elements.take(")")) {
      auto e = elements.shape();
      if (!e) break;
      summary.results.push_back(std::move(*e));
      elements.take(",");
    }
  } else {
    summary.results.push_back(std::move(*result));
  }
  std::size_t at = header_end == std::string_view::npos ? text.size() : header_end + 1;
  while (at < text.size()) {
    std::size_t next = text.find('\n', at);
    if (next == std::string_view::npos) next = text.size();
    if (is_instruction_line(text.substr(at, next - at))) ++summary.instructions;
    at = next + 1;
  }
  return summary;
}

bool looks_like_text(std::string_view bytes) {
  std::size_t i = 0;
  while (i < bytes.size() && std::isspace(static_cast<unsigned char>(bytes[i]))) ++i;
  return bytes.substr(i).starts_with("HloModule ");
}

} // namespace

std::string element_type_name(std::int32_t type) {
  if (type > 0 && static_cast<std::size_t>(type) < kElementTypes.size()) return std::string(kElementTypes[type]);
  return "type" + std::to_string(type);
}

Result<GraphSummary> summarize_graph(std::string_view bytes) {
  if (looks_like_text(bytes)) return summarize_text(bytes);
  return summarize_binary(bytes);
}

} // namespace npc::cache
