#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

// Removes the model-local functions of domain ai.fusionopt that no call reaches (from the
// graph, its subgraphs, or the bodies of the functions those reach); returns how many went.
// Other domains' functions are the model's own and stay, with what they call.
int RemoveUncalledFusedFunctions(Model& model);

// What RemoveDeadCode removed from one graph.
struct DeadCode {
  int64_t nodes = 0;
  int64_t initializers = 0;
};

// The sweep of eliminate-dead-code over one graph (its header states the rule): every later
// rewrite that may leave dead nodes behind (the ORT lowering) sweeps with it.
DeadCode RemoveDeadCode(Graph& graph);

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
