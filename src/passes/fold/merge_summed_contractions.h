#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// merge-summed-contractions (O1): contractions of one input whose outputs are added are one
// contraction with the summed weights and biases — convolution and matrix product are linear
// (what RepVGG / MobileOne re-parameterisation does to their training-time branches):
inline constexpr std::string_view kMergeSummedContractionsRewrite = R"rewrite(
  %a = Conv(%x, %Wa[M,C,3,3], %ba) {pads: 1}
  %b = Conv(%x, %Wb[M,C,1,1], %bb) {pads: 0}         %y = Conv(%x, %W, %b) {pads: 1}
  %s = Add(%a, %b)                             →     W = Wa + pad(Wb) + I,  b = ba + bb
  %y = Add(%s, %x)                                   (I: the identity kernel, M = C)
)rewrite";
//   %y = Add(MatMul(%x, %A), MatMul(%x, %B))     →     %y = MatMul(%x, A + B)
//
// The sum is a tree of Add / Sum nodes whose inner values are read only inside it; its leaves
// are grouped by the contraction they can join, and what joins nothing stays an addend of the
// merged contraction. Conv members: constant weight (and bias), the same strides, dilations
// and group, explicit pads (auto_pad NOTSET), and kernels that line up once the smaller ones
// are padded with zeros around their centre — pad + dilation·(K − k)/2 the same for every
// member on every side (a 1×1 with pads 0 beside a 3×3 with pads 1). The input itself is a
// member when the strides are 1 and the group's input and output channels agree (an identity
// kernel) — and so is an inference BatchNormalization of the input with constant statistics
// (the identity branch as RepVGG and MobileOne train it): a diagonal kernel of its scale
// γ/√(σ² + ε) and a bias of its shift β − μ·scale. Such a BatchNormalization that does not fold
// (training mode, statistics that are not constant [C], its statistics read) stays an addend,
// reported. MatMul members: a constant 2-D B of one shape. Arithmetic in double, rounded once to
// the weights' dtype: the result differs from the sum of the branches by float rounding only.
//
// One kernel and the FLOPs of one branch where there were n kernels, n − 1 additions and n
// branches' FLOPs. Limits: Gemm and ConvTranspose members, and kernels of even size that would
// need an off-centre pad, are left alone.
class MergeSummedContractions : public Pass {
 public:
  std::string_view rewrite() const override { return kMergeSummedContractionsRewrite; }
  std::string_view name() const override { return "merge-summed-contractions"; }
  std::string_view summary() const override {
    return "contractions of one input whose outputs are added (and the input itself) become one contraction with "
           "the summed weights";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
