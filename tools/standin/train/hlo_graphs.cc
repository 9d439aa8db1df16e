#include "hlo_graphs.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "hlo_builder.h"

namespace standin::train {
namespace {

constexpr long kTrainBatch = 8;  // micro-batch variant v uses (v + 1) * kTrainBatch rows
constexpr long kEvalBatch = 16;
constexpr char kLearningRate[] = "0.001";
constexpr char kInitLow[] = "-0.05";
constexpr char kInitHigh[] = "0.05";
constexpr char kMaxGradNorm[] = "1";

// Layer sizes as one rank sees them: each rank holds a column shard of
// every weight; activations are gathered back to the full width.
struct Dims {
  long layers;
  long shard;  // columns per rank
  long full;   // shard * world
  long world;
};

Dims dims_of(const ModelShape& shape) {
  const long world = std::max(1L, shape.world_size);
  const long shard = std::max(1L, shape.hidden / world);
  return {shape.layers, shard, shard * world, world};
}

std::string replica_groups(long world) {
  std::string groups = "replica_groups={{";
  for (long r = 0; r < world; ++r) groups += (r == 0 ? "" : ",") + std::to_string(r);
  return groups + "}}";
}

std::string metadata(const std::string& op) {
  return "metadata={op_type=\"" + op + "\" op_name=\"" + op + "\"}";
}

// A per-layer bias literal: it is what makes graph size grow with the
// hidden size as well as the depth, like the embedded constants of real
// graphs. Values are a fixed function of (layer, index).
Value bias_constant(HloBuilder& hlo, long layer, long width) {
  static constexpr long kLayerStride = 31;
  static constexpr long kIndexStride = 17;
  static constexpr long kModulus = 1000;
  std::vector<std::string> literals;
  literals.reserve(static_cast<std::size_t>(width));
  char buffer[16];
  for (long i = 0; i < width; ++i) {
    const long milli = (layer * kLayerStride + i * kIndexStride) % kModulus;
    std::snprintf(buffer, sizeof buffer, "%ld.%03ld", milli / kModulus, milli % kModulus);
    literals.emplace_back(buffer);
  }
  return hlo.vector_constant(literals);
}

struct Layer {
  Value input;   // [batch, full]
  Value relu;    // [batch, shard]
  Value output;  // [batch, full]
};

// dot + bias + relu, then all-gather of the shards when tensor-parallel.
Layer forward_layer(HloBuilder& hlo, const Dims& d, long layer, const Value& input, const Value& weight) {
  const long batch = input.shape.dims[0];
  const Shape local{{batch, d.shard}};
  const Value dot = hlo.instruction("dot", local, {input, weight},
                                    "lhs_contracting_dims={1}, rhs_contracting_dims={0}, " + metadata("aten__mm"));
  const Value bias = bias_constant(hlo, layer, d.shard);
  const Value bias_b = hlo.instruction("broadcast", local, {bias}, "dimensions={1}");
  const Value sum = hlo.instruction("add", local, {dot, bias_b}, metadata("aten__add"));
  const Value zero = hlo.scalar_constant("0");
  const Value zero_b = hlo.instruction("broadcast", local, {zero}, "dimensions={}");
  const Value relu = hlo.instruction("maximum", local, {sum, zero_b}, metadata("aten__relu"));
  Value output = relu;
  if (d.world > 1) {
    output = hlo.instruction("all-gather", Shape{{batch, d.full}}, {relu},
                             "channel_id=" + std::to_string(layer + 1) + ", " + replica_groups(d.world) +
                                 ", dimensions={1}, use_global_device_ids=true");
  }
  return {input, relu, output};
}

std::vector<Value> weight_parameters(HloBuilder& hlo, const Dims& d) {
  std::vector<Value> weights;
  for (long l = 0; l < d.layers; ++l) weights.push_back(hlo.parameter(Shape{{d.full, d.shard}}));
  return weights;
}

Value sum_all(HloBuilder& hlo, const Value& tensor) {
  const Value zero = hlo.scalar_constant("0");
  std::string dimensions = "dimensions={";
  for (std::size_t i = 0; i < tensor.shape.dims.size(); ++i) dimensions += (i == 0 ? "" : ",") + std::to_string(i);
  return hlo.instruction("reduce", Shape{}, {tensor, zero},
                         dimensions + "}, to_apply=" + hlo.add_computation());
}

// Forward pass over the input's rows; returns the layers and the scalar loss.
std::pair<std::vector<Layer>, Value> forward(HloBuilder& hlo, const Dims& d,
                                             const std::vector<Value>& weights, const Value& input) {
  std::vector<Layer> layers;
  Value activation = input;
  for (long l = 0; l < d.layers; ++l) {
    layers.push_back(forward_layer(hlo, d, l, activation, weights[static_cast<std::size_t>(l)]));
    activation = layers.back().output;
  }
  return {layers, sum_all(hlo, activation)};
}

// A training step over `batch` rows.
std::string train_graph(const Dims& d, long batch, GraphFormat format) {
  HloBuilder hlo;
  const Value input = hlo.parameter(Shape{{batch, d.full}});
  const std::vector<Value> weights = weight_parameters(hlo, d);
  const auto [layers, loss] = forward(hlo, d, weights, input);
  std::vector<Value> outputs{loss};
  const Value lr = hlo.scalar_constant(kLearningRate);
  for (long l = d.layers - 1; l >= 0; --l) {
    const Layer& layer = layers[static_cast<std::size_t>(l)];
    const Value& weight = weights[static_cast<std::size_t>(l)];
    const Value loss_b = hlo.instruction("broadcast", layer.relu.shape, {loss}, "dimensions={}");
    const Value grad_out = hlo.instruction("multiply", layer.relu.shape, {layer.relu, loss_b});
    Value grad_w = hlo.instruction("dot", weight.shape, {layer.input, grad_out},
                                   "lhs_contracting_dims={0}, rhs_contracting_dims={0}, " + metadata("aten__mm_backward"));
    if (d.world > 1) {
      grad_w = hlo.instruction("all-reduce", weight.shape, {grad_w},
                               "channel_id=" + std::to_string(d.layers + l + 1) + ", " + replica_groups(d.world) +
                                   ", use_global_device_ids=true, to_apply=" + hlo.add_computation());
    }
    const Value lr_b = hlo.instruction("broadcast", weight.shape, {lr}, "dimensions={}");
    const Value step = hlo.instruction("multiply", weight.shape, {grad_w, lr_b});
    outputs.push_back(hlo.instruction("subtract", weight.shape, {weight, step}, metadata("optimizer__sgd")));
  }
  return hlo.build(outputs, format);
}

std::string eval_graph(const Dims& d, GraphFormat format) {
  HloBuilder hlo;
  const Value input = hlo.parameter(Shape{{kEvalBatch, d.full}});
  const std::vector<Value> weights = weight_parameters(hlo, d);
  const auto [layers, loss] = forward(hlo, d, weights, input);
  return hlo.build({loss, layers.back().output}, format);
}

std::string init_graph(const Dims& d, GraphFormat format) {
  HloBuilder hlo;
  std::vector<Value> outputs;
  for (long l = 0; l < d.layers; ++l) {
    const Value low = hlo.scalar_constant(kInitLow);
    const Value high = hlo.scalar_constant(kInitHigh);
    outputs.push_back(hlo.instruction("rng", Shape{{d.full, d.shard}}, {low, high},
                                      "distribution=rng_uniform, " + metadata("aten__uniform")));
    outputs.push_back(bias_constant(hlo, l, d.shard));
  }
  return hlo.build(outputs, format);
}

// Gradient-norm clipping before a checkpoint: a path short trial runs
// never reach.
std::string late_graph(const Dims& d, GraphFormat format) {
  HloBuilder hlo;
  const std::vector<Value> weights = weight_parameters(hlo, d);
  Value total = hlo.scalar_constant("0");
  for (const Value& weight : weights) {
    const Value square = hlo.instruction("multiply", weight.shape, {weight, weight});
    total = hlo.instruction("add", Shape{}, {total, sum_all(hlo, square)});
  }
  const Value norm = hlo.instruction("sqrt", Shape{}, {total}, metadata("aten__norm"));
  const Value max_norm = hlo.scalar_constant(kMaxGradNorm);
  const Value bounded = hlo.instruction("maximum", Shape{}, {norm, max_norm});
  const Value scale = hlo.instruction("divide", Shape{}, {max_norm, bounded}, metadata("aten__clip_grad_norm"));
  std::vector<Value> outputs{norm};
  for (long l = 0; l < d.layers; ++l) {
    const Value& weight = weights[static_cast<std::size_t>(l)];
    const Value scale_b = hlo.instruction("broadcast", weight.shape, {scale}, "dimensions={}");
    const Value scaled = hlo.instruction("multiply", weight.shape, {weight, scale_b});
    const Value bias = bias_constant(hlo, l, d.shard);
    const Value bias_b = hlo.instruction("broadcast", weight.shape, {bias}, "dimensions={1}");
    outputs.push_back(hlo.instruction("add", weight.shape, {scaled, bias_b}));
  }
  return hlo.build(outputs, format);
}

}  // namespace

std::string make_graph(const GraphSpec& spec, const ModelShape& shape, GraphFormat format) {
  const Dims d = dims_of(shape);
  switch (spec.kind) {
    case GraphKind::kInit: return init_graph(d, format);
    case GraphKind::kTrain: return train_graph(d, (spec.variant + 1) * kTrainBatch, format);
    case GraphKind::kPartialBatch: return train_graph(d, spec.variant, format);
    case GraphKind::kEval: return eval_graph(d, format);
    case GraphKind::kLate: return late_graph(d, format);
  }
  return {};
}

}  // namespace standin::train
