#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// lower-batchnorm (O2): an inference BatchNormalization that fold-batchnorm could not fold into
// a contraction before it — DenseNet's pre-activation BN → ReLU → Conv, a BN on a model input —
// is a per-channel affine map, elementwise with broadcast constants; written as one, the
// elementwise fusion after it takes it together with its activation (one kernel where there
// were two):
inline constexpr std::string_view kLowerBatchNormRewrite = R"rewrite(
  %y = BatchNormalization(%x[N,C,H,W], %γ, %β, %μ, %σ²)     %m = Mul(%x, %s[C,1,1])   s = γ/√(σ² + ε)
  %z = Relu(%y)                                       →     %y = Add(%m, %t[C,1,1])   t = β − μ·s
                                                            %z = Relu(%y)
)rewrite";
// It runs at O2, right before fuse-elementwise, so that no level counts more kernels than the
// one below it: O1 keeps the BatchNormalization (one kernel), O2 fuses the Mul and Add into at
// least one. The form, its conditions (each reported) and its arithmetic are ir/batchnorm.h's:
// the inference form, constant [C] statistics, a floating-point input of known rank at least 2
// and known channels.
class LowerBatchNorm : public Pass {
 public:
  std::string_view rewrite() const override { return kLowerBatchNormRewrite; }
  std::string_view name() const override { return "lower-batchnorm"; }
  std::string_view summary() const override {
    return "an inference BatchNormalization no contraction absorbed becomes a per-channel Mul and Add, for the "
           "elementwise fusion";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
