#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class FuseComposites : public Pass {
 public:
  std::string_view name() const override { return "fuse-composites"; }
  std::string_view summary() const override {
    return "fuse LayerNorm, RMSNorm (with a residual Add), Softmax with scale and mask, GELU and SiLU into one node each";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
