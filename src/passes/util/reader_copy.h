// One reader's own copy of a node: what a fusion takes into its group where the original stays
// for the other readers (a DequantizeLinear that a quantized unit, or an elementwise program,
// computes again itself — onnxruntime's EnsureUniqueDQForNodeUnit makes the same copies).
#pragma once

#include "ir/graph.h"

namespace fusionopt::passes {

// A copy of `node` (one output; the same inputs and attributes, a fresh output value of the
// same type), placed right before `reader`, whose every read of `node`'s output now reads the
// copy's. The original keeps its other readers.
Node* CopyForReader(Graph& graph, const Node& node, Node& reader);

}  // namespace fusionopt::passes
