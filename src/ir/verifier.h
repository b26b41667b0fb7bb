// The IR's structural invariants, checked as a whole: what every pass must preserve.
//
// VerifyModel checks, for the main graph, every subgraph and every function body: node and
// value ownership; use lists and producer links agree with node inputs and outputs in both
// directions; nodes are in topological order (every input is a graph input, an initializer,
// produced by an earlier node, or a value of an enclosing graph); graph outputs are defined;
// every node's domain has an opset import; every ai.fusionopt node calls an existing
// model-local function with no more arguments and results than it declares. The pass
// pipeline runs it after each pass that changed the model (debug builds, --check-each-pass)
// and names the pass that broke it.
#pragma once

#include "ir/graph.h"
#include "ir/status.h"

namespace fusionopt {

// Ok, or an Internal error describing the first broken invariant.
Status VerifyModel(const Model& model);

}  // namespace fusionopt
