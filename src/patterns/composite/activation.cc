// Softmax with its scale and mask, GELU (erf and tanh forms, the Gelu op) and SiLU.
#include <cmath>

#include "ir/constant_value.h"
#include "patterns/matcher_support.h"

namespace fusionopt::composite {
namespace {

const double kSqrt2 = std::sqrt(2.0);
const double kSqrt2OverPi = std::sqrt(2.0 / std::acos(-1.0));
constexpr double kCubicCoefficient = 0.044715;

// x · c (either order) or x / c with c a constant scalar: returns {x, c, divides, c's type}.
struct ScaledBy {
  Value* x = nullptr;
  double constant = 0;
  bool divides = false;
  DataType type = DataType::kUndefined;
};

// The element type of a constant scalar as stored (function bodies leave values untyped).
DataType StoredType(const Value* constant) {
  TensorPtr tensor = ConstantValueOf(*constant, InitializerRule::kFeedsOverride);
  return tensor != nullptr ? tensor->dtype() : DataType::kUndefined;
}

std::optional<ScaledBy> ScaledByConstant(const Value* value) {
  if (Node* div = ProducerOp(value, "Div")) {
    std::optional<double> divisor = ConstantScalar(div->input(1), InitializerRule::kFeedsOverride);
    if (divisor && *divisor != 0) return ScaledBy{div->input(0), *divisor, true, StoredType(div->input(1))};
    return std::nullopt;
  }
  Node* mul = ProducerOp(value, "Mul");
  if (mul == nullptr || mul->inputs().size() != 2) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    if (std::optional<double> factor = ConstantScalar(mul->input(i), InitializerRule::kFeedsOverride)) {
      return ScaledBy{mul->input(1 - i), *factor, false, StoredType(mul->input(i))};
    }
  }
  return std::nullopt;
}

// Whether `node` computes value · 0.5 (either order) or value / 2.
bool Halves(const Node* node, const Value* value) {
  if (IsDefaultOp(node, "Mul")) {
    const Value* other = OtherOperand(*node, value);
    return other != nullptr && IsScalarConstantNear(other, 0.5);
  }
  return IsDefaultOp(node, "Div") && node->input(0) == value && IsScalarConstantNear(node->input(1), 2.0);
}

// The node computing `value` · 0.5 or `value` / 2 among its readers.
Node* HalvingReader(const Value* value) {
  if (value == nullptr) return nullptr;
  for (const Use& use : value->uses()) {
    if (Halves(use.node, value)) return use.node;
  }
  return nullptr;
}

// x · 0.5 · bracket, where bracket = 1 + erf(..) or 1 + tanh(..), multiplied in any order:
// (x · b) · ½, (b · ½) · x, or (x · ½) · b.
CompositeSearch FinishGelu(CompositeMatch match, Node& plus_one, Value* x) {
  Value* bracket = plus_one.output(0);
  if (bracket == nullptr) return {};
  match.x = x;
  match.nodes.push_back(&plus_one);
  for (const Use& use : bracket->uses()) {
    Node* mul = use.node;
    if (!IsDefaultOp(mul, "Mul")) continue;
    Value* other = OtherOperand(*mul, bracket);
    if (other == x) {
      Node* half = HalvingReader(mul->output(0));
      if (half == nullptr) return NearMiss(match.kind, "x times the bracket is not halved");
      match.nodes.insert(match.nodes.end(), {mul, half});
      match.output = half->output(0);
      return Checked(std::move(match));
    }
    if (other != nullptr && IsScalarConstantNear(other, 0.5)) {
      Node* top = ReaderOpWith(mul->output(0), "Mul", [&](const Value* operand) { return operand == x; });
      if (top == nullptr) continue;
      match.nodes.insert(match.nodes.end(), {mul, top});
      match.output = top->output(0);
      return Checked(std::move(match));
    }
    Node* halved = other != nullptr ? other->producer() : nullptr;
    if (halved != nullptr && Halves(halved, x)) {
      match.nodes.insert(match.nodes.end(), {halved, mul});
      match.output = mul->output(0);
      return Checked(std::move(match));
    }
  }
  return NearMiss(match.kind, "the bracket is not multiplied by x and 0.5");
}

// 1 + term among the readers of `term`.
Node* PlusOne(const Value* term) {
  return ReaderOpWith(term, "Add", [](const Value* other) { return IsScalarConstantNear(other, 1.0); });
}

// x³ spelled Pow(x, 3), Mul(x, Mul(x, x)) or Mul(Mul(x, x), x): its nodes, or empty.
std::vector<Node*> Cube(const Value* cubed, const Value* x) {
  if (Node* pow = ProducerOp(cubed, "Pow")) {
    if (pow->input(0) == x && IsScalarConstantNear(pow->input(1), 3.0)) return {pow};
    return {};
  }
  Node* outer = ProducerOp(cubed, "Mul");
  if (outer == nullptr) return {};
  Value* squared = OtherOperand(*outer, x);
  Node* inner = ProducerOp(squared, "Mul");
  if (inner != nullptr && inner->input(0) == x && inner->input(1) == x) return {inner, outer};
  return {};
}

}  // namespace

