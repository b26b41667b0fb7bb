#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class UnflattenBatchMatmuls : public Pass {
 public:
  std::string_view name() const override { return "unflatten-batch-matmuls"; }
  std::string_view summary() const override {
    return "batched MatMuls over a flattened batch axis ([B·H,S,D], BLOOM's baddbmm, nn.MultiheadAttention's bmm) run "
           "on the unflattened tensors, so attention meets its 4-D form";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
