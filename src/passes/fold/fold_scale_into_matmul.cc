// fold-scale-into-matmul (O1): its rewrite, conditions and limits are in fold_scale_into_matmul.h.
#include "passes/fold/fold_scale_into_matmul.h"

#include "passes/util/constant_operand.h"
#include "passes/util/fold_rewrites.h"

namespace fusionopt::passes {
namespace {

struct Chain {
  Node* matmul = nullptr;
  Node* bias_add = nullptr;  // null when the Mul reads the MatMul directly
  ConstantOperand weight;
  std::optional<ConstantOperand> bias;
  ConstantOperand scale;
};

// Values of `constant`, one per column of `columns`, when it broadcasts along the last axis of
// an output of `rank` only; nullopt otherwise.
std::optional<std::vector<double>> PerColumn(const ConstantOperand& constant, size_t rank, int64_t columns) {
  if (constant.dims.size() > rank) return std::nullopt;
  for (size_t axis = 0; axis + 1 < constant.dims.size(); ++axis) {
    if (constant.dims[axis] != 1) return std::nullopt;
  }
  int64_t last = constant.dims.empty() ? 1 : constant.dims.back();
  if (last != 1 && last != columns) return std::nullopt;
  std::vector<double> values = constant.Values();
  if (values.size() == 1) values.assign(static_cast<size_t>(columns), values.front());
  return values;
}

// The other operand of a two-input node, as a constant, when `value` is one of its inputs.
std::optional<ConstantOperand> ConstantBeside(Node& node, const Value* value, const Model& model) {
  if (node.inputs().size() != 2) return std::nullopt;
  int other = node.input(0) == value ? 1 : 0;
  if (node.input(1 - other) != value || node.input(other) == value) return std::nullopt;
  return ReadConstantOperand(node.input(other), model);
}

// The chain the Mul `mul` ends, or why it is none; nullopt when `mul` is not a candidate at all.
std::optional<Decided<Chain>> ChainBefore(Node& mul, const Model& model) {
  for (int side = 0; side < 2; ++side) {
    Value* product = mul.inputs().size() == 2 ? mul.input(side) : nullptr;
    Node* producer = product != nullptr ? product->producer() : nullptr;
    if (producer == nullptr || !IsDefaultDomain(*producer) || !OnlyReadBy(*product, mul)) continue;
    Chain chain;
    Node* matmul = producer;
    if (producer->op_type() == "Add") {
      for (int operand = 0; operand < 2 && chain.bias_add == nullptr; ++operand) {
        Node* candidate = producer->input(operand) ? producer->input(operand)->producer() : nullptr;
        if (candidate != nullptr && candidate->op_type() == "MatMul" && IsDefaultDomain(*candidate) &&
            candidate->output(0) != nullptr && OnlyReadBy(*candidate->output(0), *producer)) {
          chain.bias_add = producer;
          matmul = candidate;
        }
      }
      if (chain.bias_add == nullptr) continue;
      chain.bias = ConstantBeside(*producer, matmul->output(0), model);
      if (!chain.bias) return WhyNot("the bias is not constant");
    } else if (producer->op_type() != "MatMul") {
      continue;
    }
    std::optional<ConstantOperand> weight = ReadConstantOperand(matmul->input(1), model);
    if (!weight || weight->dims.size() != 2) return WhyNot("weights are not a constant 2-D B");
    // A splat (ConstantOfShape) would be materialised whole; no exporter writes MatMul weights so.
    if (weight->splat != nullptr) return WhyNot("weights are a ConstantOfShape splat");
    std::optional<ConstantOperand> scale = ConstantBeside(mul, product, model);
    if (!scale) return WhyNot("non-constant scale");
    chain.matmul = matmul;
    chain.weight = *weight;
    chain.scale = *scale;
    return chain;
  }
  return std::nullopt;
}

std::string Fold(Graph& graph, Chain& chain, Node& mul) {
  // Against the MatMul's own rank: a bias or scale of higher rank would broadcast the output
  // wider, which the folded chain no longer does.
  const Value* product = chain.matmul->output(0);
  if (!product->shape() || product->shape()->empty()) return "the MatMul's output rank is not known";
  const size_t rank = product->shape()->size();
  const int64_t rows = chain.weight.dims[0];
  const int64_t columns = chain.weight.dims[1];
  const DataType dtype = chain.weight.dtype;
  if (chain.scale.dtype != dtype || (chain.bias && chain.bias->dtype != dtype)) {
    return "scale or bias dtype differs from the weights'";
  }
  auto scale = PerColumn(chain.scale, rank, columns);
  if (!scale) return "the scale is not per column";
  std::optional<std::vector<double>> bias;
  if (chain.bias) {
    bias = PerColumn(*chain.bias, rank, columns);
    if (!bias) return "the bias is not per column";
  }
  std::vector<double> weights = chain.weight.Values();
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t column = 0; column < columns; ++column) weights[static_cast<size_t>(row * columns + column)] *= (*scale)[static_cast<size_t>(column)];
  }
  Value* scaled_weights = AddInitializer(graph, chain.weight.value->name() + "_scaled",
                                         MakeFloatingTensor(dtype, chain.weight.dims, weights));
  chain.matmul->ReplaceInput(1, scaled_weights);
  Node* last = chain.matmul;
  std::vector<Value*> unused = {chain.weight.value, chain.scale.value};
  if (chain.bias_add != nullptr) {
    for (size_t column = 0; column < bias->size(); ++column) (*bias)[column] *= (*scale)[column];
    Value* scaled_bias = AddInitializer(graph, chain.bias->value->name() + "_scaled",
                                        MakeFloatingTensor(dtype, {columns}, *bias));
    const int bias_index = chain.bias_add->input(0) == chain.bias->value ? 0 : 1;
    chain.bias_add->ReplaceInput(bias_index, scaled_bias);
    unused.push_back(chain.bias->value);
    last = chain.bias_add;
  }
  // The chain's last node produces the Mul's result under its name; the Mul and the value the
  // last node wrote go.
  AdoptChainResult(graph, *last, 0, {&mul}, *mul.output(0));
  RemoveIfUnused(unused);
  return "";
}

}  // namespace

Result<bool> FoldScaleIntoMatMul::RunOnGraph(Graph& graph, PassContext& context) {
  std::vector<Node*> muls;
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == "Mul" && IsDefaultDomain(*node)) muls.push_back(node.get());
  }
  bool changed = false;
  for (Node* mul : muls) {
    std::optional<Decided<Chain>> chain = ChainBefore(*mul, context.model());
    if (!chain) continue;
    if (!*chain) {
      context.Rejected(*mul, chain->why_not());
      continue;
    }
    if (WhyNot why = Fold(graph, **chain, *mul)) {
      context.Rejected(*mul, why);
      continue;
    }
    context.Matched();
    context.Count("scales_folded");
    changed = true;
  }
  return changed;
}

}  // namespace fusionopt::passes
