// Which standard ops provably do nothing, decided from constants and known shapes only: the
// rule table behind eliminate-no-ops (eliminate_no_ops.h lists the rules with examples).
#pragma once

#include "ir/graph.h"

namespace fusionopt::passes {

// Whether `node` (a node of the default ONNX domain) certainly writes its input 0 unchanged
// to its output 0. Whether the node's other outputs are read is the caller's question.
bool PassesInputThrough(const Node& node, const Model& model);

}  // namespace fusionopt::passes
