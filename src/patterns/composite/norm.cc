// LayerNorm and RMSNorm: the decomposed forms (anchored at their Sqrt), the standard ops, the
// residual Add prologue and the affine tail.
#include <unordered_set>

#include "ir/constant_value.h"
#include "patterns/matcher_support.h"

namespace fusionopt::composite {
namespace {

// The single axis a ReduceMean reduces, as written: the attribute before opset 18, the
// constant input from 18 on.
Decided<int64_t> ReduceMeanAxis(const Node& reduce, int64_t opset) {
  if (reduce.GetInt("keepdims", 1) != 1) return "a ReduceMean drops the reduced axis";
  const Attribute* attribute = reduce.FindAttribute("axes");
  const Value* input = reduce.input(1);
  std::vector<int64_t> axes;
  if (opset < 18) {
    if (input != nullptr) return "ReduceMean axes input before opset 18";
    if (attribute == nullptr) return "a ReduceMean reduces every axis";
    axes = attribute->ints;
  } else {
    if (attribute != nullptr) return "ReduceMean axes attribute from opset 18";
    if (input == nullptr) return "a ReduceMean reduces every axis";
    TensorPtr tensor = ConstantValueOf(*input, InitializerRule::kFeedsOverride);
    std::optional<std::vector<int64_t>> values = tensor ? tensor->AsInt64s() : std::nullopt;
    if (!values) return "ReduceMean axes are not constant";
    axes = *values;
  }
  if (axes.empty()) return "a ReduceMean reduces every axis";
  if (axes.size() != 1) return "a ReduceMean reduces more than one axis";
  return axes.front();
}

// v² as the variance's input spells it: Pow(v, 2) or Mul(v, v). Returns the node and v.
std::pair<Node*, Value*> Square(const Value* squared) {
  if (Node* pow = ProducerOp(squared, "Pow")) {
    if (IsScalarConstantNear(pow->input(1), 2.0)) return {pow, pow->input(0)};
    return {nullptr, nullptr};
  }
  Node* mul = ProducerOp(squared, "Mul");
  if (mul != nullptr && mul->inputs().size() == 2 && mul->input(0) == mul->input(1)) return {mul, mul->input(0)};
  return {nullptr, nullptr};
}

// centered / root, as Div(centered, root) or centered · (1 / root) with the inverse spelled
// Reciprocal(root) or Div(1, root). Returns {reciprocal or null, the normalizing node}.
std::pair<Node*, Node*> Normalization(const Value* root, const Value* centered) {
  for (const Use& use : root->uses()) {
    Node* reader = use.node;
    if (IsDefaultOp(reader, "Div") && reader->input(0) == centered && reader->input(1) == root) return {nullptr, reader};
    bool inverts = IsDefaultOp(reader, "Reciprocal") ||
                   (IsDefaultOp(reader, "Div") && reader->input(1) == root && IsScalarConstantNear(reader->input(0), 1.0));
    if (!inverts) continue;
    Node* scaled = ReaderOpWith(reader->output(0), "Mul", [&](const Value* other) { return other == centered; });
    if (scaled != nullptr) return {reader, scaled};
  }
  return {nullptr, nullptr};
}

// Mul(gamma) and, for LayerNorm, Add(beta) after the normalization, each read only by the next.
void ExtendAffineTail(CompositeMatch& match) {
  std::unordered_set<const Node*> members(match.nodes.begin(), match.nodes.end());
  auto affine = [&](std::string_view op_type) -> std::pair<Node*, Value*> {
    Node* reader = SoleReader(match.output);
    if (!IsDefaultOp(reader, op_type)) return {nullptr, nullptr};
    Value* other = OtherOperand(*reader, match.output);
    if (other == nullptr || other == match.output || other == match.x) return {nullptr, nullptr};
    if (other->producer() != nullptr && members.count(other->producer())) return {nullptr, nullptr};
    return {reader, other};
  };
  auto [mul, gamma] = affine("Mul");
  if (mul == nullptr) return;
  match.gamma_mul = mul;
  match.gamma = gamma;
  match.nodes.push_back(mul);
  members.insert(mul);
  match.output = mul->output(0);
  if (match.kind != CompositeKind::kLayerNorm) return;
  auto [add, beta] = affine("Add");
  if (add == nullptr) return;
  match.beta_add = add;
  match.beta = beta;
  match.nodes.push_back(add);
  match.output = add->output(0);
}

// Cast(x16, to=float) → normalization → Cast back: both Casts join the norm, whose affine tail
// then follows the Cast back (float16 LLaMA/Qwen exports). A norm that only widens, or only
// narrows, keeps its Cast outside. Whether the Cast back restores x16's type is the caller's to
// check (bodies are untyped): CompositeMatch::cast_back_to.
void ExtendFloat32Casts(CompositeMatch& match) {
  Node* widen = ProducerOp(match.x, "Cast");
  Node* narrow = SoleReader(match.output);
  if (widen == nullptr || !IsDefaultOp(narrow, "Cast") || widen->input(0) == nullptr || narrow->output(0) == nullptr) return;
  if (widen->GetInt("to", 0) != static_cast<int64_t>(DataType::kFloat)) return;
  match.cast_in = widen;
  match.cast_out = narrow;
  match.cast_back_to = narrow->GetInt("to", 0);
  match.nodes.push_back(widen);
  match.nodes.push_back(narrow);
  match.x = widen->input(0);
  match.output = narrow->output(0);
}

// x = Add(a, b) before the norm: the row kernel adds the rows it normalizes. Not before a
// Cast to float32: the sum would be rounded to the 16-bit type first, which the kernel does not.
void ExtendResidualPrologue(CompositeMatch& match) {
  if (match.cast_in != nullptr) return;
  Node* add = ProducerOp(match.x, "Add");
  if (add == nullptr || add->inputs().size() != 2 || add->input(0) == nullptr || add->input(1) == nullptr) return;
  match.residual_add = add;
  match.residual_sum = match.x;
  match.x = add->input(0);
  match.residual = add->input(1);
  match.nodes.push_back(add);
}

}  // namespace

CompositeSearch MatchDecomposedNorm(Node& sqrt, int64_t opset) {
  if (sqrt.output(0) == nullptr) return {};
  Node* add_epsilon = ProducerOp(sqrt.input(0), "Add");
  if (add_epsilon == nullptr || add_epsilon->inputs().size() != 2) return {};
  Node* variance = nullptr;
  Value* epsilon = nullptr;
  for (int i = 0; i < 2 && variance == nullptr; ++i) {
    variance = ProducerOp(add_epsilon->input(i), "ReduceMean");
    epsilon = add_epsilon->input(1 - i);
  }
  if (variance == nullptr) return {};
  auto [square, centered] = Square(variance->input(0));
  if (square == nullptr) return {};
  Node* sub = ProducerOp(centered, "Sub");
  Node* mean = sub != nullptr ? ProducerOp(sub->input(1), "ReduceMean") : nullptr;
  bool layer_norm = mean != nullptr && mean->input(0) == sub->input(0);
  auto [reciprocal, normalize] = Normalization(sqrt.output(0), centered);
  if (normalize == nullptr) return {};

  CompositeMatch match;
  match.kind = layer_norm ? CompositeKind::kLayerNorm : CompositeKind::kRmsNorm;
  match.x = layer_norm ? sub->input(0) : centered;
  std::optional<double> epsilon_value = ConstantScalar(epsilon, InitializerRule::kFeedsOverride);
  if (!epsilon_value || !(*epsilon_value >= 0)) return NearMiss(match.kind, "epsilon is not a constant scalar");
  match.epsilon = *epsilon_value;
  Decided<int64_t> axis = ReduceMeanAxis(*variance, opset);
  if (!axis) return NearMiss(match.kind, axis.why_not());
  match.axis = *axis;
  match.mean_reductions = {variance};
  if (layer_norm) {
    Decided<int64_t> mean_axis = ReduceMeanAxis(*mean, opset);
    if (!mean_axis) return NearMiss(match.kind, mean_axis.why_not());
    if (*mean_axis != match.axis) return NearMiss(match.kind, "the two ReduceMeans reduce different axes");
    match.mean_reductions.push_back(mean);
    match.nodes = {mean, sub};
  }
  for (Node* node : {square, variance, add_epsilon, &sqrt, reciprocal, normalize}) {
    if (node != nullptr) match.nodes.push_back(node);
  }
  match.output = normalize->output(0);
  ExtendFloat32Casts(match);
  ExtendAffineTail(match);
  ExtendResidualPrologue(match);
  return Checked(std::move(match));
}

CompositeSearch MatchNormOp(Node& norm) {
  CompositeMatch match;
  bool layer_norm = norm.op_type() == "LayerNormalization";
  match.kind = layer_norm ? CompositeKind::kLayerNorm : CompositeKind::kRmsNorm;
  match.standard_op = true;
  match.nodes = {&norm};
  match.x = norm.input(0);
  match.gamma = norm.input(1);
  match.beta = layer_norm ? norm.input(2) : nullptr;
  match.output = norm.output(0);
  if (match.x == nullptr || match.gamma == nullptr || match.output == nullptr) return {};
  match.epsilon = norm.GetFloat("epsilon", 1e-5f);
  match.axis = norm.GetInt("axis", -1);
  ExtendResidualPrologue(match);
  return Checked(std::move(match));
}

}  // namespace fusionopt::composite
