// lower-batchnorm (O2): its rewrite, conditions and limits are in lower_batchnorm.h.
#include "passes/fusion/vertical/lower_batchnorm.h"

#include "ir/batchnorm.h"
#include "passes/util/fold_rewrites.h"
#include "passes/util/outline.h"

namespace fusionopt::passes {
namespace {

// Why `batchnorm` is not lowered; nothing after lowering it.
WhyNot TryLower(Graph& graph, Node& batchnorm, const Model& model) {
  std::vector<Value*> statistics(batchnorm.inputs().begin() + 1, batchnorm.inputs().end());
  Decided<BatchNormAsAffine> written =
      WriteBatchNormAsAffine(graph, batchnorm, model.OpsetFor(batchnorm.domain()).value_or(0), InitializerRuleOf(model));
  if (!written) return written.why_not();
  ReplaceChain(graph, *written->add, 0, {&batchnorm}, *batchnorm.output(0));
  RemoveIfUnused(statistics);
  return {};
}

}  // namespace

Result<bool> LowerBatchNorm::RunOnGraph(Graph& graph, PassContext& context) {
  std::vector<Node*> batchnorms;
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == "BatchNormalization" && IsDefaultDomain(*node)) batchnorms.push_back(node.get());
  }
  bool changed = false;
  for (Node* batchnorm : batchnorms) {
    if (WhyNot why = TryLower(graph, *batchnorm, context.model())) {
      context.Rejected(*batchnorm, why);
      continue;
    }
    context.Matched();
    context.Count("batchnorms_lowered");
    changed = true;
  }
  return changed;
}

}  // namespace fusionopt::passes
