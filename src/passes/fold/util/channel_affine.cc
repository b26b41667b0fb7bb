#include "passes/fold/util/channel_affine.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "passes/util/fold_rewrites.h"

namespace fusionopt::passes {
namespace {

using Analysis = Decided<AffineTarget>;

// Reads Conv/ConvTranspose's B or Gemm's C: absent is fine, non-constant is not.
WhyNot ReadBias(Node& node, const Model& model, AffineTarget& target) {
  Value* bias = node.input(2);
  if (bias == nullptr) return {};
  target.bias = ReadConstantOperand(bias, model);
  if (!target.bias) return "non-constant bias";
  if (target.bias->dtype != target.weight.dtype) return "bias dtype differs from the weights'";
  return {};
}

Analysis AnalyzeConv(Node& node, const Model& model, AffineTarget target) {
  const std::vector<int64_t>& dims = target.weight.dims;
  if (dims.size() < 3) return WhyNot("weights of rank < 3");
  target.group = node.GetInt("group", 1);
  target.output_rank = static_cast<int64_t>(dims.size());
  if (target.kind == ContractionKind::kConv) {
    target.channels = dims[0];
  } else {
    if (target.group < 1 || dims[0] % target.group != 0) return WhyNot("group does not divide the input channels");
    target.channels = dims[1] * target.group;
  }
  if (WhyNot why = ReadBias(node, model, target)) return why;
  if (target.bias && target.bias->dims != std::vector<int64_t>{target.channels}) return WhyNot("bias is not [M]");
  return target;
}

Analysis AnalyzeGemm(Node& node, const Model& model, AffineTarget target) {
  // Before opset 7 Gemm broadcast C only with its `broadcast` attribute.
  if (model.OpsetFor(node.domain()).value_or(0) < 7) return WhyNot("Gemm before opset 7");
  const std::vector<int64_t>& dims = target.weight.dims;
  if (dims.size() != 2) return WhyNot("weights are not 2-D");
  target.trans_b = node.GetInt("transB", 0) != 0;
  target.channels = target.trans_b ? dims[0] : dims[1];
  target.beta = node.GetFloat("beta", 1.0F);
  target.output_rank = 2;
  if (WhyNot why = ReadBias(node, model, target)) return why;
  if (target.bias) {
    const std::vector<int64_t>& c = target.bias->dims;
    bool columns_fit = c.empty() || c.back() == 1 || c.back() == target.channels;
    if (c.size() > 2 || !columns_fit) return WhyNot("C does not broadcast per column");
  }
  return target;
}

Analysis AnalyzeMatMul(Node& node, const Model& model, AffineTarget target) {
  int64_t opset = model.OpsetFor(node.domain()).value_or(0);
  if (opset < 7) return WhyNot("Gemm before opset 7");
  if (target.weight.dtype == DataType::kBFloat16 && opset < 13) return WhyNot("bfloat16 Gemm before opset 13");
  const Value* a = node.input(0);
  if (target.weight.dims.size() != 2) return WhyNot("weights are not 2-D");
  if (a == nullptr || !a->shape() || a->shape()->size() != 2) return WhyNot("A is not known to be 2-D");
  target.channels = target.weight.dims[1];
  target.output_rank = 2;
  return target;
}

// Index of the output channel that weight element `index` contributes to.
class ChannelOfWeight {
 public:
  explicit ChannelOfWeight(const AffineTarget& target) : target_(target) {
    const std::vector<int64_t>& dims = target.weight.dims;
    inner_ = 1;
    for (size_t axis = 2; axis < dims.size(); ++axis) inner_ *= dims[axis];
  }
  int64_t operator()(int64_t index) const {
    const std::vector<int64_t>& dims = target_.weight.dims;
    switch (target_.kind) {
      case ContractionKind::kConv: return index / (dims[1] * inner_);
      case ContractionKind::kConvTranspose: {
        int64_t row = index / inner_;
        int64_t per_group_out = dims[1];
        int64_t per_group_in = dims[0] / target_.group;
        return (row / per_group_out / per_group_in) * per_group_out + row % per_group_out;
      }
      case ContractionKind::kGemm:
        return target_.trans_b ? index / dims[1] : index % dims[1];
      case ContractionKind::kMatMul: return index % dims[1];
    }
    return 0;
  }

