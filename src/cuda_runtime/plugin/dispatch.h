// Which builder gets a node. Views (Reshape, Flatten, Squeeze, Unsqueeze, Identity, inference
// Dropout) are refused: the host aliases the input and never asks for them. A typed body
// whose core is exactly one contraction (MatMul, Gemm, Conv of the default domain — the
// bodies the CPU runtime's fused/contraction.cc takes) goes to the contraction family
// (contraction.h: cuBLASLt / cuDNN); everything else — elementwise chains, row kernels,
// attention (two MatMuls), data movement, pooling — to the code generators (generate.h),
// built by DeviceContext::BuildGenerated. A family's Unsupported reason is passed on.
#pragma once

#include <memory>
#include <string_view>

#include "cuda_runtime/plugin/device_kernel.h"
#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

// Unsupported("a view: the host aliases the input") for a view op; OK otherwise.
Status RejectView(const Node& node);

// OK when BuildKernel would build `typed_body`: the same decision, made without compiling or
// touching a device (the generators run; they are pure).
Status CheckKernelSupported(const Graph& typed_body, std::string_view name);

Result<std::unique_ptr<DeviceKernel>> BuildKernel(const Graph& typed_body, std::string_view name,
                                                  DeviceContext& context);

}  // namespace fusionopt::cuda
