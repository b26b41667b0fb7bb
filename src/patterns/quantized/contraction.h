// The quantized contraction unit: the QDQ form of one integer kernel (DESIGN.md §5, 6), which
// the fusion pass outlines (fuse-quantized-contractions) and the runtimes recognise in the
// outlined body — one matcher for both, reading constants through a ConstantOf.
//
//   %x  = DequantizeLinear(%xq, %xs, %xz)          per tensor, int8/uint8
//   %w  = DequantizeLinear(%wq, %ws, %wz)          %wq constant int8/uint8; per tensor, or per
//                                                  output channel (Conv axis 0, MatMul's B axis 1,
//                                                  Gemm's B axis 1, or 0 with transB)
//   %b  = DequantizeLinear(%bq, %bs, %bz)          optional: a constant int32/int8 bias, or a
//                                                  float constant in its place
//   %c  = Conv(%x, %w, %b) | Gemm(%x, %w, %b) | MatMul(%x, %w) [→ Add(·, %b)]
//   ... epilogue steps, each the only reader of the value before it:
//         an activation (Relu, LeakyRelu, Clip with constant bounds, Sigmoid, Tanh, HardSwish,
//         HardSigmoid, Gelu),
//         a round trip Q → DQ with the same constant per-tensor parameters (the intermediate
//         rounding the model asks for, kept: the kernel rounds there too),
//         once, a residual Add(·, DequantizeLinear(%r, %rs, %rz)) of the output's shape, %r
//         8-bit per tensor (ResNet's shortcut),
//   %y  = QuantizeLinear(·, %ys, %yz)              per tensor, int8/uint8: the unit's end
//   optionally %xq = QuantizeLinear(%f, %xs, %xz) before it, and DequantizeLinear(%y, %ys, %yz)
//   after it (LeadingQuantize, TrailingDequantize): the unit then reads and writes float
//
// A kernel computes the unit as acc = Σ (xq - xz)(wq - wz) in int32, scaled by xs·ws, plus
// the bias, the steps in float, and the requantization into %y: what the ops compute, to the
// rounding of a float multiply (the int32 accumulator is exact where the ops' float sum rounds).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "ir/why_not.h"

namespace fusionopt::quantized {

// The constant a value holds in the context the matcher reads: in a graph, an initializer a
// feed cannot replace or a Constant node; in an outlined body, a Constant node or a formal
// whose argument is such a constant. Null for anything else.
using ConstantOf = std::function<TensorPtr(const Value*)>;

// The constants of a model's graphs: initializers a feed cannot replace (the model's IR version
// decides) and Constant nodes.
ConstantOf GraphConstantsOf(const Model& model);

bool IsQuantizeLinear(const Node& node);    // ONNX's, or onnxruntime's com.microsoft form
bool IsDequantizeLinear(const Node& node);

// A QuantizeLinear's or DequantizeLinear's constant parameters.
struct Quantization {
  TensorPtr scale;
  TensorPtr zero_point;          // null when omitted
  DataType type = DataType::kUndefined;  // the quantized values' type
  std::optional<int64_t> axis;   // per axis (against the quantized tensor's rank); nullopt per tensor

  bool per_tensor() const { return !axis; }
  std::vector<float> Scales() const;          // float values (float16 scales widened)
  std::vector<int32_t> ZeroPoints() const;    // {0} when omitted
};

// Two per-tensor parameter sets equal value for value (a round trip's Q and DQ; the DQ and Q
// around data movement).
bool SameQuantization(const Quantization& a, const Quantization& b);

// The parameters of `node` when they are constants, not blocked, of a float scale and a zero
// point of the quantized type; `rank` is the rank of the quantized tensor (for the axis).
Decided<Quantization> ConstantQuantization(const Node& node, size_t rank, const ConstantOf& constant_of);

// The constant per-tensor parameters `value` was dequantized with, when a DequantizeLinear made it;
// nullopt otherwise (another producer, per-axis or non-constant parameters).
std::optional<Quantization> PerTensorDequantization(const Value& value, const ConstantOf& constant_of);

struct EpilogueStep {
  enum class Kind { kActivation, kRoundTrip, kResidual };
  Kind kind = Kind::kActivation;
  const Node* node = nullptr;         // the activation, the round trip's QuantizeLinear, the residual's Add
  const Node* dequantize = nullptr;   // the round trip's DequantizeLinear, or the residual's
};

struct QuantizedContraction {
  const Node* contraction = nullptr;
  const Node* input = nullptr;            // DequantizeLinear of the activation
  const Node* weights = nullptr;          // DequantizeLinear of the constant weights
  const Node* bias_dequantize = nullptr;  // DequantizeLinear of a constant integer bias, or null
  const Value* bias = nullptr;            // the bias the contraction or the Add reads, or null
  const Node* bias_add = nullptr;         // MatMul's Add of the bias, or null
  std::vector<EpilogueStep> steps;
  const Node* output = nullptr;           // the QuantizeLinear that ends the unit
  // Optional ends, each taken by the fusion pass where no other unit claims it (LeadingQuantize,
  // TrailingDequantize): the QuantizeLinear that makes %xq from a float input (the kernel then
  // quantizes its input itself), and the DequantizeLinear after %y (the kernel writes the round
  // trip's float values).
  const Node* input_quantize = nullptr;
  const Node* output_dequantize = nullptr;

  std::vector<const Node*> Nodes() const;  // every member, in graph order
  const EpilogueStep* residual() const;     // the residual step, or null
};

// The unit around `contraction` (Conv, MatMul or Gemm of the default domain), or why not. In a
// graph, values inside the unit other than %x and %w must have their next member as their only
// reader and be no graph output; %x's and %w's DequantizeLinear may be shared with other
// readers (the pass gives the unit its own copy).
Decided<QuantizedContraction> MatchQuantizedContraction(const Node& contraction, const ConstantOf& constant_of);

// The QuantizeLinear that alone feeds the unit's input DequantizeLinear, with its parameters,
// when that DequantizeLinear feeds the contraction alone: %x = DQ(Q(%f)) is the float %f rounded
// to the input's grid, which the kernel can do itself. Null otherwise, and for a float16 or
// bfloat16 %f (the kernels quantize and write float32 only).
const Node* LeadingQuantize(const QuantizedContraction& unit, const ConstantOf& constant_of);
// The DequantizeLinear that alone reads the unit's output, with its parameters: DQ(Q(·)) is the
// round trip the kernel can end with, writing float (a residual then dequantized first). Null
// otherwise, and where its scale (the float it writes) is not float32.
const Node* TrailingDequantize(const QuantizedContraction& unit, const ConstantOf& constant_of);

// The activations an epilogue step may be (each has a post-op in both runtimes).
bool IsEpilogueActivation(const Node& node, const ConstantOf& constant_of);

}  // namespace fusionopt::quantized
