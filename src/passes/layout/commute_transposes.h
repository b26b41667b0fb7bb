#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class CommuteTransposes : public Pass {
 public:
  std::string_view name() const override { return "commute-transposes"; }
  std::string_view summary() const override {
    return "a Transpose that keeps the last axis moves across a MatMul/Gemm by constant weights and its bias, "
           "next to the layout ops on their other side";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
