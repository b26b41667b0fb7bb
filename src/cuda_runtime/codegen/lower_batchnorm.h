// Inference BatchNormalization for the CUDA generators, rewritten into what the elementwise
// generator already handles:
//
//   y = BatchNormalization(x, scale, bias, mean, var)      (scale, bias, mean, var constant [C])
//     → y = Add(Mul(x, a), b),   a = scale / sqrt(var + epsilon),  b = bias - mean · a,
//                                a and b initializers of shape [C, 1, …, 1] (x's rank - 1 dims)
//
// a and b are computed in double and stored in x's dtype, so the kernel does one multiply-add
// per element (the same arithmetic fold-batchnorm does at O1 when the BN follows a Conv).
// Limits: training mode, a second or third output that is read, or non-constant parameters
// leave the body unchanged (the generator then refuses it with its own reason).
#pragma once

#include <memory>

#include "ir/graph.h"

namespace fusionopt::cuda {

// A copy of `body` with every BatchNormalization that qualifies rewritten; null when none does.
std::unique_ptr<Graph> LowerBatchNormalization(const Graph& body);

}  // namespace fusionopt::cuda
