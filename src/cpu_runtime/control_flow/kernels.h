// Control flow on the CPU: If, Loop and Scan of the default domain (opsets 7-25), over tensors.
//
// Each body is prepared once, with its node, as a GraphExecutor; at run time the kernel binds
// the outer-scope values the body reads (its implicit inputs) and executes the body per branch
// taken or iteration. Sequence, map and optional values are Unsupported, naming the node.
#pragma once

#include <cstdint>
#include <memory>

#include "cpu_runtime/engine/graph_executor.h"

namespace fusionopt::cpu {

// The kernel of a node that holds subgraphs; Unsupported for ops other than If, Loop, Scan.
Result<std::unique_ptr<SubgraphKernel>> CreateControlFlowKernel(const Node& node, int64_t opset,
                                                                const PrepareContext& context);

}  // namespace fusionopt::cpu
