// Which elementwise nodes the CPU elementwise engine can evaluate inside a fused body: a fused
// group must hold only those, or the fused kernel could not be compiled and would fall back to
// running the body op by op — a fusion that costs instead of saving.
//
// The engine answers for itself: the runtime's registry must have a kernel for the op at the
// model's opset, and the op's expression (cpu::ElementwiseExpr, the one mapping the single-op
// kernels and the fused programs share) must build for the node's operand types. Legacy op
// versions (opset < 7: broadcasting along an `axis`) never qualify.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "ir/why_not.h"

namespace fusionopt::passes {

// Why the engine cannot evaluate `node` (an elementwise op of the default domain) under the
// model's default-domain `opset`, as a short stable reason; empty when it can.
WhyNot WhyEngineCannotEvaluate(const Node& node, int64_t opset);

}  // namespace fusionopt::passes
