// The constant a value holds at compile time, if any: an initializer's tensor or a Constant
// node's value (whichever attribute spells it). Shape inference, the runtimes and the passes
// all ask this question; this is the one answer.
#pragma once

#include "ir/graph.h"

namespace fusionopt {

// A Constant node's value; null for other nodes and for sparse_value.
TensorPtr ConstantNodeValue(const Node& node);

// Initializers that are also graph inputs can be overridden by a caller from IR version 4
// on (onnxruntime's rule); pass `initializers_overridable` accordingly.
TensorPtr ConstantValueOf(const Value& value, bool initializers_overridable);

}  // namespace fusionopt
