// The attention family of CUDA code generation: the fused attention body of
// patterns/attention/attention.h — Softmax(Q·Kᵀ·scale + mask)·V with the optional head split and merge
// and combined-projection Split — as one tiled online-softmax (FlashAttention-style) kernel.
//
// Two kernels, chosen by the target: for fp16 and bf16 on sm_80 and newer, the tensor-core kernel
// of attention_mma_kernel.cc (mma.sync m16n8k16, fp32 accumulators, 64 queries per CTA; head
// sizes padded with zeros to 16 for Q·K and 8 for V); otherwise the scalar fp32 kernel below. Both read the operands through attention_kernel_plan.h.
//
// Scalar kernel: one CTA of 4 warps per (batch·head, block of 16 queries). Q's block is staged in
// shared memory once; K and V pass through shared memory 32 keys at a time. Each warp owns 4
// query rows and keeps, per row, the running maximum, the running sum and the output row
// (head_dim / 32 values per lane) in registers: a lane scores one key of the tile, the warp
// takes the tile's maximum and sum with shuffles, rescales its accumulators and adds P·V. The
// Sq×Sk score matrix exists only as one 32-wide slice in registers; nothing but the output is
// written to global memory. Q, K and V are read where they lie (a [B,S,H·D] tensor, a column
// slice of a combined [B,S,3·H·D] projection, [B,H,S,D], or K as [B,H,D,S]); the output is
// [B,Sq,H·Dv] with the head merge, else [B,H,Sq,Dv]. Any sequence lengths (tails masked).
//
// Numerics (scalar kernel): fp32 math for fp32, fp16 and bf16 storage; scale and mask applied as the body
// does (x·c or x/c, then + mask or Where); a row whose scores are all -inf gives NaN, as the
// CPU runtime's fused kernel does. fp16/bf16 scores are not rounded to the storage type
// between the body's ops (the CPU runs such bodies op by op), so fp16 results are closer to
// exact than the op-by-op reference.
//
// Limits (Unsupported with the reason): head_dim above 128 (Q·K's or V's); dtypes other than
// float, float16 and bfloat16; a mask held as a Constant node; a combined Split that is not along
// the last axis; operand layouts whose dims disagree.
#pragma once

#include <string_view>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

inline constexpr int64_t kMaxAttentionHeadDim = 128;

Result<GeneratedProgram> GenerateAttention(const Graph& typed_body, std::string_view name,
                                           const CodegenTarget& target = {});

}  // namespace fusionopt::cuda
