#include "cpu_runtime/contraction/matmul_shape.h"

#include <algorithm>

#include "cpu_runtime/engine/rt_tensor.h"

namespace fusionopt::cpu {

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t product = 1;
  for (int64_t dim : dims) product *= dim;
  return product;
}

Result<MatMulShape> ResolveMatMul(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.empty() || b.empty()) {
    return InvalidModel("MatMul operands need rank >= 1, got " + DimsToString(a) + " and " + DimsToString(b));
  }
  MatMulShape shape;
  shape.m = a.size() >= 2 ? a[a.size() - 2] : 1;
  shape.k = a.back();
  shape.n = b.size() >= 2 ? b.back() : 1;
  const int64_t b_k = b.size() >= 2 ? b[b.size() - 2] : b[0];
  if (b_k != shape.k) {
    return InvalidModel("MatMul inner dimensions differ: " + DimsToString(a) + " x " + DimsToString(b));
  }
  std::vector<int64_t> a_batch(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  std::vector<int64_t> b_batch(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  const size_t rank = std::max(a_batch.size(), b_batch.size());
  a_batch.insert(a_batch.begin(), rank - a_batch.size(), 1);
  b_batch.insert(b_batch.begin(), rank - b_batch.size(), 1);
  for (size_t axis = 0; axis < rank; ++axis) {
    if (a_batch[axis] != b_batch[axis] && a_batch[axis] != 1 && b_batch[axis] != 1) {
      return InvalidModel("MatMul batch dimensions do not broadcast: " + DimsToString(a) + " x " + DimsToString(b));
    }
    shape.batch.push_back(a_batch[axis] == 1 ? b_batch[axis] : a_batch[axis]);
  }
  shape.output = shape.batch;
  if (a.size() >= 2) shape.output.push_back(shape.m);
  if (b.size() >= 2) shape.output.push_back(shape.n);
  shape.a_batch = std::move(a_batch);
  shape.b_batch = std::move(b_batch);
  return shape;
}

// Offsets of each output batch's matrix inside a broadcast operand.
std::vector<int64_t> BatchOffsets(const std::vector<int64_t>& operand_batch, const std::vector<int64_t>& batch,
                                  int64_t matrix_size) {
  std::vector<int64_t> offsets(static_cast<size_t>(Product(batch)));
  for (size_t index = 0; index < offsets.size(); ++index) {
    int64_t rest = static_cast<int64_t>(index), offset = 0, stride = matrix_size;
    for (size_t axis = batch.size(); axis-- > 0;) {
      const int64_t coordinate = rest % batch[axis];
      rest /= batch[axis];
      if (operand_batch[axis] != 1) offset += coordinate * stride;
      stride *= operand_batch[axis];
    }
    offsets[index] = offset;
  }
  return offsets;
}

}  // namespace fusionopt::cpu
