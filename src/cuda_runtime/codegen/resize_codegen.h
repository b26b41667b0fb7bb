// The resize family of CUDA code generation: Resize (opset >= 11; nearest, linear, cubic) as one
// generated kernel.
//
// The sampling is what ir/resize_sampling.h defines for every runtime: the node's attributes,
// the geometry from its constant scales or sizes (and roi), and each axis's table of input taps
// and weights, planned on the host for the static shapes. Each resized axis's table is compiled
// into the source as constant arrays; identity axes read their own coordinate.
//
// Kernel: one thread per output element (grid-stride). Nearest gathers the element's bits from
// the tabled source position (every dtype). Linear and cubic sum the taps of every resized axis
// in float (double for double), nested in the order ir's InterpolationOrder gives — the first
// pass innermost — which is the order in which the CPU runtime's separable passes sum and round,
// so the results agree to float rounding; fp16/bf16 round once, at the store. tf_crop_and_resize
// writes the extrapolation value where any axis maps outside the input.
//
// Limits (Unsupported with the reason): scales, sizes or roi computed at run time (the host
// folds them whenever they are constant); linear and cubic on integer dtypes; a nonzero extrapolation value on
// nearest Resize of a dtype other than float; tables
// of more than 65536 entries on one axis. Resize before opset 11 and Upsample are refused by the
// plugin before they reach this generator (their coordinate mapping depends on the opset, which
// a typed body does not carry), and this generator reads attributes with opset-19 semantics.
#pragma once

#include <string_view>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

Result<GeneratedProgram> GenerateResize(const Graph& typed_body, std::string_view name);

}  // namespace fusionopt::cuda
