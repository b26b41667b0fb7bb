// The contraction family of the plugin: a typed body whose core is one MatMul, Gemm or 2-D
// Conv, optionally followed by an elementwise epilogue (bias, activation, residual, scaling —
// the bodies src/cpu_runtime/fused/contraction.cc accepts), or a plain MatMul / Gemm /
// Conv. MatMul and Gemm run on cuBLASLt (bias / ReLU / tanh-GELU epilogues fused there),
// Conv on cuDNN; whatever epilogue the library cannot fuse runs as one generated elementwise
// kernel over the contraction's output. Everything else is Unsupported with a reason.
#pragma once

#include <memory>

#include "cuda_runtime/plugin/device_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

// OK when BuildContraction would accept `typed_body` (same recognition, same reasons), decided
// without touching the device or compiling anything.
Status ContractionSupported(const Graph& typed_body);

// Builds the kernel for `typed_body`. Constant weights and bias are uploaded once here; in a
// compile-only context the epilogue kernels are generated and compiled and the library plan
// chosen, and the returned kernel's Enqueue fails.
Result<std::unique_ptr<DeviceKernel>> BuildContraction(const Graph& typed_body, DeviceContext& context);

}  // namespace fusionopt::cuda
