// Inference BatchNormalization for the CUDA generators, rewritten into what the elementwise
// generator already handles: y = Add(Mul(x, s), t), s and t initializers of shape [C, 1, …, 1]
// (ir/batchnorm.h, the form and arithmetic lower-batchnorm and fold-batchnorm use too), so the
// kernel does one multiply-add per element.
// Limits: a BatchNormalization ir/batchnorm.h declines (training mode, a statistics output
// that is read, non-constant statistics) leaves the body unchanged; the generator then refuses
// it with its own reason.
#pragma once

#include <memory>

#include "ir/graph.h"

namespace fusionopt::cuda {

// A copy of `body` with every BatchNormalization that qualifies rewritten; null when none does.
std::unique_ptr<Graph> LowerBatchNormalization(const Graph& body);

}  // namespace fusionopt::cuda
