// Activations that exporters spell as several nodes, matched where they read one value %x:
//
//   SiLU        %y = Mul(%x, Sigmoid(%x))
//   GELU (erf)  %y = 0.5 · %x · (1 + Erf(%x / √2))                     (or %x · 0.70710678)
//   GELU (tanh) %y = 0.5 · %x · (1 + Tanh(√(2/π) · (%x + 0.044715 · %x³)))   (%x³ as Pow or Mul)
//
// Operands of Add and Mul match in either order; the three factors of 0.5 · %x · a may be
// multiplied in any association (exporters differ: PyTorch writes (%x · a) · 0.5, HF's GPT-2
// (0.5 · %x) · a). Constants must be scalars within a relative 1e-5 of the exact value. Every
// value inside a pattern is read only by the pattern's next node and is no graph output, so
// the pattern can be replaced as a whole; %x must be read by the pattern's nodes only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusionopt::passes {

// A piece of an epilogue: the nodes it takes and the value it leaves.
struct EpilogueStep {
  std::vector<Node*> nodes;
  Value* result = nullptr;
  std::string name;  // for the function name: "Add", "Relu", "Silu", "Gelu"
};

// The multi-node activation reading `x`, or nullopt.
std::optional<EpilogueStep> MatchActivationPattern(Value& x);

// The node that alone reads `value` (once, in the same graph), when `value` is no graph output.
Node* SoleReader(const Value& value);

// The other operand of a two-input node that reads `known` once, or null.
Value* OtherOperand(const Node& node, const Value& known);

bool IsStandardOp(const Node& node, std::string_view op_type);

// A constant one-element floating-point operand within relative 1e-5 of `expected`.
bool IsScalarNear(const Value* value, double expected);

}  // namespace fusionopt::passes
