// The data-movement family of CUDA code generation (DESIGN.md §5, family 4): standard ops
// that move elements without arithmetic, so the unfused original runs on the GPU too.
//
// Handles Transpose, Expand, Tile, Slice (any steps, negative ones included; starts, axes and
// steps folded in when constant, else read at run time by each thread before its loop — the
// output's static shape stands for the ends), Gather (any axis, negative indices; indices int32
// or int64, read at run time), GatherElements and GatherND (batch_dims; indices read at run
// time the same way), Concat, Split (one launch writing every output), Pad (constant, edge, reflect and
// wrap; negative pads crop; pads constant, the pad value constant or read at run time) and
// DepthToSpace (DCR and CRD) / SpaceToDepth. Reshape, Flatten, Squeeze, Unsqueeze and Identity
// are views the backend aliases: they get Unsupported("a view: no kernel").
//
// Kernel: one grid-stride loop over the output's elements (the input's, for Split), the
// coordinates split with the static dims folded in as constants, the source offset an
// expression of them; elements are copied as raw bits of their width, so every dtype with a
// CUDA storage type works. 32-bit index arithmetic unless a tensor needs 64 bits.
//
// Limits (Unsupported with the reason): Pad's pads and axes when not constant; dtypes without a
// storage type (strings); empty outputs. A Gather index out of range, or run-time Slice
// parameters that disagree with the shapes the kernel was built for, cannot fail a kernel: the
// element is written as zero bits (the CPU runtime reports an error instead).
#pragma once

#include <string_view>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

Result<GeneratedProgram> GenerateDataMovement(const Graph& typed_body, std::string_view name);

}  // namespace fusionopt::cuda
