#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class FuseHorizontalContractions : public Pass {
 public:
  std::string_view name() const override { return "fuse-horizontal-contractions"; }
  std::string_view summary() const override {
    return "merge MatMul/Gemm/Conv that read the same input with constant weights into one contraction + Split";
  }
  std::vector<PassOptionInfo> options() const override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