 private:
  const AffineTarget& target_;
  int64_t inner_ = 1;
};

// "w" → "w_folded"; a value folded before keeps its base, so chains of folds read
// "w_folded", "w_folded_1" rather than growing a suffix per fold.
std::string FoldedName(const std::string& name) {
  const std::string suffix = "_folded";
  bool folded_before = name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  return folded_before ? name : name + suffix;
}

bool AllEqual(const std::vector<double>& values, double to) {
  return std::all_of(values.begin(), values.end(), [to](double value) { return value == to; });
}

bool Uniform(const std::vector<double>& values) { return values.empty() || AllEqual(values, values.front()); }

// The splat weight with its one value scaled: in place when only the target reads it.
Value* ScaledSplat(Graph& graph, const ConstantOperand& weight, double scale, bool& added_node) {
  Attribute fill;
  fill.name = "value";
  fill.kind = AttributeKind::kTensor;
  const Attribute* old_fill = weight.splat->FindAttribute("value");
  std::vector<int64_t> fill_dims = old_fill != nullptr ? old_fill->t->dims() : std::vector<int64_t>{1};
  fill.t = MakeFloatingTensor(weight.dtype, fill_dims, {weight.splat_value * scale});
  if (weight.value->uses().size() == 1 && !weight.value->is_graph_output()) {
    weight.splat->SetAttribute(std::move(fill));
    return weight.value;
  }
  Value* scaled = graph.CreateValue(graph.UniqueName(FoldedName(weight.value->name())));
  Node* splat = graph.CreateNode("ConstantOfShape", weight.splat->domain(), {weight.splat->input(0)}, {scaled},
                                 weight.splat->name().empty() ? "" : graph.UniqueName(FoldedName(weight.splat->name())));
  splat->SetAttribute(std::move(fill));
  added_node = true;
  return scaled;
}

Value* ScaledWeight(Graph& graph, const AffineTarget& target, const ChannelAffine& affine, bool& added_node) {
  const ConstantOperand& weight = target.weight;
  if (AllEqual(affine.scale, 1.0)) return weight.value;
  if (weight.splat != nullptr && Uniform(affine.scale)) return ScaledSplat(graph, weight, affine.scale.front(), added_node);
  std::vector<double> values = weight.Values();
  ChannelOfWeight channel_of(target);
  for (size_t i = 0; i < values.size(); ++i) values[i] *= affine.scale[static_cast<size_t>(channel_of(static_cast<int64_t>(i)))];
  return AddInitializer(graph, FoldedName(weight.value->name()), MakeFloatingTensor(weight.dtype, weight.dims, values));
}

// Conv/ConvTranspose/MatMul bias: b·s + t over [M].
std::vector<double> ChannelBias(const AffineTarget& target, const ChannelAffine& affine) {
  std::vector<double> bias = target.bias ? target.bias->Values() : std::vector<double>(affine.scale.size(), 0.0);
  for (size_t c = 0; c < bias.size(); ++c) bias[c] = bias[c] * affine.scale[c] + affine.shift[c];
  return bias;
}

// Gemm's C' = β·C·s + t, [rows, N] when C is 2-D, else [N].
TensorPtr GemmBias(const AffineTarget& target, const ChannelAffine& affine) {
  auto channels = static_cast<size_t>(target.channels);
  if (!target.bias) return MakeFloatingTensor(target.weight.dtype, {target.channels}, ChannelBias(target, affine));
  const ConstantOperand& c = *target.bias;
  std::vector<double> values = c.Values();
  size_t rows = c.dims.size() == 2 ? static_cast<size_t>(c.dims[0]) : 1;
  size_t columns = c.dims.empty() ? 1 : static_cast<size_t>(c.dims.back());
  std::vector<double> out(rows * channels);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t n = 0; n < channels; ++n) {
      double element = values[r * columns + (columns == 1 ? 0 : n)];
      out[r * channels + n] = target.beta * element * affine.scale[n] + affine.shift[n];
    }
  }
  std::vector<int64_t> dims = c.dims.size() == 2 ? std::vector<int64_t>{c.dims[0], target.channels}
                                                 : std::vector<int64_t>{target.channels};
  return MakeFloatingTensor(target.weight.dtype, std::move(dims), out);
}

std::string BiasBase(const AffineTarget& target) {
  return target.bias ? FoldedName(target.bias->value->name()) : target.weight.value->name() + "_bias";
}

void SetBiasInput(Node& node, Value* bias) {
  if (node.inputs().size() > 2) {
    node.ReplaceInput(2, bias);
  } else {
    node.AddInput(bias);
  }
}

