#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// fold-batchnorm (O1): an inference BatchNormalization after a contraction becomes part of the
// contraction's weights and bias, computed at optimize time (channel_affine.h):
inline constexpr std::string_view kFoldBatchNormRewrite = R"rewrite(
  %y = Conv(%x, %W, %b)                              %z = Conv(%x, %W', %b')
  %z = BatchNormalization(%y, %γ, %β, %μ, %σ²)   →   s = γ / √(σ² + ε)
                                                     W'[m] = W[m]·s[m],  b' = (b − μ)·s + β
)rewrite";
// and likewise after ConvTranspose (weights [C_in, M/group, k...]: the scale follows the output
// channel of each group), Gemm (either transB) and MatMul. BatchNormalization normalizes axis
// 1, so a MatMul qualifies only when its output is 2-D ([N, C], A 2-D): for a batched MatMul
// axis 1 is not the axis its weight columns feed. The MatMul becomes Gemm(A, W', b').
//
// Conditions, each reported when it fails: BatchNormalization of the standard domain at opset
// 7–28, in inference form (training_mode 0 or absent; spatial 1 before opset 9; its optional
// statistics outputs unread), statistics that are constants of shape [C]; the contraction's
// output read by nothing else and not a graph output; constant weights and bias of the same
// floating-point dtype as the normalized value. Arithmetic is in double, rounded once to the
// weights' dtype. Weights shared with another node stay as they are: the folded ones are new.
class FoldBatchNorm : public Pass {
 public:
  std::string_view rewrite() const override { return kFoldBatchNormRewrite; }
  std::string_view name() const override { return "fold-batchnorm"; }
  std::string_view summary() const override {
    return "fold inference BatchNormalization into the weights and bias of the Conv/ConvTranspose/Gemm/MatMul before it";
  }
  std::vector<PassOptionInfo> options() const override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
