// fold-batchnorm (O1): an inference BatchNormalization after a contraction becomes part of the
// contraction's weights and bias, computed at optimize time (channel_affine.h):
//
//   %y = Conv(%x, %W, %b)                              %z = Conv(%x, %W', %b')
//   %z = BatchNormalization(%y, %γ, %β, %μ, %σ²)   →   s = γ / √(σ² + ε)
//                                                      W'[m] = W[m]·s[m],  b' = (b − μ)·s + β
//
// and likewise after ConvTranspose (weights [C_in, M/group, k...]: the scale follows the output
// channel of each group), Gemm (either transB) and MatMul. BatchNormalization normalizes axis
// 1, so a MatMul qualifies only when its output is 2-D ([N, C], A 2-D): for a batched MatMul
// axis 1 is not the axis its weight columns feed. The MatMul becomes Gemm(A, W', b').
//
// Conditions, each reported when it fails: BatchNormalization of the standard domain at opset
// 7–28, in inference form (training_mode 0 or absent; spatial 1 before opset 9; its optional
// statistics outputs unread), statistics that are constants of shape [C]; the contraction's
// output read by nothing else and not a graph output; constant weights and bias of the same
// floating-point dtype as the normalized value. Arithmetic is in double, rounded once to the
// weights' dtype. Weights shared with another node stay as they are: the folded ones are new.
#include "passes/fold/fold_batchnorm.h"

#include <cmath>

#include "passes/fold/util/channel_affine.h"
#include "passes/util/fold_rewrites.h"

namespace fusionopt::passes {
namespace {

// Why `batchnorm` cannot fold, or "" after folding it; `added_node` says the graph needs sorting.
std::string TryFold(Graph& graph, Node& batchnorm, const Model& model, int64_t max_bytes, bool& added_node) {
  std::string why = WhyNotInferenceBatchNorm(batchnorm, model.OpsetFor(batchnorm.domain()).value_or(0));
  if (!why.empty()) return why;
  Value* normalized = batchnorm.input(0);
  Node* producer = normalized != nullptr ? normalized->producer() : nullptr;
  if (producer == nullptr || producer->graph() != &graph) return "not after a contraction it folds into";
  auto analysis = AnalyzeAffineTarget(*producer, model, /*allow_matmul=*/true);
  if (auto* reason = std::get_if<std::string>(&analysis)) return *reason;
  AffineTarget& target = std::get<AffineTarget>(analysis);
  if (normalized->producer_output_index() != 0 || !OnlyReadBy(*normalized, batchnorm)) {
    return "contraction output has other readers or is a graph output";
  }
  DataType dtype = batchnorm.output(0)->dtype();
  if (dtype != DataType::kUndefined && dtype != target.weight.dtype) return "weights dtype differs from the output's";
  auto affine = BatchNormAffine(batchnorm, target.channels, InitializerRuleOf(model));
  if (auto* reason = std::get_if<std::string>(&affine)) return *reason;
  why = WhyNotFold(target, std::get<ChannelAffine>(affine), max_bytes);
  if (!why.empty()) return why;
  added_node = FoldAffine(graph, target, std::get<ChannelAffine>(affine), {&batchnorm}, *batchnorm.output(0)) || added_node;
  return "";
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
    if (node->op_type() == "BatchNormalization" && IsStandardDomain(*node)) batchnorms.push_back(node.get());
  }
  bool changed = false;
  bool added_node = false;
  for (Node* batchnorm : batchnorms) {
    std::string why = TryFold(graph, *batchnorm, context.model(), max_bytes, added_node);
    if (!why.empty()) {
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
