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
// least one. Conditions (each reported): fold-batchnorm's inference form (channel_affine.h),
// constant [C] statistics, a floating-point input of known rank at least 2 and known channels.
// Arithmetic in double, rounded once to the input's dtype.
#include "passes/lower_batchnorm.h"

#include "passes/channel_affine.h"
#include "passes/constant_operand.h"
#include "passes/fold_rewrites.h"
#include "passes/outline.h"

namespace fusionopt::passes {
namespace {

// Why `batchnorm` is not lowered, or "" after lowering it.
std::string TryLower(Graph& graph, Node& batchnorm, const Model& model) {
  std::string why = WhyNotInferenceBatchNorm(batchnorm, model.OpsetFor(batchnorm.domain()).value_or(0));
  if (!why.empty()) return why;
  Value* x = batchnorm.input(0);
  if (x == nullptr || !x->shape() || x->shape()->size() < 2) return "input rank unknown or below 2";
  const Dim& channels = (*x->shape())[1];
  if (!channels.is_known() || channels.value <= 0) return "channel count unknown";
  const DataType dtype = x->dtype();
  if (dtype != DataType::kFloat && dtype != DataType::kFloat16 && dtype != DataType::kBFloat16 &&
      dtype != DataType::kDouble) {
    return "not a floating-point input";
  }
  auto affine = BatchNormAffine(batchnorm, model, channels.value);
  if (auto* reason = std::get_if<std::string>(&affine)) return *reason;
  const ChannelAffine& map = std::get<ChannelAffine>(affine);
  // [C, 1, ...]: broadcast over the dims after the channel axis, right-aligned against x.
  std::vector<int64_t> dims(x->shape()->size() - 1, 1);
  dims[0] = channels.value;
  // Named after the BatchNormalization (its output, when it has no name), so a report reader can
  // tell where the two nodes came from.
  const std::string stem = batchnorm.name().empty() ? batchnorm.output(0)->name() : batchnorm.name();
  Value* scale = AddInitializer(graph, stem + "_scale", MakeFloatingTensor(dtype, dims, map.scale));
  Value* shift = AddInitializer(graph, stem + "_shift", MakeFloatingTensor(dtype, dims, map.shift));
  Value* scaled = graph.CreateValue(graph.UniqueName(batchnorm.output(0)->name() + "_scaled"));
  Node* mul = graph.CreateNode("Mul", "", {x, scale}, {scaled}, UniqueNodeName(graph, stem + "_scale"));
  Node* add = graph.CreateNode("Add", "", {scaled, shift}, {nullptr}, UniqueNodeName(graph, stem + "_shift"));
  graph.MoveBefore(mul, &batchnorm);
  graph.MoveBefore(add, &batchnorm);
  std::vector<Value*> statistics(batchnorm.inputs().begin() + 1, batchnorm.inputs().end());
  ReplaceChain(graph, *add, 0, {&batchnorm}, *batchnorm.output(0));
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
