// eliminate-no-ops (O1): its rewrite, conditions and limits are in eliminate_no_ops.h.
#include "passes/cleanup/eliminate_no_ops.h"

#include <vector>

#include "ir/op_class.h"
#include "passes/util/bypass.h"
#include "passes/util/fold_rewrites.h"
#include "passes/cleanup/util/no_op_rules.h"

namespace fusionopt::passes {
namespace {

bool OtherOutputsUnread(const Node& node) {
  for (size_t i = 1; i < node.outputs().size(); ++i) {
    const Value* output = node.output(i);
    if (output != nullptr && (!output->uses().empty() || output->is_graph_output())) return false;
  }
  return true;
}

}  // namespace

Result<bool> EliminateNoOps::RunOnGraph(Graph& graph, PassContext& context) {
  bool changed = false;
  std::vector<Node*> order;
  for (const auto& node : graph.nodes()) order.push_back(node.get());
  for (Node* node : order) {
    if (!IsDefaultDomain(*node)) continue;
    if (node->op_type() == "Dropout" && ClassifyOp(*node) != OpClass::kView) {
      context.Rejected(*node, "training-mode Dropout");
      continue;
    }
    if (!PassesInputThrough(*node, context.model())) continue;
    if (!OtherOutputsUnread(*node)) {
      context.Rejected(*node, "another output is read");
      continue;
    }
    if (!BypassChain(graph, {node}, *node->input(0), *node->output(0))) {
      context.Rejected(*node, "output is a graph output");
      continue;
    }
    context.Matched();
    context.Count("nodes_removed");
    changed = true;
  }
  return changed;
}

}  // namespace fusionopt::passes
