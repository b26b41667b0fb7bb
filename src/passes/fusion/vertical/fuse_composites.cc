// fuse-composites (O2): its rewrite, conditions and limits are in fuse_composites.h.
#include "passes/fusion/vertical/fuse_composites.h"

#include <algorithm>
#include <unordered_set>

#include "ir/constant_value.h"
#include "patterns/composite/composite.h"
#include "passes/fusion/util/composite_legality.h"
#include "passes/fusion/util/epilogue_patterns.h"
#include "passes/util/outline.h"

namespace fusionopt::passes {
namespace {

bool IsAnchor(const Node& node) {
  static const std::unordered_set<std::string_view> kAnchors = {
      "Sqrt", "LayerNormalization", "RMSNormalization", "Softmax", "Erf", "Tanh", "Gelu", "Sigmoid"};
  return IsDefaultDomain(node) && kAnchors.count(node.op_type());
}

std::string FunctionStem(const CompositeMatch& match) {
  bool residual = match.residual_add != nullptr;
  switch (match.kind) {
    case CompositeKind::kLayerNorm: return residual ? "FusedAddLayerNorm" : "FusedLayerNorm";
    case CompositeKind::kRmsNorm: return residual ? "FusedAddRMSNorm" : "FusedRMSNorm";
    case CompositeKind::kSoftmax: return "FusedSoftmax";
    case CompositeKind::kGelu: return "FusedGelu";
    case CompositeKind::kSilu: return "Fused" + ActivationName(match);
  }
  return "FusedComposite";
}

// Constants the members read: after outlining, the body holds the scalar ones itself, and
// those nothing else reads are removed with their Constant nodes or initializers.
struct ReadConstants {
  std::vector<Node*> constant_nodes;
  std::vector<Value*> initializers;
};

ReadConstants ConstantsReadBy(const std::vector<Node*>& members) {
  ReadConstants read;
  std::unordered_set<const void*> seen;
  for (const Node* member : members) {
    for (Value* input : member->inputs()) {
      if (input == nullptr || !seen.insert(input).second) continue;
      if (input->is_initializer()) {
        read.initializers.push_back(input);
      } else if (input->producer() != nullptr && ConstantNodeValue(*input->producer()) != nullptr &&
                 seen.insert(input->producer()).second) {
        read.constant_nodes.push_back(input->producer());
      }
    }
  }
  return read;
}

bool Unread(const Value* value) { return value == nullptr || (value->uses().empty() && !value->is_graph_output()); }

void RemoveOrphans(const ReadConstants& read) {
  for (Node* node : read.constant_nodes) {
    bool orphan = true;
    for (const Value* output : node->outputs()) orphan = orphan && Unread(output);
    if (orphan) node->graph()->RemoveNode(node);
  }
  for (Value* initializer : read.initializers) {
    if (Unread(initializer) && !initializer->is_graph_input()) initializer->graph()->RemoveInitializer(initializer);
  }
}

}  // namespace

Result<bool> FuseComposites::RunOnGraph(Graph& graph, PassContext& context) {
  std::optional<int64_t> opset = context.model().OpsetFor("");
  if (!opset) return false;
  std::vector<Node*> anchors;
  for (const auto& node : graph.nodes()) {
    if (IsAnchor(*node)) anchors.push_back(node.get());
  }
  // Outlining removes members; a removed node's address may be reused by the fused node, which
  // is never an anchor, so anchors are checked against this set before being dereferenced.
  std::unordered_set<const Node*> removed;
  bool changed = false;
  for (Node* anchor : anchors) {
    if (removed.count(anchor)) continue;
    CompositeSearch search = MatchCompositeAt(*anchor, *opset);
    if (search.near_miss) context.Rejected(*anchor, search.near_miss);
    if (!search.match) continue;
    CompositeMatch& match = *search.match;
    std::string kind(NameOf(match.kind));
    // A lone standard op is one kernel already; so is one whose prologue the checks drop.
    WhyNot reason = match.nodes.size() == 1 ? WhyNot() : MakeFusable(match, *opset, *anchor, context);
    if (reason) {
      context.Rejected(*anchor, reason);
      continue;
    }
    if (match.nodes.size() == 1) {
      context.Count("standalone_" + kind + "_ops");
      continue;
    }
    if (WhyNot why = WhyNotOutlinable(match.nodes)) {
      context.Rejected(*anchor, why.Prefixed(kind));
      continue;
    }
    if (!context.JudgeFusion(match.nodes).apply()) continue;
    ReadConstants constants = ConstantsReadBy(match.nodes);
    removed.insert(match.nodes.begin(), match.nodes.end());
    bool residual_sum_read = match.residual_sum != nullptr && ReadOutside(*match.residual_sum, {match.nodes.begin(), match.nodes.end()});
    OutlineGroup(graph, FusionGroup{match.nodes, kind, FunctionStem(match)}, context);
    RemoveOrphans(constants);
    context.Count(kind);
    if (match.residual_add != nullptr) context.Count("residual_prologues");
    if (residual_sum_read) context.Count("residual_sum_outputs");
    changed = true;
  }
  return changed;
}

}  // namespace fusionopt::passes
