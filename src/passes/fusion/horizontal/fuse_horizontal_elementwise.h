#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class FuseHorizontalElementwise : public Pass {
 public:
  std::string_view name() const override { return "fuse-horizontal-elementwise"; }
  std::string_view summary() const override {
    return "merge independent elementwise kernels over the same iteration space into one multi-output kernel";
  }
  std::vector<PassOptionInfo> options() const override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
