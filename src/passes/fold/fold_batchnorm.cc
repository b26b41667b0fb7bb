// fold-batchnorm (O1): its rewrite, conditions and limits are in fold_batchnorm.h.
#include "passes/fold/fold_batchnorm.h"

#include <cmath>

#include "passes/fold/util/channel_affine.h"
#include "passes/util/fold_rewrites.h"

namespace fusionopt::passes {
namespace {

// Why `batchnorm` cannot fold; nothing after folding it. `added_node` says the graph needs sorting.
WhyNot TryFold(Graph& graph, Node& batchnorm, const Model& model, int64_t max_bytes, bool& added_node) {
  if (WhyNot why = WhyNotInferenceBatchNorm(batchnorm, model.OpsetFor(batchnorm.domain()).value_or(0))) return why;
  Value* normalized = batchnorm.input(0);
  Node* producer = normalized != nullptr ? normalized->producer() : nullptr;
  if (producer == nullptr || producer->graph() != &graph) return "not after a contraction it folds into";
  Decided<AffineTarget> target = AnalyzeAffineTarget(*producer, model, /*allow_matmul=*/true);
  if (!target) return target.why_not();
  if (normalized->producer_output_index() != 0 || !OnlyReadBy(*normalized, batchnorm)) {
    return "contraction output has other readers or is a graph output";
  }
  DataType dtype = batchnorm.output(0)->dtype();
  if (dtype != DataType::kUndefined && dtype != target->weight.dtype) return "weights dtype differs from the output's";
  Decided<ChannelAffine> affine = BatchNormAffine(batchnorm, target->channels, InitializerRuleOf(model));
  if (!affine) return affine.why_not();
  if (WhyNot why = WhyNotFold(*target, *affine, max_bytes)) return why;
  added_node = FoldAffine(graph, *target, *affine, {&batchnorm}, *batchnorm.output(0)) || added_node;
  return {};
}

}  // namespace

std::vector<PassOptionInfo> FoldBatchNorm::options() const {
  return {{"max-bytes", std::to_string(kDefaultMaterializeBytes),
           "largest ConstantOfShape weight a per-channel scale may turn into an initializer"}};
}

Result<bool> FoldBatchNorm::RunOnGraph(Graph& graph, PassContext& context) {
  FUSIONOPT_ASSIGN_OR_RETURN(int64_t max_bytes, context.IntOption("max-bytes"));
  std::vector<Node*> batchnorms;
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == "BatchNormalization" && IsDefaultDomain(*node)) batchnorms.push_back(node.get());
  }
  bool changed = false;
  bool added_node = false;
  for (Node* batchnorm : batchnorms) {
    if (WhyNot why = TryFold(graph, *batchnorm, context.model(), max_bytes, added_node)) {
      context.Rejected(*batchnorm, why);
      continue;
    }
    context.Matched();
    context.Count("batchnorms_folded");
    changed = true;
  }
  if (added_node) FUSIONOPT_RETURN_IF_ERROR(graph.SortTopologically());
  return changed;
}

}  // namespace fusionopt::passes
