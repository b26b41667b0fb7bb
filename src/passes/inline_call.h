// A call of a model-local function replaced by its body's nodes, in place: how a later pass
// regroups nodes an earlier fusion already outlined (horizontal fusion merges several fused
// elementwise calls into one).
#pragma once

#include <vector>

#include "ir/graph.h"

namespace fusionopt::passes {

// Copies the body of `function`, instantiated for `call`, into `graph` just before `call`,
// then removes `call`: the call's outputs keep their names and readers and are now produced by
// the copied nodes, which keep their names (the original nodes' names, for a fused body).
// Returns the copied nodes in order; empty, with nothing changed, when the body returns one of
// its inputs directly or one value twice (no node could produce the call's outputs), or holds
// subgraphs.
std::vector<Node*> InlineCall(Graph& graph, Node& call, const Function& function);

}  // namespace fusionopt::passes
