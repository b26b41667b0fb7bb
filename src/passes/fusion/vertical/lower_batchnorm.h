#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class LowerBatchNorm : public Pass {
 public:
  std::string_view name() const override { return "lower-batchnorm"; }
  std::string_view summary() const override {
    return "an inference BatchNormalization no contraction absorbed becomes a per-channel Mul and Add, for the "
           "elementwise fusion";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
