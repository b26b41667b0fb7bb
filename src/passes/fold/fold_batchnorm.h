#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class FoldBatchNorm : public Pass {
 public:
  std::string_view name() const override { return "fold-batchnorm"; }
  std::string_view summary() const override {
    return "fold inference BatchNormalization into the weights and bias of the Conv/ConvTranspose/Gemm/MatMul before it";
  }
  std::vector<PassOptionInfo> options() const override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
