// MatMul's operands resolved with numpy semantics (shared by the float MatMul and the
// integer contractions of quantized/): 1-D operands gain a unit M or N (dropped from the output
// again), batch dims broadcast.
#pragma once

#include <cstdint>
#include <vector>

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

}  // namespace fusionopt::cpu
