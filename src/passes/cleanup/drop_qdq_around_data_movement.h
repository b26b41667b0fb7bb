#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// drop-qdq-around-data-movement (O1): an op that only moves or selects values, between a
// DequantizeLinear and a QuantizeLinear of the same parameters, runs on the quantized values.
inline constexpr std::string_view kDropQdqAroundDataMovementRewrite = R"rewrite(
  %x = DequantizeLinear(%q, %s, %z)
  %p = MaxPool(%x) {kernel_shape: [3, 3]}          →   %y = MaxPool(%q) {kernel_shape: [3, 3]}
  %y = QuantizeLinear(%p, %s, %z)
)rewrite";
//   Q(Reshape(DQ(%q), %shape))             →   Reshape(%q, %shape)
//   Q(Concat(DQ(%a), DQ(%b)))              →   Concat(%a, %b)          (every input the same parameters)
//
// Exact: dequantizing, moving (or taking the max of) values and quantizing again with the same
// scale and zero point gives the values moved, since a value of the grid survives the round trip
// (the float error of (q - z)·s / s is far below the half step the rounding forgives). onnxruntime
// drops the same pairs (its QDQ "drop" rules). The ops: Reshape, Flatten, Squeeze, Unsqueeze,
// Transpose, Identity, Slice, Gather and GatherElements (their data input), Split, Concat,
// Expand, Tile, DepthToSpace, SpaceToDepth, MaxPool (no Indices output; opset 12 or later, which
// takes 8-bit types), and Resize in nearest mode (not tf_crop_and_resize, whose fill is a float); each must read 8-bit
// values at the model's opset.
//
// Conditions: both parameter sets constants a feed cannot replace, per tensor, equal value for
// value; each DequantizeLinear read by this op alone (else it stays for its other readers and
// only this read moves); the op's float result read by the QuantizeLinear alone and no graph
// output. The QuantizeLinear's output keeps its name and readers (the op now writes it).
class DropQdqAroundDataMovement : public Pass {
 public:
  std::string_view rewrite() const override { return kDropQdqAroundDataMovementRewrite; }
  std::string_view name() const override { return "drop-qdq-around-data-movement"; }
  std::string_view summary() const override {
    return "run MaxPool, Reshape, Concat, Resize (nearest), ... between a DQ and a Q of the same parameters on the "
           "quantized values";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
