// Einsum in the CPU runtime: the equation, and how it labels the axes of concrete operands.
//
// Every axis of every operand gets a label id. Letters are labels 0..51 in ASCII order
// ('A'..'Z', then 'a'..'z'), so sorting ids sorts letters the way the implicit output needs;
// the dims "..." stands for are labels 52 onwards, aligned from the right across operands
// and broadcast numpy-style (a "..." dim of size 1 stretches to the others). Letters do not
// broadcast: every axis named by one letter must have one size (the IR's shape inference
// applies the same rule).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cpu_runtime/engine/kernel.h"
#include "ir/status.h"

namespace fusionopt::cpu {

void RegisterEinsumKernels(KernelRegistry& registry);  // einsum/kernels.cc

namespace einsum {

constexpr int kLetterLabels = 52;  // label ids of the dims "..." stands for start here

// One term of the equation as written: its letters, and where "..." stands among them.
struct Term {
  std::string text;
  std::string letters;
  std::optional<size_t> ellipsis_at;  // index into letters
};

struct Equation {
  std::string text;
  std::vector<Term> inputs;
  std::optional<Term> output;  // nullopt: implicit output
};

// Parses "ij,jk->ik" style equations (whitespace is ignored) and checks what the text alone
// decides: characters, "..." placement, output letters that are unique and used by an input.
Result<Equation> ParseEquation(std::string_view text);

// The labels of one call: a size per label id and a label per axis.
struct Labeling {
  std::vector<int64_t> sizes;               // per label id; -1 where no operand knows it
  std::vector<std::vector<int>> operands;   // per operand, the label of each axis
  std::vector<int> output;                  // the label of each output axis
};

// Labels operands of `dims` (-1: a size not known yet, as when checking declared shapes).
// Errors name the operand and term that do not fit: rank against letter count, one letter
// bound to two sizes, "..." dims that do not broadcast, or "..." dims the output drops.
Result<Labeling> Bind(const Equation& equation, const std::vector<std::vector<int64_t>>& dims);

}  // namespace einsum
}  // namespace fusionopt::cpu
