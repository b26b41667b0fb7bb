#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class FuseContractionEpilogues : public Pass {
 public:
  std::string_view name() const override { return "fuse-contraction-epilogues"; }
  std::string_view summary() const override {
    return "fuse Conv/Gemm/MatMul with the bias, residual and activation ops that follow it";
  }
  std::vector<PassOptionInfo> options() const override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
