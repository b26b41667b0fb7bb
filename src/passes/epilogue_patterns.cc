#include "passes/epilogue_patterns.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ir/constant_value.h"

namespace fusionopt::passes {
namespace {

Node* SoleReaderOp(const Value* value, std::string_view op_type) {
  Node* reader = value != nullptr ? SoleReader(*value) : nullptr;
  return reader != nullptr && IsStandardOp(*reader, op_type) ? reader : nullptr;
}

// The other operand of `node` (op_type, two inputs) next to `known`, or null.
Value* OtherOperandOf(const Node* node, std::string_view op_type, const Value* known) {
  if (node == nullptr || known == nullptr || !IsStandardOp(*node, op_type)) return nullptr;
  return OtherOperand(*node, *known);
}

bool AllUsesBy(const Value& x, const std::vector<Node*>& nodes) {
  if (x.is_graph_output()) return false;
  return std::all_of(x.uses().begin(), x.uses().end(), [&](const Use& use) {
    return std::find(nodes.begin(), nodes.end(), use.node) != nodes.end();
  });
}

// 0.5 · x · a as two Muls, the first of them `first` (a reader of x). Returns the Muls and the
// product, or nullopt.
std::optional<EpilogueStep> MatchHalfProduct(const Value& x, Value& a, Node* first) {
  Value* other = OtherOperandOf(first, "Mul", &x);
  if (other == nullptr) return std::nullopt;
  Value* first_out = first->output(0);
  if (other == &a && SoleReader(a) == first) {  // (x · a) · 0.5
    Node* second = SoleReaderOp(first_out, "Mul");
    if (second != nullptr && IsScalarNear(OtherOperand(*second, *first_out), 0.5)) {
      return EpilogueStep{{first, second}, second->output(0), ""};
    }
    return std::nullopt;
  }
  if (IsScalarNear(other, 0.5)) {  // (x · 0.5) · a
    Node* second = SoleReaderOp(first_out, "Mul");
    if (second != nullptr && OtherOperand(*second, *first_out) == &a && SoleReader(a) == second) {
      return EpilogueStep{{first, second}, second->output(0), ""};
    }
    return std::nullopt;
  }
  Node* half = other->producer();  // x · (a · 0.5)
  if (half != nullptr && SoleReader(*other) == first && SoleReader(a) == half &&
      IsScalarNear(OtherOperandOf(half, "Mul", &a), 0.5)) {
    return EpilogueStep{{half, first}, first_out, ""};
  }
  return std::nullopt;
}

// 1 + f(...) where `f` is the node computing the Erf or Tanh; returns the Add.
Node* MatchOnePlus(Node* f) {
  if (f == nullptr) return nullptr;
  Node* add = SoleReaderOp(f->output(0), "Add");
  return add != nullptr && IsScalarNear(OtherOperand(*add, *f->output(0)), 1.0) ? add : nullptr;
}

// Readers in x's own graph (a pattern never spans a subgraph boundary; AllUsesBy then refuses
// an x that a subgraph also reads).
std::vector<Node*> DistinctReaders(const Value& x) {
  std::vector<Node*> readers;
  for (const Use& use : x.uses()) {
    if (use.node->graph() != x.graph()) continue;
    if (std::find(readers.begin(), readers.end(), use.node) == readers.end()) readers.push_back(use.node);
  }
  return readers;
}

// Finishes a GELU: `inner` are the nodes from x to the Add computing 1 + erf/tanh; the product
// is found among x's other readers.
std::optional<EpilogueStep> FinishGelu(Value& x, std::vector<Node*> inner, Node* one_plus) {
  for (Node* reader : DistinctReaders(x)) {
    if (std::find(inner.begin(), inner.end(), reader) != inner.end()) continue;
    auto product = MatchHalfProduct(x, *one_plus->output(0), reader);
    if (!product) continue;
    std::vector<Node*> nodes = inner;
    nodes.insert(nodes.end(), product->nodes.begin(), product->nodes.end());
    if (!AllUsesBy(x, nodes)) continue;
    return EpilogueStep{nodes, product->result, "Gelu"};
  }
  return std::nullopt;
}

std::optional<EpilogueStep> MatchGeluErf(Value& x) {
  for (Node* scale : DistinctReaders(x)) {
    bool divides = IsStandardOp(*scale, "Div") && scale->input(0) == &x && IsScalarNear(scale->input(1), std::sqrt(2.0));
    bool multiplies = IsScalarNear(OtherOperandOf(scale, "Mul", &x), std::sqrt(0.5));
    if (!divides && !multiplies) continue;
    Node* erf = SoleReaderOp(scale->output(0), "Erf");
    Node* one_plus = MatchOnePlus(erf);
    if (one_plus == nullptr) continue;
    if (auto gelu = FinishGelu(x, {scale, erf, one_plus}, one_plus)) return gelu;
  }
  return std::nullopt;
}

// x³ as Pow(x, 3) or Mul(Mul(x, x), x): the nodes and the cube.
std::optional<std::pair<std::vector<Node*>, Value*>> MatchCube(Value& x, Node* start) {
  if (IsStandardOp(*start, "Pow") && start->input(0) == &x && IsScalarNear(start->input(1), 3.0)) {
    return std::make_pair(std::vector<Node*>{start}, start->output(0));
  }
  if (IsStandardOp(*start, "Mul") && start->inputs().size() == 2 && start->input(0) == &x && start->input(1) == &x) {
    Node* cube = SoleReaderOp(start->output(0), "Mul");
    if (cube != nullptr && OtherOperand(*cube, *start->output(0)) == &x) {
      return std::make_pair(std::vector<Node*>{start, cube}, cube->output(0));
    }
  }
  return std::nullopt;
}

std::optional<EpilogueStep> MatchGeluTanh(Value& x) {
  for (Node* start : DistinctReaders(x)) {
    auto cube = MatchCube(x, start);
    if (!cube) continue;
    Node* scaled_cube = SoleReaderOp(cube->second, "Mul");
    if (scaled_cube == nullptr || !IsScalarNear(OtherOperand(*scaled_cube, *cube->second), 0.044715)) continue;
    Node* sum = SoleReaderOp(scaled_cube->output(0), "Add");
    if (sum == nullptr || OtherOperand(*sum, *scaled_cube->output(0)) != &x) continue;
    Node* scaled_sum = SoleReaderOp(sum->output(0), "Mul");
    if (scaled_sum == nullptr || !IsScalarNear(OtherOperand(*scaled_sum, *sum->output(0)), std::sqrt(2.0 / std::numbers::pi))) {
      continue;
    }
    Node* tanh = SoleReaderOp(scaled_sum->output(0), "Tanh");
    Node* one_plus = MatchOnePlus(tanh);
    if (one_plus == nullptr) continue;
    std::vector<Node*> inner = cube->first;
    inner.insert(inner.end(), {scaled_cube, sum, scaled_sum, tanh, one_plus});
    if (auto gelu = FinishGelu(x, inner, one_plus)) return gelu;
  }
  return std::nullopt;
}

std::optional<EpilogueStep> MatchSilu(Value& x) {
  for (Node* sigmoid : DistinctReaders(x)) {
    if (!IsStandardOp(*sigmoid, "Sigmoid") || sigmoid->input(0) != &x) continue;
    Node* product = SoleReaderOp(sigmoid->output(0), "Mul");
    if (product == nullptr || OtherOperand(*product, *sigmoid->output(0)) != &x) continue;
    if (!AllUsesBy(x, {sigmoid, product})) continue;
    return EpilogueStep{{sigmoid, product}, product->output(0), "Silu"};
  }
  return std::nullopt;
}

}  // namespace

bool IsStandardOp(const Node& node, std::string_view op_type) {
  return (node.domain().empty() || node.domain() == "ai.onnx") && node.op_type() == op_type;
}

Node* SoleReader(const Value& value) {
  if (value.is_graph_output() || value.uses().size() != 1) return nullptr;
  Node* reader = value.uses().front().node;
  return reader->graph() == value.graph() ? reader : nullptr;
}

Value* OtherOperand(const Node& node, const Value& known) {
  if (node.inputs().size() != 2 || node.input(0) == nullptr || node.input(1) == nullptr) return nullptr;
  if (node.input(0) == &known && node.input(1) != &known) return node.input(1);
  if (node.input(1) == &known && node.input(0) != &known) return node.input(0);
  return nullptr;
}

bool IsScalarNear(const Value* value, double expected) {
  if (value == nullptr) return false;
  TensorPtr constant = ConstantValueOf(*value, /*initializers_overridable=*/true);
  if (constant == nullptr || constant->NumElements() != 1 || !IsFloatingPoint(constant->dtype())) return false;
  auto values = constant->AsDoubles();
  return values && std::abs((*values)[0] - expected) <= 1e-5 * std::abs(expected);
}

std::optional<EpilogueStep> MatchActivationPattern(Value& x) {
  if (x.is_graph_output() || x.uses().size() < 2) return std::nullopt;
  if (auto silu = MatchSilu(x)) return silu;
  if (auto gelu = MatchGeluErf(x)) return gelu;
  return MatchGeluTanh(x);
}

}  // namespace fusionopt::passes
