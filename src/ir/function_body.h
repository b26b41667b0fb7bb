// A model-local function's body instantiated for one call: what shape inference and the
// runtimes work on for each node that calls a function (a function is shared by every call,
// and each call may bring other types, attributes and omitted inputs).
#pragma once

#include <memory>

#include "ir/graph.h"

namespace fusionopt {

// Copies `function`'s body for `call`: same names, types, nodes and subgraphs. An attribute
// that refers to a formal attribute takes the call's value, or is left out when the call
// gives none (the op's default then applies, as for any missing attribute).
//
// With `drop_omitted_inputs`, a formal input the call leaves out (an empty or missing
// argument) is not an input of the copy, and the body's nodes read it as an omitted input —
// ONNX's meaning of an optional argument a caller does not pass.
std::unique_ptr<Graph> InstantiateFunctionBody(const Function& function, const Node& call,
                                               bool drop_omitted_inputs = false);

// A copy of a graph that reads no enclosing scope (a main graph): same names, types, nodes and
// subgraphs; initializers share their tensors. What a caller infers or rewrites on the copy
// leaves the original alone.
std::unique_ptr<Graph> CopyGraph(const Graph& graph);

// A copy of a whole model: its main graph and its functions copied as CopyGraph does, the rest as
// it is. For a caller that rewrites or re-infers a model on the side (the ORT lowering's trial
// sizes) while the original stays as it was.
std::unique_ptr<Model> CopyModel(const Model& model);

}  // namespace fusionopt
