// The row-kernel family of CUDA code generation (DESIGN.md §5, family 2): reductions along the
// last axis, one row at a time.
//
// Handles
// - LayerNorm and RMSNorm — the composites of patterns/composite/composite.h and the LayerNormalization /
//   RMSNormalization ops — with the optional residual prologue x = a + b (its sum written as a
//   second output when the body returns it), gamma and beta, each operand broadcast per row;
// - Softmax over the last axis with the composite's scale (x·c or x/c) and an additive mask or
//   a Where mask (fill where the condition selects it);
// - ReduceMean / ReduceSum / ReduceMax / ReduceMin over a trailing run of axes (the last axis,
//   or several ending with it, or all), keepdims either way, axes as attribute or constant input.
//
// Kernel shape: a row of n elements is spread over T threads (T the smallest power of two from
// 32 to 1024 with T·8 >= n) and held in registers, ceil(n/T) values per thread, so the row is
// read from global memory once however many passes the statistics take. When T is 32 a warp
// owns a row and a CTA runs 4 rows: short rows (attention's softmax, small norms) then need no
// shared memory and no __syncthreads, and each CTA still has 128 threads. Longer rows take one
// CTA each; reductions are warp shuffles, then one value per warp through shared memory.
//
// Numerics follow the CPU runtime (cpu_runtime/fused/rows.cc): fp32 accumulation for
// fp32, fp16 and bf16 storage; values rounded to the storage type where the body stores an
// intermediate (the residual sum, the scaled and the masked logits, the scale and fill
// constants); LayerNorm's variance as the mean of squared deviations from the mean (two passes
// over the registers); max-subtracted softmax. A softmax row whose logits are all -inf gives
// NaN, as the CPU runtime does (0/0); a row with one finite logit is finite.
//
// Limits (Unsupported with the reason): rows longer than 32768 elements; dtypes other than
// float, float16 and bfloat16; any axis but the last (norms, softmax) or a non-trailing
// reduction; LayerNormalization's optional Mean/InvStdDev outputs; empty tensors; GELU and
// SiLU bodies (the elementwise family's).
#pragma once

#include <string_view>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

inline constexpr int64_t kMaxRowElements = 32768;

Result<GeneratedProgram> GenerateRows(const Graph& typed_body, std::string_view name);

}  // namespace fusionopt::cuda
