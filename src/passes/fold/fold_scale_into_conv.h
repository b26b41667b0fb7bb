#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class FoldScaleIntoConv : public Pass {
 public:
  std::string_view name() const override { return "fold-scale-into-conv"; }
  std::string_view summary() const override {
    return "fold Mul/Add by a per-channel constant after Conv/ConvTranspose/Gemm into its weights and bias";
  }
  std::vector<PassOptionInfo> options() const override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
