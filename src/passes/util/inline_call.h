// A call of a model-local function replaced by its body's nodes, in place: how a later pass
// regroups nodes an earlier fusion already outlined (horizontal fusion merges several fused
// elementwise calls into one).
#pragma once

#include <vector>

#include "ir/graph.h"

namespace fusionopt::passes {

struct InlinedCall {
  std::vector<Node*> members;    // the body's own ops, named as the call's fused_nodes list them
  std::vector<Node*> constants;  // scalar Constants the outliner had copied into the body
  bool done() const { return !members.empty(); }
};

// Copies the body of `function`, instantiated for `call` (an ai.fusionopt call OutlineGroup
// made), into `graph` just before `call`, then removes `call`: the call's outputs keep their
// names and readers and are now produced by the copied nodes. The body's ops take back the
// original nodes' names from the call's fused_nodes attribute; the copied constants get fresh
// names. Nothing changes (an empty result) when the body returns one of its inputs directly
// or one value twice (no node could produce the call's outputs), holds subgraphs, or its ops
// do not match the fused_nodes names one for one.
InlinedCall InlineCall(Graph& graph, Node& call, const Function& function);

}  // namespace fusionopt::passes
