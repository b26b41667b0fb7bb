// The rotary family of CUDA code generation: RotaryEmbedding (opset 23) as one generated kernel.
//
// X is [B,H,S,D], or [B,S,H·D] with num_heads; cos_cache and sin_cache are [B,S,R/2] or
// [1,S,R/2] (broadcast over the batch), R = rotary_embedding_dim or D. Feature j < R/2 pairs with
// j + R/2 (rotate-half) or, interleaved, 2i with 2i+1: y = x·cos − partner·sin for the first of a
// pair, partner·sin + x·cos for the second; features from R on are copied.
//
// Kernel: one thread per output element (grid-stride), reading its pair partner and its cache
// entries; computed in float, stored in the storage type, as the CPU runtime does
// (cpu_runtime/attention/kernels.cc).
//
// Limits (Unsupported with the reason): position_ids (as the CPU runtime); dtypes other than
// float, float16 and bfloat16; caches whose dims do not fit X.
#pragma once

#include <string_view>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

Result<GeneratedProgram> GenerateRotary(const Graph& typed_body, std::string_view name);

}  // namespace fusionopt::cuda
