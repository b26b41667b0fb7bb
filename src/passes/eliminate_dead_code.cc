// eliminate-dead-code (O1): removes what no output depends on.
//
//   %t = Relu(%x)          (nothing reads %t)      →   (removed)
//   initializer %w         (nothing reads %w)      →   (removed)
//   function ai.fusionopt::F   (no node calls it)  →   (removed)
//
// A node goes when none of its outputs is read (in its graph, a nested subgraph, or as a
// graph output); nodes are visited in reverse order so a dead chain goes in one pass.
// Limits: nodes of domains other than the standard one and ai.fusionopt are kept even when
// dead — a custom op may have effects we cannot see. Initializers that are also graph inputs
// are part of the model's interface and stay; so do model-local functions of other domains.
#include "passes/eliminate_dead_code.h"

#include <vector>

#include "ir/op_class.h"

namespace fusionopt::passes {
namespace {

bool IsDead(const Node& node) {
  OpClass op_class = ClassifyOp(node);
  if (op_class == OpClass::kOpaque && !node.domain().empty() && node.domain() != "ai.onnx") return false;
  for (const Value* output : node.outputs()) {
    if (output != nullptr && (!output->uses().empty() || output->is_graph_output())) return false;
  }
  return true;
}

bool CalledAnywhere(const Graph& graph, const Function& function) {
  for (const auto& node : graph.nodes()) {
    if (node->domain() == function.domain && node->op_type() == function.name) return true;
    for (const Graph* subgraph : node->Subgraphs()) {
      if (CalledAnywhere(*subgraph, function)) return true;
    }
  }
  return false;
}

}  // namespace

int RemoveUncalledFusedFunctions(Model& model) {
  auto& functions = model.functions;
  int removed = 0;
  for (auto it = functions.begin(); it != functions.end();) {
    bool ours = (*it)->domain == kFusionDomain;
    bool called = CalledAnywhere(*model.graph, **it);
    for (const auto& other : functions) {
      if (other != *it && CalledAnywhere(*other->body, **it)) called = true;
    }
    if (ours && !called) {
      ++removed;
      it = functions.erase(it);
    } else {
      ++it;
    }
  }
  return removed;
}

Result<bool> EliminateDeadCode::Run(Model& model, PassContext& context) {
  FUSIONOPT_ASSIGN_OR_RETURN(bool changed, Pass::Run(model, context));
  if (int removed = RemoveUncalledFusedFunctions(model); removed > 0) {
    context.Count("functions_removed", removed);
    changed = true;
  }
  return changed;
}

Result<bool> EliminateDeadCode::RunOnGraph(Graph& graph, PassContext& context) {
  bool changed = false;
  std::vector<Node*> order;
  for (const auto& node : graph.nodes()) order.push_back(node.get());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!IsDead(**it)) continue;
    graph.RemoveNode(*it);
    context.Count("nodes_removed");
    changed = true;
  }
  std::vector<Value*> initializers = graph.initializers();
  for (Value* initializer : initializers) {
    if (initializer->uses().empty() && !initializer->is_graph_input() && !initializer->is_graph_output()) {
      graph.RemoveInitializer(initializer);
      context.Count("initializers_removed");
      changed = true;
    }
  }
  return changed;
}

}  // namespace fusionopt::passes
