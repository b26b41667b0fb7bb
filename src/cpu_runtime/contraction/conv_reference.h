// The direct loops that compute double convolutions
// (oneDNN computes float32 only; ONNX tests rarely use double, so clarity beats speed here).
#pragma once

#include <cstdint>
#include <vector>

#include "cpu_runtime/contraction/conv_shape.h"

namespace fusionopt::cpu {

// Conv: x (N, C, in...), w (M, C/group, k...), bias (M) or null.
void ReferenceConv(const double* x, const double* w, const double* bias, double* y, const ConvShape& shape);
// ConvTranspose: x (N, C, in...), w (C, M/group, k...), bias (M) or null.
void ReferenceConvTranspose(const double* x, const double* w, const double* bias, double* y, const ConvShape& shape);

}  // namespace fusionopt::cpu
