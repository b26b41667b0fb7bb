// The typed body a CUDA code generator works on (generated_kernel.h): a graph with one input
// per node input and one output per node output, every value of known dtype and static shape.
// For an ai.fusionopt node it is the called function's body instantiated for the call; for a
// standard op, a graph holding a copy of that one node.
#pragma once

#include <memory>

#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt::cuda {

// A typed body carries no opset: its ops are read in their modern sense (TypedBodyOf writes
// Softmax's legacy axis out, for one), as of this opset.
inline constexpr int64_t kTypedBodyOpset = 17;

// `node` (in `model`'s main graph, or any graph whose values are typed) as a typed body.
// Arguments that are constants become initializers of the body (the body's input stays, so
// inputs still match the node's one to one: a constant's device pointer is passed but need not
// be read). An omitted optional input is an input of undefined type. Unsupported when the
// node calls a function the model lacks, or a value ends up without a static shape or dtype
// (the reason names it).
Result<std::unique_ptr<Graph>> TypedBodyOf(const Model& model, const Node& node);

// OK when every input, output and intermediate of `body` has a known dtype and static
// shape; else Unsupported naming the first value that has not.
Status CheckFullyTyped(const Graph& body);

}  // namespace fusionopt::cuda
