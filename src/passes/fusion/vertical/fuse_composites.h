#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// fuse-composites (O2): the row and activation composites exporters decompose, each outlined
// into one ai.fusionopt node whose body is the original ops (outline.h) and which a runtime
// recognises as one kernel (patterns/composite/composite.h lists the forms):
inline constexpr std::string_view kFuseCompositesRewrite = R"rewrite(
  %s = Add(%a, %b)                                   %s, %y = ai.fusionopt::FusedAddLayerNorm(%a, %b, %g, %be)
  %m = ReduceMean(%s) {axes: [-1]}
  %d = Sub(%s, %m)                                   function FusedAddLayerNorm(%x0, %x1, %x2, %x3) -> (%y0, %y1)
  %q = Pow(%d, 2.0)                          →       { the eleven original ops, 2.0 and 1e-12 as Constants }
  %v = ReduceMean(%q) {axes: [-1]}
  %n = Div(%d, Sqrt(Add(%v, 1e-12)))                 (%s is a result too when something else reads it,
  %y = Add(Mul(%n, %g), %be)                          as a residual stream does)
)rewrite";
//   FusedLayerNorm / FusedAddLayerNorm, FusedRMSNorm / FusedAddRMSNorm, FusedSoftmax
//   (Softmax(x·s + mask), Softmax(x/s), Softmax(Where(c, x·s, fill))), FusedGelu (erf and tanh
//   forms), FusedSilu (x·sigmoid(x)), FusedQuickGelu (x·sigmoid(alpha·x), CLIP's 1.702).
//
// Checked for every candidate (a near miss is reported as a rejection with its reason):
// default-domain ops; constants the caller cannot override (epsilon, scales, GELU's constants
// within float32 rounding); intermediates read only inside the pattern and no graph output;
// float32 data; a known rank and the normalized / softmax axis the last one (opset < 13
// Softmax flattens at its axis: accepted only when that is the last); ReduceMean axes in the
// opset's form; gamma and beta of shape [H] or [1, .., 1, H] with H the row's length (known
// or the same symbol) — otherwise the norm is fused without its affine tail; a residual Add
// prologue only when both addends may have the sum's shape; a softmax mask that may not widen
// the scores; LayerNormalization from opset 17, Gelu from 20, RMSNormalization from 23. "May":
// only a provable broadcast (different sizes, a 1 against more) refuses — exporters' attention
// reshapes leave unknown dims, and the runtime checks each run's shapes, running the body op by
// op where its row kernel does not apply.
//
// Limits: a composite that is already one standard op (a lone LayerNormalization, Softmax,
// Gelu, RMSNormalization) is left as it is — it is one kernel already (counted as
// standalone_<kind>_ops). Only float32 composites are fused. tf2onnx's LayerNorm spelling
// (mean and rsqrt folded into a scale and shift) and Swish with a beta are not recognised.
class FuseComposites : public Pass {
 public:
  std::string_view rewrite() const override { return kFuseCompositesRewrite; }
  std::string_view name() const override { return "fuse-composites"; }
  std::string_view summary() const override {
    return "fuse LayerNorm, RMSNorm (with a residual Add), Softmax with scale and mask, GELU and SiLU into one node each";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
