// LRN (local response normalization across channels) as a generated kernel:
//
//   y[n,c,s] = x[n,c,s] / (bias + alpha / size · Σ x[n,i,s]²)^beta,
//   i from max(0, c − ⌊(size−1)/2⌋) to min(C−1, c + ⌈(size−1)/2⌉)     (s: the spatial position)
//
// One thread per output element over a grid-stride loop; the window is read straight from
// global memory (size is a handful of channels, and neighbouring threads share the reads in
// cache). float, float16 and bfloat16, computed in float. Limits: a single standard LRN node of
// rank ≥ 3.
#pragma once

#include <string_view>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

Result<GeneratedProgram> GenerateLrn(const Graph& typed_body, std::string_view name);

}  // namespace fusionopt::cuda