CompositeSearch MatchSoftmax(Node& softmax, int64_t opset) {
  CompositeMatch match;
  match.kind = CompositeKind::kSoftmax;
  match.nodes = {&softmax};
  match.axis = softmax.GetInt("axis", opset >= 13 ? -1 : 1);
  match.output = softmax.output(0);
  Value* scores = softmax.input(0);
  if (scores == nullptr || match.output == nullptr) return {};
  Node* scores_reader = &softmax;
  auto scaled_here = [](const Value* value, const Node* reader) {
    return SoleReader(value) == reader && ScaledByConstant(value).has_value();
  };
  if (SoleReader(scores) == &softmax) {
    if (Node* add = ProducerOp(scores, "Add"); add != nullptr && add->inputs().size() == 2) {
      bool second_scaled = scaled_here(add->input(1), add) && !scaled_here(add->input(0), add);
      match.mask_node = add;
      match.mask = add->input(second_scaled ? 0 : 1);
      scores = add->input(second_scaled ? 1 : 0);
    } else if (Node* where = ProducerOp(scores, "Where"); where != nullptr && where->inputs().size() == 3) {
      for (int fill_index : {2, 1}) {
        if (std::optional<double> fill = ConstantScalar(where->input(fill_index), InitializerRule::kFeedsOverride)) {
          match.mask_node = where;
          match.condition = where->input(0);
          match.fill = *fill;
          match.fill_when_true = fill_index == 1;
          scores = where->input(3 - fill_index);
          break;
        }
      }
    }
    if (match.mask_node != nullptr) {
      match.nodes.push_back(match.mask_node);
      scores_reader = match.mask_node;
    }
  }
  if (scaled_here(scores, scores_reader)) {
    ScaledBy scaled = *ScaledByConstant(scores);
    match.nodes.push_back(scores->producer());
    match.scale = scaled.constant;
    match.scale_divides = scaled.divides;
    scores = scaled.x;
  }
  match.x = scores;
  return Checked(std::move(match));
}

CompositeSearch MatchErfGelu(Node& erf) {
  std::optional<ScaledBy> argument = ScaledByConstant(erf.input(0));
  if (!argument) return {};
  CompositeMatch match;
  match.kind = CompositeKind::kGelu;
  match.gelu_form = GeluForm::kErf;
  double expected = argument->divides ? kSqrt2 : 1.0 / kSqrt2;
  if (!Near(argument->constant, expected, argument->type)) return NearMiss(match.kind, "the erf argument is not x/sqrt(2)");
  Node* plus_one = PlusOne(erf.output(0));
  if (plus_one == nullptr) return NearMiss(match.kind, "erf is not followed by 1 + erf");
  match.nodes = {erf.input(0)->producer(), &erf};
  return FinishGelu(std::move(match), *plus_one, argument->x);
}

// k · x · x spelled Mul(Mul(k, x), x) (either order) or Mul(k, Mul(x, x)): k and the nodes.
std::optional<std::pair<ScaledBy, std::vector<Node*>>> ScaledSquare(const Value* value, const Value* x) {
  Node* outer = ProducerOp(value, "Mul");
  if (outer == nullptr || outer->inputs().size() != 2) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    if (outer->input(i) != x) continue;
    std::optional<ScaledBy> scaled = ScaledByConstant(outer->input(1 - i));
    if (scaled && !scaled->divides && scaled->x == x) {
      return std::make_pair(*scaled, std::vector<Node*>{outer->input(1 - i)->producer(), outer});
    }
  }
  std::optional<ScaledBy> scaled = ScaledByConstant(value);
  Node* square = scaled && !scaled->divides ? ProducerOp(scaled->x, "Mul") : nullptr;
  if (square != nullptr && square->input(0) == x && square->input(1) == x) {
    return std::make_pair(*scaled, std::vector<Node*>{square, outer});
  }
  return std::nullopt;
}

