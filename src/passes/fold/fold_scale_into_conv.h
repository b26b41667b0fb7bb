#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// fold-scale-into-conv (O1): a Mul or Add by a per-output-channel constant after a Conv,
// ConvTranspose or Gemm becomes part of its weights and bias (channel_affine.h):
inline constexpr std::string_view kFoldScaleIntoConvRewrite = R"rewrite(
  %y = Conv(%x, %W, %b)        %z = Conv(%x, %W', %b')      W'[m] = W[m]·s[m],  b' = b·s
  %z = Mul(%y, %s)         →
  %y = Conv(%x, %W)            %z = Conv(%x, %W, %b')       b' = a   (the bias is created)
  %z = Add(%y, %a)         →
)rewrite";
// repeatedly, so Conv → Mul → Add (the light models' Caffe2 affine layers) folds whole. The
// constant must broadcast over the output exactly per channel: aligned from the right against
// the output [N, C, spatial...], every dim 1 except axis 1, which is 1 or C — [C,1,1],
// [1,C,1,1], [1] and scalars qualify; [C] against NCHW does not (it runs along the last axis
// W), nor does anything that would raise the output's rank. For Gemm ([M, N]) that is [N],
// [1,N] or a scalar. Mul and Add are matched in either operand order, at opset 7 or later
// (numpy broadcasting). The contraction's output must have no other reader and not be a graph
// output; the constant must have the weights' floating-point dtype. Arithmetic is in double,
// rounded once; shared weights are never changed in place.
class FoldScaleIntoConv : public Pass {
 public:
  std::string_view rewrite() const override { return kFoldScaleIntoConvRewrite; }
  std::string_view name() const override { return "fold-scale-into-conv"; }
  std::string_view summary() const override {
    return "fold Mul/Add by a per-channel constant after Conv/ConvTranspose/Gemm into its weights and bias";
  }
  std::vector<PassOptionInfo> options() const override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
