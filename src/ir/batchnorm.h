// BatchNormalization in inference form is a per-channel affine map, y = x·s[c] + t[c] with
// s = γ/√(σ² + ε) and t = β − μ·s. fold-batchnorm folds it into the contraction before it,
// merge-summed-contractions into a parallel branch, lower-batchnorm and the CUDA generator write
// it as Mul and Add, and the CPU kernel applies it: this is the one place for its conditions,
// its arithmetic and its Mul/Add form.
//
//   %y = BatchNormalization(%x[N,C,...], %γ, %β, %μ, %σ²)   →   %m = Mul(%x, %s[C,1,...])
//                                                               %y = Add(%m, %t[C,1,...])
//
// Arithmetic is in double from the stored values; written constants are rounded once to x's dtype.
#pragma once

#include <string>
#include <vector>

#include "ir/constant_value.h"
#include "ir/graph.h"
#include "ir/why_not.h"

namespace fusionopt {

struct ChannelAffine {
  std::vector<double> scale;  // one per channel
  std::vector<double> shift;
};

// s and t from statistics of one size each (an internal invariant: callers check the sizes).
// A variance + ε that is not positive gives what the formula gives (inf or NaN).
ChannelAffine BatchNormChannelAffine(const std::vector<double>& gamma, const std::vector<double>& beta,
                                     const std::vector<double>& mean, const std::vector<double>& variance,
                                     double epsilon);

// Why `batchnorm` is not an inference-form BatchNormalization (training mode, spatial=0 before
// opset 9, read statistics outputs, an opset outside 7-28); empty when it is.
WhyNot WhyNotInferenceBatchNorm(const Node& batchnorm, int64_t opset);

// Its map over `channels` from constant statistics read under `rule`, or why there is none (not
// constant, not floating-point [C], variance + ε not positive: folding such a map into weights
// would not give the formula's inf or NaN where it is multiplied by 0).
Decided<ChannelAffine> BatchNormAffine(const Node& batchnorm, int64_t channels, InitializerRule rule);

// The nodes WriteBatchNormAsAffine adds in front of the BatchNormalization; the Add's output is
// a fresh slot the caller gives the BatchNormalization's output to (Graph::TransferProducer)
// before removing it.
struct BatchNormAsAffine {
  Node* mul = nullptr;
  Node* add = nullptr;
};

// Writes `batchnorm` as the Mul and Add above, with s and t as initializers named after it, or
// says why it cannot: WhyNotInferenceBatchNorm, a floating-point input of known rank at least 2
// and known channels, BatchNormAffine.
Decided<BatchNormAsAffine> WriteBatchNormAsAffine(Graph& graph, Node& batchnorm, int64_t opset, InitializerRule rule);

}  // namespace fusionopt
