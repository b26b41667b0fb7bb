// The steps an Einsum runs, on operands whose axes carry labels (einsum.h).
//
// Project reduces one operand to a chosen list of labels: it takes diagonals (a label
// repeated on several axes), sums labels it drops, and lays the result out in the list's
// order — a view when the data already is. Contract multiplies two operands and sums the
// labels they share but the caller does not keep. Float32 contractions become one batched
// oneDNN matmul (MatMulPlans); every other compute type runs a direct loop over the labels.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu::einsum {

// A tensor whose axes carry labels. An axis of size 1 under a label of another size is a
// broadcast "..." dim: it holds no values of that label.
struct Operand {
  RtTensor tensor;
  std::vector<int> labels;
};

// What the steps of one Einsum call share: the size of every label, and where memory comes from.
struct Workspace {
  std::vector<int64_t> sizes;
  Allocator* allocator = nullptr;

  std::vector<int64_t> SizesOf(const std::vector<int>& labels) const;
};

// The labels `operand` holds values of, each once, in axis order.
std::vector<int> PresentLabels(const Operand& operand, const Workspace& workspace);

// `operand` laid out contiguously as `target` (labels it lacks broadcast), summed over its
// labels not in `target`; the operand itself, reshaped, when its data is already so laid out.
Operand Project(const Operand& operand, const std::vector<int>& target, const Workspace& workspace);
// True when Project(operand, target) is a view: no copy, no sum.
bool IsLaidOutAs(const Operand& operand, const std::vector<int>& target, const Workspace& workspace);

// Sum over the labels not in `keep` of a * b, with the labels of `keep` in that order.
Operand ContractDirectly(const Operand& a, const Operand& b, const std::vector<int>& keep,
                         const Workspace& workspace);

// Types the direct loops compute in: float (accumulated in double), double, the integers.
bool IsComputeType(DataType dtype);

// Float32 contractions as one batched matmul, with the oneDNN primitives built per shape.
class MatMulPlans {
 public:
  MatMulPlans();
  ~MatMulPlans();

  // Sum over the labels not in `keep` of a * b. The result holds the labels of `keep` in the
  // order that copies the least data, which is `keep`'s own order when that costs nothing.
  Result<Operand> Contract(const Operand& a, const Operand& b, const std::vector<int>& keep,
                           const Workspace& workspace);

 private:
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

}  // namespace fusionopt::cpu::einsum
