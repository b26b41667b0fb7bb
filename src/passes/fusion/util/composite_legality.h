// What fuse-composites checks on a typed graph beyond the structural match (patterns/composite/composite.h):
// dtypes, ranks and the normalized axis, the broadcast of gamma/beta and of a softmax mask,
// opset versions. A check may shrink the match (drop a residual prologue that is really a bias
// or broadcast add, drop an affine tail that broadcasts over more than the row) instead of
// refusing it.
#pragma once

#include <string>

#include "patterns/composite/composite.h"
#include "passes/pass.h"

namespace fusionopt::passes {

// Why `match` cannot become one fused kernel (empty when it can), after shrinking it where that
// makes it legal. Shrinking the affine tail of a norm is recorded in `context` as a rejection
// of the tail, naming `anchor`.
WhyNot MakeFusable(CompositeMatch& match, int64_t opset, const Node& anchor, PassContext& context);

}  // namespace fusionopt::passes
