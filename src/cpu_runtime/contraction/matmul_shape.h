// MatMul's operands resolved with numpy semantics (shared by the float MatMul and the
// integer contractions of quantized/): 1-D operands gain a unit M or N (dropped from the output
// again), batch dims broadcast.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cpu_runtime/contraction/common.h"
#include "ir/status.h"

namespace fusionopt::cpu {

int64_t Product(const std::vector<int64_t>& dims);

struct MatMulShape {
  std::vector<int64_t> a_batch, b_batch, batch;  // all of batch's rank
  int64_t m = 1, k = 1, n = 1;
  std::vector<int64_t> output;

  // B is one matrix for every batch, so A's batch rows fold into M: one plain GEMM.
  bool b_shared() const {
    for (int64_t dim : b_batch) {
      if (dim != 1) return false;
    }
    return true;
  }
  // The output as the primitive writes it: (rows, N) when batches fold, else (batch..., M, N).
  std::vector<int64_t> dst() const {
    if (b_shared()) return {Product(a_batch) * m, n};
    std::vector<int64_t> dims = batch;
    dims.push_back(m);
    dims.push_back(n);
    return dims;
  }
};

Result<MatMulShape> ResolveMatMul(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// Offsets of each output batch's matrix inside a broadcast operand.
std::vector<int64_t> BatchOffsets(const std::vector<int64_t>& operand_batch, const std::vector<int64_t>& batch,
                                  int64_t matrix_size);

// Direct loops for what oneDNN does not compute exactly (double, integers): c = a · b over
// row-major operands of `shape`, batches broadcast.
template <typename T>
void ReferenceMatMul(const T* a, const T* b, T* c, const MatMulShape& shape) {
  const std::vector<int64_t> a_offsets = BatchOffsets(shape.a_batch, shape.batch, shape.m * shape.k);
  const std::vector<int64_t> b_offsets = BatchOffsets(shape.b_batch, shape.batch, shape.k * shape.n);
  const int64_t rows = static_cast<int64_t>(a_offsets.size()) * shape.m;
  const int64_t m = shape.m, k = shape.k, n = shape.n;
#pragma omp parallel for if (rows * k * n > kParallelWork)
  for (int64_t row = 0; row < rows; ++row) {
    const T* a_row = a + a_offsets[row / m] + (row % m) * k;
    const T* b_matrix = b + b_offsets[row / m];
    T* c_row = c + row * n;
    std::fill(c_row, c_row + n, T(0));
    for (int64_t inner = 0; inner < k; ++inner) {
      const T scale = a_row[inner];
      const T* b_row = b_matrix + inner * n;
      for (int64_t column = 0; column < n; ++column) c_row[column] += scale * b_row[column];
    }
  }
}

}  // namespace fusionopt::cpu
