// Constant floating-point operands of a weight rewrite, read as doubles and written back with
// one rounding to the operand's dtype.
//
// Besides initializers and Constant nodes, a ConstantOfShape over a constant shape counts: it
// is a "splat", every element the same number. The light model-zoo models keep their weights
// that way (fold-constants leaves splats above its size cap alone), and a rewrite that scales
// every channel alike keeps a splat a splat instead of materialising megabytes of one number.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace fusionopt::passes {

struct ConstantOperand {
  Value* value = nullptr;
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> dims;
  TensorPtr tensor;      // the values, unless a splat
  Node* splat = nullptr;  // the ConstantOfShape producing every element as `splat_value`
  double splat_value = 0;

  int64_t NumElements() const;
  uint64_t NumBytes() const;
  std::vector<double> Values() const;  // every element, row-major
};

// The operand `value` holds when it is a floating-point (float, float16, bfloat16, double)
// constant: a constant under the model's initializer rule, or a splat. nullopt otherwise.
std::optional<ConstantOperand> ReadConstantOperand(Value* value, const Model& model);



}  // namespace fusionopt::passes
