#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class EliminateCommonSubexpressions : public Pass {
 public:
  std::string_view name() const override { return "eliminate-common-subexpressions"; }
  std::string_view summary() const override {
    return "merge nodes computing the same op on the same inputs, and constants of equal content";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
