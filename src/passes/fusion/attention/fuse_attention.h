#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

// fuse-attention (O3): see fuse_attention.cc.
class FuseAttention : public Pass {
 public:
  std::string_view name() const override { return "fuse-attention"; }
  std::string_view summary() const override {
    return "Softmax(Q·Kᵀ·scale + mask)·V with its head split and merge -> one ai.fusionopt attention node";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
