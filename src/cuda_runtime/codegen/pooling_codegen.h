// The pooling family of CUDA code generation (DESIGN.md §5, family 5): MaxPool and
// AveragePool over 2-D windows, GlobalMaxPool and GlobalAveragePool.
//
// Windowed pools: one thread per output element in a grid-stride loop; kernel size, strides,
// dilations and begin pads are compile-time constants, so the window loops unroll. auto_pad
// (VALID, SAME_UPPER, SAME_LOWER) resolves to pads at generation; ceil_mode needs nothing
// beyond the output shape the typed body already has, because taps past the input are skipped
// as padding taps are. AveragePool divides by the taps inside the input, or with
// count_include_pad by the taps inside the padded extent (not the whole kernel when a
// ceil_mode window runs past the end padding) — the CPU runtime's rule. A MaxPool window that
// lies wholly in the padding gives the dtype's lowest finite value, as on the CPU.
//
// Global pools: one warp per (n, c) plane, 8 planes per 256-thread CTA, lanes striding over the
// plane and a shuffle reduction.
//
// Numerics: fp32 math for fp32, fp16 and bf16 storage (the CPU sums averages in double).
//
// Limits (Unsupported with the reason): windows of other than 2 spatial dims (global pools take
// any), MaxPool's Indices output, LpPool, dtypes other than float, float16 and bfloat16.
#pragma once

#include <string_view>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

Result<GeneratedProgram> GeneratePooling(const Graph& typed_body, std::string_view name);

}  // namespace fusionopt::cuda
