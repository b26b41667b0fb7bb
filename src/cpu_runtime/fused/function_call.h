// Nodes that call model-local functions: every ai.fusionopt node the passes create, and any
// function a user's model defines.
//
// Each call is prepared with the function's body instantiated for it (function_body.h) and
// typed from the call's arguments. The body always runs correctly op by op, through a nested
// GraphExecutor under the function's own opset imports, each body kernel counted as a launch
// (that is not fused, and the count says so). Where the body is a fusion the runtime knows,
// the call instead runs as one fused kernel (fused/body.h): an elementwise program, a
// contraction with its epilogue, or a row kernel — unless PrepareContext::fused_kernels is
// off, or a run's shapes fall outside what that kernel handles.
//
// A function that calls itself, directly or through others, is an error when prepared.
#pragma once

#include <memory>

#include "cpu_runtime/engine/graph_executor.h"

namespace fusionopt::cpu {

Result<std::unique_ptr<SubgraphKernel>> CreateFunctionCallKernel(const Node& node, const Function& function,
                                                                 const PrepareContext& context);

}  // namespace fusionopt::cpu