// The tanh argument factored as BLOOM writes it, c·x·(1 + k·x·x) = c·(x + k·x³): (c·x) times
// (1 + k·x·x), each product in either order. Its nodes are appended to match.nodes.
CompositeSearch MatchFactoredTanhGelu(Node& tanh) {
  Node* product = ProducerOp(tanh.input(0), "Mul");
  if (product == nullptr || product->inputs().size() != 2) return {};
  for (int i = 0; i < 2; ++i) {
    std::optional<ScaledBy> argument = ScaledByConstant(product->input(i));
    Node* plus = ProducerOp(product->input(1 - i), "Add");
    if (!argument || argument->divides || plus == nullptr || plus->inputs().size() != 2) continue;
    for (int j = 0; j < 2; ++j) {
      if (!IsScalarConstantNear(plus->input(j), 1.0)) continue;
      auto square = ScaledSquare(plus->input(1 - j), argument->x);
      if (!square) continue;
      CompositeMatch match;
      match.kind = CompositeKind::kGelu;
      match.gelu_form = GeluForm::kTanh;
      if (!Near(argument->constant, kSqrt2OverPi, argument->type)) return NearMiss(match.kind, "the tanh argument is not scaled by sqrt(2/pi)");
      if (!Near(square->first.constant, kCubicCoefficient, square->first.type)) return NearMiss(match.kind, "the cubic coefficient is not 0.044715");
      Node* plus_one = PlusOne(tanh.output(0));
      if (plus_one == nullptr) return NearMiss(match.kind, "tanh is not followed by 1 + tanh");
      match.nodes = square->second;
      match.nodes.insert(match.nodes.end(), {plus, product->input(i)->producer(), product, &tanh});
      return FinishGelu(std::move(match), *plus_one, argument->x);
    }
  }
  return {};
}

CompositeSearch MatchTanhGelu(Node& tanh) {
  std::optional<ScaledBy> argument = ScaledByConstant(tanh.input(0));
  if (!argument || argument->divides) return MatchFactoredTanhGelu(tanh);
  Node* sum = ProducerOp(argument->x, "Add");
  if (sum == nullptr || sum->inputs().size() != 2) return {};
  for (int i = 0; i < 2; ++i) {
    Value* x = sum->input(i);
    std::optional<ScaledBy> cubic = ScaledByConstant(sum->input(1 - i));
    if (!cubic || cubic->divides) continue;
    std::vector<Node*> cube = Cube(cubic->x, x);
    if (cube.empty()) continue;
    CompositeMatch match;
    match.kind = CompositeKind::kGelu;
    match.gelu_form = GeluForm::kTanh;
    if (!Near(argument->constant, kSqrt2OverPi, argument->type)) return NearMiss(match.kind, "the tanh argument is not scaled by sqrt(2/pi)");
    if (!Near(cubic->constant, kCubicCoefficient, cubic->type)) return NearMiss(match.kind, "the cubic coefficient is not 0.044715");
    Node* plus_one = PlusOne(tanh.output(0));
    if (plus_one == nullptr) return NearMiss(match.kind, "tanh is not followed by 1 + tanh");
    match.nodes = cube;
    match.nodes.insert(match.nodes.end(), {sum->input(1 - i)->producer(), sum, tanh.input(0)->producer(), &tanh});
    return FinishGelu(std::move(match), *plus_one, x);
  }
  return MatchFactoredTanhGelu(tanh);
}

CompositeSearch MatchGeluOp(Node& gelu) {
  CompositeMatch match;
  match.kind = CompositeKind::kGelu;
  match.standard_op = true;
  match.nodes = {&gelu};
  match.x = gelu.input(0);
  match.output = gelu.output(0);
  std::string approximate = gelu.GetString("approximate", "none");
  if (match.x == nullptr || match.output == nullptr) return {};
  if (approximate != "none" && approximate != "tanh") return NearMiss(match.kind, "unknown approximate attribute");
  match.gelu_form = approximate == "tanh" ? GeluForm::kTanh : GeluForm::kErf;
  return Checked(std::move(match));
}

// x·sigmoid(x), or x·sigmoid(alpha·x) with alpha a scalar constant (x·alpha or x/alpha^-1 in
// either operand order): QuickGELU's 1.702 in CLIP, or any other swish. The sigmoid's own
// argument is tried as x first, so a SiLU of a scaled value stays a SiLU.
CompositeSearch MatchSilu(Node& sigmoid) {
  Value* argument = sigmoid.input(0);
  if (argument == nullptr) return {};
  auto times = [&](const Value* x) {
    return ReaderOpWith(sigmoid.output(0), "Mul", [&](const Value* other) { return other == x; });
  };
  CompositeMatch match;
  match.kind = CompositeKind::kSilu;
  if (Node* mul = times(argument)) {
    match.nodes = {&sigmoid, mul};
    match.x = argument;
    match.output = mul->output(0);
    return Checked(std::move(match));
  }
  std::optional<ScaledBy> scaled = ScaledByConstant(argument);
  Node* mul = scaled ? times(scaled->x) : nullptr;
  if (mul == nullptr) return {};
  match.nodes = {argument->producer(), &sigmoid, mul};
  match.x = scaled->x;
  match.alpha = scaled->divides ? 1.0 / scaled->constant : scaled->constant;
  match.output = mul->output(0);
  return Checked(std::move(match));
}

}  // namespace fusionopt::composite
