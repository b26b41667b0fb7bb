// Where a recognised attention body (attention.h's FusedAttention) reads Q, K and V and writes
// its result, for the sizes of one run: the one derivation of operand addressing that every
// runtime uses — the CPU runtime's fused kernel (cpu_runtime/fused/attention.cc) at each run, the
// CUDA generator (cuda_runtime/codegen/attention_codegen.cc) for the static shapes it builds for.
//
// It evaluates what the body's layout ops would compute — the combined projection's Split, every
// Reshape and Expand target (constants, dims of other values, values read from inputs), the head
// split and merge transposes, a view chain (Transpose, Reshape, Squeeze, Unsqueeze, Gather of a
// packed projection), the grouped-query repeat — and composes them into strided addressing of
// the source tensor: element (b, h, s, d) of an operand's heads-first [B,H,S,D] value lies at
//
//     offset + b·batch_stride + (h / group)·head_stride + s·row_stride + d·column_stride
//
// in its body input (the combined projection for a Split output), with `group` query heads per
// head of a repeated K or V. K is always described as [B,H,Sk,D] (a [B,H,D,Sk] source has its
// strides swapped). Rotary tables, the mask and the output are addressed the same way.
//
// Returns nullopt where the body's ops would fail for these sizes, or where the layout is no
// strided view of its source (a Reshape merging dims that are not contiguous): a runtime then
// runs the body op by op. Dtypes are the runtime's to check.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "patterns/attention/attention.h"

namespace fusionopt {

// What a runtime knows of the body's inputs this run: each input's dims (nullopt when absent),
// and the values of a small int64 input (Reshape targets, Split sizes; nullopt when unknown —
// the CUDA generator knows only constants).
struct AttentionInputs {
  std::function<std::optional<std::vector<int64_t>>(int input)> dims;
  std::function<std::optional<std::vector<int64_t>>(int input)> values;
};

struct OperandLayout {
  int input = -1;  // the body input read
  int64_t offset = 0;  // elements
  int64_t batch = 0, heads = 0, rows = 0, columns = 0;  // [B, own heads, S, D]
  int64_t batch_stride = 0, head_stride = 0, row_stride = 0, column_stride = 0;
  int64_t group = 1;  // query heads per head (a repeated K or V)
};

// x' = x·cos − partner·sin for the first feature of a pair, partner·sin + x·cos for the second
// (pairs: j and j + R/2, or 2i and 2i+1 interleaved, over the first R = `dims` features; the
// rest pass through), with the tables' entry for (b, s, column):
// b·batch_stride + s·row_stride + column, column = the feature (full-width tables, Hugging
// Face's cat(freqs, freqs)) or its pair index (RotaryEmbedding-23's [B,S,D/2] caches).
struct RotaryLayout {
  int cos = -1, sin = -1;  // body inputs
  int64_t batch_stride = 0, row_stride = 0;  // elements; batch_stride 0 broadcasts
  bool full_width = true;
  bool interleaved = false;
  int64_t dims = 0;  // the features turned, a prefix of each head (all of them unless partial)
};

struct AttentionLayout {
  OperandLayout q, k, v;
  std::optional<RotaryLayout> q_rotary, k_rotary;
  int64_t batch = 0, heads = 0, queries = 0, keys = 0, depth = 0, value_depth = 0;
  // The mask's element strides over [B,H,Sq,Sk] (0 broadcasts), when the body has one.
  std::optional<std::array<int64_t, 4>> mask_strides;
  // The score bias's element strides over [B,H,Sq,Sk] likewise, when the body has one.
  std::optional<std::array<int64_t, 4>> bias_strides;
  // The result: its dims, and element (b, h, query, d) at b·batch + h·head + query·row + d.
  std::vector<int64_t> output_dims;
  int64_t output_batch_stride = 0, output_head_stride = 0, output_row_stride = 0;
};

std::optional<AttentionLayout> LayOutAttention(const FusedAttention& attention, const AttentionInputs& inputs);

}  // namespace fusionopt
