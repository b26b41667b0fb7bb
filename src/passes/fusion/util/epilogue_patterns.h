// Activations that exporters spell as several nodes, matched where they read one value %x:
// the decomposed GELU (erf and tanh forms) and SiLU (with its QuickGELU scaling), recognised by the same composite matchers
// the fuse-composites pass and the CPU runtime use (patterns/composite/composite.h: forms, operand orders
// and constant tolerance are defined there, once). Every value inside a pattern is read only
// by the pattern and is no graph output; %x must be read by the pattern's nodes only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "patterns/composite/composite.h"

namespace fusionopt::passes {

// A piece of an epilogue: the nodes it takes and the value it leaves.
struct EpilogueStep {
  std::vector<Node*> nodes;
  Value* result = nullptr;
  std::string name;  // for the function name: "Add", "Relu", "Silu", "QuickGelu", "Gelu"
};

// A GELU or SiLU composite's name in function names: "Gelu", "Silu", or "QuickGelu" for a
// swish whose alpha is not 1.
std::string ActivationName(const CompositeMatch& match);

// The multi-node activation reading `x` under the default domain's `opset`, or nullopt.
std::optional<EpilogueStep> MatchActivationPattern(Value& x, int64_t opset);

// The node that alone reads `value` (once, in the same graph), when `value` is no graph output.
Node* SoleReader(const Value& value);

// The other operand of a two-input node that reads `known` once, or null.
Value* OtherOperand(const Node& node, const Value& known);

bool IsStandardOp(const Node& node, std::string_view op_type);

}  // namespace fusionopt::passes
