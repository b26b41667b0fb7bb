// The quantized kernel family (DESIGN.md §5, 6): QuantizeLinear/DequantizeLinear, the integer
// contractions and the QLinear ops, and what their kernels share.
#pragma once

#include "cpu_runtime/engine/kernel.h"

namespace fusionopt::cpu {

void RegisterQuantizeLinearKernels(KernelRegistry& registry);       // quantized/quantize_linear.cc
void RegisterIntegerContractionKernels(KernelRegistry& registry);  // quantized/integer_ops.cc
void RegisterQLinearKernels(KernelRegistry& registry);             // quantized/qlinear_ops.cc
void RegisterMatMulNBitsKernels(KernelRegistry& registry);         // quantized/matmul_nbits.cc

// DynamicQuantizeLinear's parameters for `count` float values: the range stretched to include
// 0, scale = (max - min) / 255, zero_point = saturate(round(-min / scale)). An all-zero input
// gets scale 0 and zero point 0 (the formula divides by zero there).
struct DynamicParameters {
  float scale = 0.0f;
  uint8_t zero_point = 0;
};
DynamicParameters DynamicUint8Parameters(const float* values, int64_t count);
// y (uint8, x's shape) = saturate(round(x / scale) + zero_point); all zeros for scale 0.
Status QuantizeDynamically(const RtTensor& x, const DynamicParameters& parameters, RtTensor& y);
// QuantizeLinear per tensor of float x into y (8-bit, x's shape; y's dtype says which): the
// program the QuantizeLinear kernel runs, so a fused kernel rounds as the op does.
Status QuantizePerTensor(const RtTensor& x, float scale, int32_t zero_point, RtTensor& y);
// DequantizeLinear per tensor of 8-bit q into float y (q's shape), as the op computes it.
Status DequantizePerTensor(const RtTensor& q, float scale, int32_t zero_point, RtTensor& y);

}  // namespace fusionopt::cpu
