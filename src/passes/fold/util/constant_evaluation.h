// Evaluating one node at optimize time with the CPU runtime's own kernel for it, so a folded
// constant holds exactly the bits the runtime would have computed at inference time.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::passes {

// Whether the CPU runtime has a kernel for `node` at the model's opset of its domain.
bool RuntimeHasKernel(const Node& node, const Model& model);

// Runs `node` on `inputs` (one per node input; null for an omitted optional input). Returns one
// tensor per node output, null for an omitted output. String tensors are not computed by the
// runtime and are an Unsupported error, as is an op without a kernel; a kernel's own error
// (bad attributes, inputs it rejects) comes back as it is.
Result<std::vector<TensorPtr>> EvaluateNode(const Node& node, const Model& model, const std::vector<TensorPtr>& inputs);

}  // namespace fusionopt::passes