// Operands of the absorbed nodes other than the chain's own values, which go with the chain.
std::vector<Value*> ExternalOperands(const AffineTarget& target, const std::vector<Node*>& absorbed) {
  std::set<const Value*> chain_values(target.node->outputs().begin(), target.node->outputs().end());
  for (const Node* node : absorbed) chain_values.insert(node->outputs().begin(), node->outputs().end());
  std::vector<Value*> operands;
  for (const Node* node : absorbed) {
    for (Value* input : node->inputs()) {
      if (input != nullptr && chain_values.count(input) == 0) operands.push_back(input);
    }
  }
  return operands;
}

}  // namespace

Decided<AffineTarget> AnalyzeAffineTarget(Node& node, const Model& model, bool allow_matmul) {
  if (!IsDefaultDomain(node)) return WhyNot("not a standard-domain contraction");
  AffineTarget target;
  target.node = &node;
  const std::string& op = node.op_type();
  if (op == "Conv") {
    target.kind = ContractionKind::kConv;
  } else if (op == "ConvTranspose") {
    target.kind = ContractionKind::kConvTranspose;
  } else if (op == "Gemm") {
    target.kind = ContractionKind::kGemm;
  } else if (op == "MatMul" && allow_matmul) {
    target.kind = ContractionKind::kMatMul;
  } else {
    return WhyNot("not after a contraction it folds into");
  }
  std::optional<ConstantOperand> weight = ReadConstantOperand(node.input(1), model);
  if (!weight) return WhyNot("non-constant weights");
  target.weight = *weight;
  switch (target.kind) {
    case ContractionKind::kConv:
    case ContractionKind::kConvTranspose: return AnalyzeConv(node, model, std::move(target));
    case ContractionKind::kGemm: return AnalyzeGemm(node, model, std::move(target));
    case ContractionKind::kMatMul: return AnalyzeMatMul(node, model, std::move(target));
  }
  return WhyNot("unreachable");
}

WhyNot WhyNotFold(const AffineTarget& target, const ChannelAffine& affine, int64_t max_bytes) {
  bool materialises = target.weight.splat != nullptr && !Uniform(affine.scale);
  if (materialises && target.weight.NumBytes() > static_cast<uint64_t>(max_bytes)) {
    return "splat weights would grow beyond max-bytes";
  }
  return {};
}

bool FoldAffine(Graph& graph, AffineTarget& target, const ChannelAffine& affine, const std::vector<Node*>& absorbed,
                Value& result) {
  FUSIONOPT_CHECK(static_cast<int64_t>(affine.scale.size()) == target.channels &&
                      affine.shift.size() == affine.scale.size(),
                  "one scale and shift per output channel");
  Node& node = *target.node;
  std::vector<Value*> released = ExternalOperands(target, absorbed);
  released.push_back(target.weight.value);
  if (target.bias) released.push_back(target.bias->value);

  bool added_node = false;
  Value* weight = ScaledWeight(graph, target, affine, added_node);
  bool shifts = !AllEqual(affine.shift, 0.0);
  bool bias_changes = shifts || (target.bias && !AllEqual(affine.scale, 1.0)) ||
                      (target.kind == ContractionKind::kGemm && target.bias && target.beta != 1.0);
  Value* bias = target.bias ? target.bias->value : nullptr;
  if (bias_changes) {
    TensorPtr values = target.kind == ContractionKind::kGemm
                           ? GemmBias(target, affine)
                           : MakeFloatingTensor(target.weight.dtype, {target.channels}, ChannelBias(target, affine));
    bias = AddInitializer(graph, BiasBase(target), values);
  }

  if (target.kind == ContractionKind::kMatMul && shifts) {
    Node* gemm = graph.CreateNode("Gemm", node.domain(), {node.input(0), weight, bias}, {nullptr}, node.name());
    std::vector<Node*> replaced = {&node};
    replaced.insert(replaced.end(), absorbed.begin(), absorbed.end());
    ReplaceChain(graph, *gemm, 0, replaced, result);
    target.node = gemm;
    RemoveIfUnused(std::move(released));
    return true;
  }
  node.ReplaceInput(1, weight);
  if (bias_changes) SetBiasInput(node, bias);
  if (bias_changes && target.kind == ContractionKind::kGemm && target.beta != 1.0) {
    Attribute beta;
    beta.name = "beta";
    beta.kind = AttributeKind::kFloat;
    beta.f = 1.0F;
    node.SetAttribute(std::move(beta));
  }
  AdoptChainResult(graph, node, 0, absorbed, result);
  RemoveIfUnused(std::move(released));
  return added_node;
}

}  // namespace fusionopt::passes
