#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class EliminateDeadCode : public Pass {
 public:
  std::string_view name() const override { return "eliminate-dead-code"; }
  std::string_view summary() const override {
    return "remove nodes, initializers and fused functions nothing reads";
  }
  Result<bool> Run(Model& model, PassContext& context) override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
