#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class EliminateNoOps : public Pass {
 public:
  std::string_view name() const override { return "eliminate-no-ops"; }
  std::string_view summary() const override {
    return "remove Identity, inference Dropout, and Cast/Reshape/Transpose/Expand/Slice/Pad/... that provably "
           "do nothing";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
