// One entry to every CUDA code generator: a typed body (typed_body.h) in, a GeneratedProgram
// (generated_kernel.h) out. Contractions are not generated — the plugin runs them on
// cuBLASLt / cuDNN — so a body with a MatMul, Gemm or Conv is Unsupported here, as is
// anything no family handles; the reason says which family declined and why. Inference
// BatchNormalization reaches the generators only after LowerBatchNormalization
// (lower_batchnorm.h) — the program's constants are then initializers of the lowered body, which
// is the body the caller must build the kernel from.
#pragma once

#include <string_view>

#include "cuda_runtime/codegen/generated_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

// Families are tried in order — attention, row kernels (normalizations, softmax,
// reductions), elementwise, data movement, lines (CumSum, softmax along a strided axis), resize,
// rotary embedding, pooling, LRN — and the first that accepts the body generates it. `name`
// labels the program (files, messages); it is made a valid C identifier. `target` picks between a
// family's kernels (generated_kernel.h's CodegenTarget); every target gets a kernel for the same bodies.
Result<GeneratedProgram> GenerateKernel(const Graph& typed_body, std::string_view name,
                                        const CodegenTarget& target = {});

}  // namespace fusionopt::cuda
