// eliminate-no-ops (O1): removes nodes whose output is their input, and makes their readers
// read the input.
//
//   %y = Identity(%x)                                  →   (readers of %y read %x)
//   %y, = Dropout(%x)        (inference, mask unread)  →   likewise
//   %y = Cast(%x) {to: float}           (%x is float)  →   likewise
//   %y = Transpose(%x) {perm: [0, 1, 2]}               →   likewise
//   %y = Reshape(%x[N,64], [0, 64])                    →   likewise
//   %y = Expand(%x[N,64], [1]) / Tile(%x, [1, 1])      →   likewise
//   %y = Slice(%x, [0], [INT64_MAX], [1])              →   likewise
//   %y = Pad(%x, [0, 0, 0, 0])                         →   likewise
//   %y = Concat(%x) / Sum(%x) / Split(%x) (one output) →   likewise
//   %y = Resize(%x, , [1.0, 1.0, 1.0, 1.0])            →   likewise
//   Flatten / Squeeze / Unsqueeze / Reshape whose output shape is certainly the input's
//
// Decided from constants (initializers callers cannot override, Constant nodes) and known
// shapes only; a symbolic dim counts only where equal symbols make the answer certain
// (no_op_rules.cc has the rule of each op). Only the default ONNX domain is touched.
//
// Graph outputs keep their names. When the removed node writes a graph output, the node
// computing its input writes that graph-output value instead and the input's readers follow
// (bypass.h) — when the input is computed by a node of the same graph and is itself no graph
// input, initializer or graph output. Otherwise the node stays ("output is a graph output").
// Nodes with other outputs that something reads (a Dropout mask) stay too.
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
    if (!IsStandardDomain(*node)) continue;
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
