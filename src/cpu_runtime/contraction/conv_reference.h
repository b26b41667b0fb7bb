// The shape of one convolution and the direct loops that compute double convolutions
// (oneDNN computes float32 only; ONNX tests rarely use double, so clarity beats speed here).
#pragma once

#include <cstdint>
#include <vector>

#include "cpu_runtime/contraction/window.h"

namespace fusionopt::cpu {

struct ConvShape {
  int64_t batch = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t group = 1;
  Window window;                     // spatial axes
  std::vector<int64_t> output_dims;  // (N, M, spatial...)
};

// Conv: x (N, C, in...), w (M, C/group, k...), bias (M) or null.
void ReferenceConv(const double* x, const double* w, const double* bias, double* y, const ConvShape& shape);
// ConvTranspose: x (N, C, in...), w (C, M/group, k...), bias (M) or null.
void ReferenceConvTranspose(const double* x, const double* w, const double* bias, double* y, const ConvShape& shape);

}  // namespace fusionopt::cpu
