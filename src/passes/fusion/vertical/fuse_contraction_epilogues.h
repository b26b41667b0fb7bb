#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// fuse-contraction-epilogues (O2): a contraction and the chain of post-ops after it become one
// ai.fusionopt node, computed as the contraction with oneDNN post-ops (eltwise and binary
// add/mul, applied in sequence while the output tile is in cache).
inline constexpr std::string_view kFuseContractionEpiloguesRewrite = R"rewrite(
  %c = Conv(%x, %w, %b)
  %s = Add(%c, %shortcut)      (same shape)        →   %y = ai.fusionopt::FusedConvAddRelu(%x, %w, %b, %shortcut)
  %y = Relu(%s)
)rewrite";
//   Relu(Add(MatMul(%a, %w), %bias[N]))              →   FusedMatMulAddRelu
//   Gelu-as-exported(Add(MatMul(%a, %w), %bias))     →   FusedMatMulAddGelu
//   Add(Mul(Cast(MatMulInteger(DynamicQuantizeLinear(%a), %wq)), %scales), %bias)
//                                                    →   FusedDynamicQMatMulAdd
//
// The chain starts at Conv, Gemm or MatMul (default domain, opset >= 7, float/float16/bfloat16,
// output of known rank, MatMul operands at least 2-D) and takes, in any order and as long as
// each value on the way has the next op as its only reader and is no graph output:
// - Add (or a two-input Sum, as old exporters write it) or Mul with a constant operand that is a scalar, per output channel (Conv: [C,1,..,1]
//   or [1,C,1,..,1] — axis 1; Gemm/MatMul: [N], [1,..,N] — the last axis) or of the output's
//   full shape; or with a non-constant operand of exactly the output's shape (a residual). A
//   constant over another axis ([1,C,1] for NCHW broadcasts over H) or a non-constant bias is
//   refused: post-ops index their operand per channel or per element, nothing in between.
//   "The output's shape" is proven, not assumed (shape_facts.h RuntimeShapes: equal dims or
//   symbols, or derived through the graph when inference left '?' dims);
// - an activation: Relu, LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Tanh, Gelu (opset 20),
//   Clip with constant bounds; and the exporters' multi-node SiLU (QuickGELU's x·σ(1.702x) too,
//   "FusedMatMulAddQuickGelu") and GELU (erf and tanh
//   forms, epilogue_patterns.h), whose inner values are read only inside the pattern.
// Every step keeps the contraction's dtype and output shape (a scalar of higher rank would
// broadcast it: refused). The chain stops before anything else; the result is the last value,
// whatever reads it. The function name lists the ops: "Fused" + contraction + steps
// ("FusedConvAddRelu").
//
// Chains are planned on the unmodified graph, then outlined. Where two contractions meet at
// one Add (ResNet's projection shortcut: Add(Conv(a), Conv(b))), the first in graph order
// takes it and the other ends before it. Outlining re-checks legality (outline.h); a chain
// it refuses is shortened from its end. (A residual operand cannot depend on the chain: every
// value inside has the next step as its only reader.)
//
// A dynamically quantized contraction (onnxruntime's quantize_dynamic: DynamicQuantizeLinear →
// MatMulInteger/ConvInteger → Cast → Mul by the product of the scales;
// patterns/quantized/dynamic_contraction.h) heads a chain the same way, as one node even with no
// step after it ("FusedDynamicQMatMulAddGelu"): the runtime's integer kernel quantizes the input,
// multiplies in int8 and applies the steps as post-ops. Its epilogue is narrower than a float
// contraction's: a per-channel constant Add only as the first step (the bias), scalar Add/Mul,
// activations, and one residual Add of the output's shape.
//
// Limits: ConvTranspose and Einsum are not matched. This pass runs before fuse-composites, so
// a GELU or SiLU after a contraction joins its chain rather than becoming a node of its own.
class FuseContractionEpilogues : public Pass {
 public:
  std::string_view rewrite() const override { return kFuseContractionEpiloguesRewrite; }
  std::string_view name() const override { return "fuse-contraction-epilogues"; }
  std::string_view summary() const override {
    return "fuse Conv/Gemm/MatMul with the bias, residual and activation ops that follow it";
  }
  std::vector<PassOptionInfo> options() const override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
