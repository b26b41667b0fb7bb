// The lines family of CUDA code generation: single standard ops that run along one axis of a
// tensor whose elements along that axis are not contiguous (or not independent), so neither the
// row family (contiguous last-axis rows) nor the elementwise family fits.
//
// Handles
// - CumSum along any axis (exclusive, reverse; the axis a constant input), every numeric dtype;
// - Softmax and LogSoftmax along an axis that is not the last (opset >= 13: that axis alone;
//   the plugin rewrites older opsets' flattened-block form into a row first, node_request.cc),
//   float, float16 and bfloat16.
//
// Kernel: a tensor seen as [outer, n, inner] around the axis; one thread per line (outer·inner
// threads in a grid-stride loop), walking its n elements at stride `inner`. Neighbouring threads
// take neighbouring inner positions, so each step of the walk is one coalesced load across a
// warp. Lines are short where this runs (YOLO's 16-bin distribution softmax, position ids), so
// the serial walk costs less than a block-wide scan would.
//
// Numerics follow the CPU runtime (cpu_runtime/data_movement/scan.cc, reduction/softmax.cc):
// sums in float for fp16/bf16 and in the storage type otherwise, rounded to the storage type once
// per element; softmax max-subtracted with expf and the sum in float; an all -inf line gives NaN.
//
// Limits (Unsupported with the reason): a CumSum axis computed at run time; Softmax on other
// dtypes; empty tensors.
#pragma once

#include <string_view>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

Result<GeneratedProgram> GenerateLines(const Graph& typed_body, std::string_view name);

}  // namespace fusionopt::cuda
