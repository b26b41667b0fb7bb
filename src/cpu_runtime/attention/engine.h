// The attention engine of the CPU runtime: Softmax(Q·Kᵀ·scale + mask)·V for every (batch,
// head), tiled with an online softmax so the Sq×Sk score matrix never exists. Two kernels
// describe their work to it: the fused attention body (fused/attention.cc, an
// outlined pattern of patterns/attention/attention.h) and the standard Attention op (opset 23,
// kernels_attention_op.cc).
//
// What a problem may hold, each read where it lies in memory through strides:
//   Q [B,H,Sq,D], K [B,Hkv,Sk,D] (or stored [B,Hkv,D,Sk]), V [B,Hkv,Sk,Dv] — float32, float16 or bfloat16;
//   grouped-query heads (Hkv divides H; query head h reads key/value head h / (H / Hkv));
//   rotary position embedding applied to Q and K as they are loaded;
//   the scale (a product in the GEMM, or a division of each score), a softcap (c·tanh(s / c));
//   an additive score bias (ALiBi) added before the mask, broadcast to [B,H,Sq,Sk];
//   an additive mask (float32, float16 or bfloat16) or a boolean one selecting a fill, broadcast to
//   [B,H,Sq,Sk]; a causal mask (key j > query i is excluded);
//   what a row without a finite softmax gives: NaN as plain Softmax does, 0 where the graph
//   guards it (Where(IsNaN(p), 0, p)), or 0 for a row of -inf scores (Attention-23).
// Accumulation is float32 whatever the storage (16-bit operands are converted per tile).
#pragma once

#include <cstdint>
#include <optional>

#include "ir/dtype.h"
#include "ir/status.h"

namespace fusionopt::cpu::attention {

// The element types the engine reads and writes (computing in float32): float32, float16 and
// bfloat16.
inline bool IsAttentionFloat(DataType dtype) {
  return dtype == DataType::kFloat || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

// One operand as a matrix per (batch, head): rows are sequence positions, columns features
// (stored [columns, rows] when `transposed`: K as [B,H,D,S]).
struct Operand {
  const void* base = nullptr;
  DataType dtype = DataType::kFloat;  // IsAttentionFloat
  int64_t batch = 0, heads = 0, rows = 0, columns = 0;
  int64_t batch_stride = 0, head_stride = 0, ld = 0;  // elements
  bool transposed = false;
};

// x' = x·cos + rotate(x)·sin over the first `dims` features, where rotate pairs feature j with
// j + dims/2 (rotate_half: [-x₂, x₁]) or, interleaved, 2i with 2i+1. The tables are float32,
// indexed [b, s, j]: `full_width` tables hold `dims` columns (the Hugging Face cat(freqs,
// freqs) form), else dims/2 (RotaryEmbedding-23's caches).
struct Rotary {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t batch_stride = 0, row_stride = 0;  // elements; batch_stride 0 broadcasts
  int64_t dims = 0;
  bool interleaved = false;
  bool full_width = true;
};

enum class MaskKind { kNone, kAdditive, kBoolean };

struct Mask {
  MaskKind kind = MaskKind::kNone;
  const void* data = nullptr;
  DataType dtype = DataType::kFloat;  // additive: IsAttentionFloat; boolean: kBool
  int64_t strides[4] = {0, 0, 0, 0};  // elements, over [B,H,Sq,Sk]; 0 broadcasts
  float fill = 0;                     // boolean: the score where the condition selects it
  bool fill_when_true = false;
};

enum class EmptyRows {
  kNaN,            // a row whose softmax is undefined gives NaN, as op by op
  kZeroWhereNaN,   // ... gives 0: the graph guards the softmax with Where(IsNaN(p), 0, p)
  kZeroIfUndefined,  // a row of -inf scores (every key masked) gives 0; NaN stays (Attention-23)
};

struct Problem {
  Operand q, k, v;
  int64_t batch = 0, heads = 0, queries = 0, keys = 0, depth = 0, value_depth = 0;
  float alpha = 1.0f;             // the scores' scale, applied by the GEMM
  std::optional<float> divisor;   // else each score divided by it (a non-power-of-two divisor)
  float softcap = 0;              // > 0: s = softcap·tanh(s / softcap), before the mask
  Mask bias;                      // kNone or kAdditive: added before the mask
  Mask mask;
  bool causal = false;
  EmptyRows empty_rows = EmptyRows::kNaN;
  std::optional<Rotary> q_rotary, k_rotary;
  void* out = nullptr;
  DataType out_dtype = DataType::kFloat;
  int64_t out_batch_stride = 0, out_head_stride = 0, out_ld = 0;
};

// The problem's shapes agree: K and V heads divide Q's, K's and V's rows agree, depths match
// Q's and the output's. Invariants the describing kernels established; checked here too.
bool Consistent(const Problem& problem);

Status Run(const Problem& problem);

// RotaryEmbedding on its own: every row of `in`'s matrices rotated into `out`'s (same dims).
void RotateRows(const Operand& in, const Rotary& rotary, const Operand& out);

}  // namespace fusionopt::cpu::attention
