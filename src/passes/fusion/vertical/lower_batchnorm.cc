// lower-batchnorm (O2): an inference BatchNormalization that fold-batchnorm could not fold into
// a contraction before it — DenseNet's pre-activation BN → ReLU → Conv, a BN on a model input —
// is a per-channel affine map, elementwise with broadcast constants; written as one, the
// elementwise fusion after it takes it together with its activation (one kernel where there
// were two):
//
//   %y = BatchNormalization(%x[N,C,H,W], %γ, %β, %μ, %σ²)     %m = Mul(%x, %s[C,1,1])   s = γ/√(σ² + ε)
//   %z = Relu(%y)                                       →     %y = Add(%m, %t[C,1,1])   t = β − μ·s
//                                                             %z = Relu(%y)
//
// It runs at O2, right before fuse-elementwise, so that no level counts more kernels than the
// one below it: O1 keeps the BatchNormalization (one kernel), O2 fuses the Mul and Add into at
// least one. The form, its conditions (each reported) and its arithmetic are ir/batchnorm.h's:
// the inference form, constant [C] statistics, a floating-point input of known rank at least 2
// and known channels.
#include "passes/fusion/vertical/lower_batchnorm.h"

#include "ir/batchnorm.h"
#include "passes/util/fold_rewrites.h"
#include "passes/util/outline.h"

namespace fusionopt::passes {
namespace {

// Why `batchnorm` is not lowered, or "" after lowering it.
std::string TryLower(Graph& graph, Node& batchnorm, const Model& model) {
  std::vector<Value*> statistics(batchnorm.inputs().begin() + 1, batchnorm.inputs().end());
  auto written = WriteBatchNormAsAffine(graph, batchnorm, model.OpsetFor(batchnorm.domain()).value_or(0),
                                        InitializerRuleOf(model));
  if (auto* why = std::get_if<std::string>(&written)) return *why;
  ReplaceChain(graph, *std::get<BatchNormAsAffine>(written).add, 0, {&batchnorm}, *batchnorm.output(0));
  RemoveIfUnused(statistics);
  return "";
}

}  // namespace

Result<bool> LowerBatchNorm::RunOnGraph(Graph& graph, PassContext& context) {
  std::vector<Node*> batchnorms;
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == "BatchNormalization" && IsStandardDomain(*node)) batchnorms.push_back(node.get());
  }
  bool changed = false;
  for (Node* batchnorm : batchnorms) {
    if (std::string why = TryLower(graph, *batchnorm, context.model()); !why.empty()) {
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
