#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class FoldScaleIntoMatMul : public Pass {
 public:
  std::string_view name() const override { return "fold-scale-into-matmul"; }
  std::string_view summary() const override {
    return "a Mul by a constant per-column scale after MatMul by constant weights (and its bias Add) becomes part of "
           "the weights and bias (Whisper's and CLIP's query scaling)";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
