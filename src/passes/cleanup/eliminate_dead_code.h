#pragma once

#include <string_view>

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

// eliminate-dead-code (O1): removes what no output depends on.
inline constexpr std::string_view kEliminateDeadCodeRewrite = R"rewrite(
  %t = Relu(%x)          (nothing reads %t)      →   (removed)
  initializer %w         (nothing reads %w)      →   (removed)
  function ai.fusionopt::F   (no node calls it)  →   (removed)
)rewrite";
// A fused function stays while a call reaches it from the main graph or from a function of
// another domain (the model's own), directly or through other functions' bodies.
//
// A node goes when none of its outputs is read (in its graph, a nested subgraph, or as a
// graph output); nodes are visited in reverse order so a dead chain goes in one pass.
// Limits: nodes of domains other than the standard one and ai.fusionopt are kept even when
// dead — a custom op may have effects we cannot see. Initializers that are also graph inputs
// are part of the model's interface and stay; so do model-local functions of other domains.
class EliminateDeadCode : public Pass {
 public:
  std::string_view rewrite() const override { return kEliminateDeadCodeRewrite; }
  std::string_view name() const override { return "eliminate-dead-code"; }
  std::string_view summary() const override {
    return "remove nodes, initializers and fused functions nothing reads";
  }
  Result<bool> Run(Model& model, PassContext& context) override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
