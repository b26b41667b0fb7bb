#include "passes/fusion/util/epilogue_patterns.h"

#include <algorithm>
#include <unordered_set>

#include "patterns/composite/composite.h"

namespace fusionopt::passes {
namespace {

bool AllUsesBy(const Value& x, const std::vector<Node*>& nodes) {
  if (x.is_graph_output()) return false;
  return std::all_of(x.uses().begin(), x.uses().end(), [&](const Use& use) {
    return std::find(nodes.begin(), nodes.end(), use.node) != nodes.end();
  });
}

// Where a decomposed activation of x can be anchored: its Erf (erf GELU), Tanh (tanh GELU)
// or Sigmoid (SiLU), at most kAnchorDepth readers downstream of x in x's graph.
std::vector<Node*> AnchorsBelow(const Value& x) {
  constexpr int kAnchorDepth = 6;  // the tanh GELU: x -> Pow -> Mul -> Add -> Mul -> Tanh
  std::vector<Node*> anchors;
  std::unordered_set<const Node*> seen;
  std::vector<const Value*> frontier = {&x};
  for (int depth = 0; depth < kAnchorDepth && !frontier.empty(); ++depth) {
    std::vector<const Value*> next;
    for (const Value* value : frontier) {
      for (const Use& use : value->uses()) {
        Node* reader = use.node;
        if (reader->graph() != x.graph() || !seen.insert(reader).second) continue;
        if (IsStandardOp(*reader, "Erf") || IsStandardOp(*reader, "Tanh") || IsStandardOp(*reader, "Sigmoid")) {
          anchors.push_back(reader);
        }
        for (const Value* output : reader->outputs()) {
          if (output != nullptr) next.push_back(output);
        }
      }
    }
    frontier = std::move(next);
  }
  return anchors;
}

}  // namespace

std::string ActivationName(const CompositeMatch& match) {
  if (match.kind == CompositeKind::kGelu) return "Gelu";
  return match.alpha == 1.0 ? "Silu" : "QuickGelu";
}

bool IsStandardOp(const Node& node, std::string_view op_type) {
  return IsDefaultDomain(node) && node.op_type() == op_type;
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

std::optional<EpilogueStep> MatchActivationPattern(Value& x, int64_t opset) {
  if (x.is_graph_output() || x.uses().size() < 2) return std::nullopt;
  for (Node* anchor : AnchorsBelow(x)) {
    CompositeSearch search = MatchCompositeAt(*anchor, opset);
    if (!search.match) continue;
    const CompositeMatch& match = *search.match;
    bool activation = match.kind == CompositeKind::kGelu || match.kind == CompositeKind::kSilu;
    if (!activation || match.standard_op || match.x != &x || !AllUsesBy(x, match.nodes)) continue;
    return EpilogueStep{match.nodes, match.output, ActivationName(match)};
  }
  return std::nullopt;
}

}  // namespace fusionopt::passes
