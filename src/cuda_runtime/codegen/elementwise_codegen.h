// The elementwise family of CUDA code generation (DESIGN.md §5, family 1): one generated
// kernel for any typed body whose nodes are all elementwise ops — a single standard op (the
// unfused baseline) or a fused body from the passes, with one or several outputs and numpy
// broadcasting. Same ops and the same numerics as the CPU runtime's elementwise engine
// (cpu_runtime/elementwise/ops.cc), so CUDA results compare with CPU results within verify's
// tolerances.
//
// What the generated kernel does:
// - one grid-stride loop over the output's elements (every output has the same shape); each
//   operand's broadcast is folded at generation into a fixed index expression (operands of
//   the full shape index directly, scalars read element 0);
// - a vector loop moves 16 bytes of the widest full-shape operand or output per access (float4,
//   8 halves, 2 int64; narrower tensors of the same body move proportionally less), entered
//   after a run-time alignment check of those pointers — cudaMalloc's are aligned, a view at an
//   offset may not be — with the scalar loop taking the tail and unaligned calls;
// - fp16/bf16 are stored as themselves and computed in fp32, every intermediate rounded to its
//   ONNX dtype as the CPU engine rounds it; 32-bit indexing unless the element count needs
//   64 bits; no fast-math intrinsics;
// - scalar initializers and scalar Constant nodes are compiled in as exact literals; larger
//   initializers are read through pointers (GeneratedProgram::constant_inputs).
//
// Limits (each an Unsupported naming the cause): ops outside the engine's list (by name), ops
// of other domains, dtypes without a CUDA storage type, outputs of different shapes, shapes
// that do not broadcast to the output's, non-scalar Constant nodes. Two opset-dependent
// defaults are taken at their modern values because a typed body carries no opset: Clip
// without bounds is a copy (opset < 11 clamped to ±FLT_MAX), and Selu's defaults are opset 6's.
// Outputs must not overlap inputs (input pointers are declared __restrict__).
#pragma once

#include <string_view>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

// Threads per block of every elementwise kernel.
inline constexpr uint32_t kElementwiseBlockThreads = 256;
// Most blocks one elementwise launch uses: 8 resident 256-thread blocks per SM on 132 SMs
// (H100/H200) is 1056 blocks per wave, so 8192 blocks is ~8 waves — enough to fill any current
// GPU — while the grid-stride loop gives each thread of a huge tensor several elements, which
// amortizes the per-thread index setup.
inline constexpr uint32_t kElementwiseMaxBlocks = 8192;

// The elementwise kernel for `typed_body` (typed_body.h), its entry named after `name` (made a
// valid C identifier). Unsupported with the reason when the body is outside this family.
Result<GeneratedProgram> GenerateElementwise(const Graph& typed_body, std::string_view name);

// `name` as a C identifier: other characters become '_', a leading digit gets a prefix.
std::string CIdentifier(std::string_view name);

}  // namespace fusionopt::cuda
