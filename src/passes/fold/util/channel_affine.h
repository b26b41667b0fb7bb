// Folding a per-output-channel affine map y → y·scale[c] + shift[c] (ir/batchnorm.h's
// ChannelAffine) into the weights and bias of the contraction that computes y: what
// fold-batchnorm and fold-scale-into-conv share.
//
//   Conv(x, W, b)            W: [M, C/g, k...]       W'[m] = W[m]·s[m]     b' = b·s + t
//   ConvTranspose(x, W, b)   W: [C, M/g, k...]       W'[c, j] = W[c, j]·s[(c / (C/g))·(M/g) + j]
//   Gemm(A, B, C) {beta}     B: [K, N] / [N, K]      B'[:, n] = B[:, n]·s[n]   C' = β·C·s + t, beta 1
//   MatMul(A, B), A 2-D      B: [K, N]               Gemm(A, B', t) — or MatMul(A, B') when t = 0
//
// Arithmetic is in double from the stored values, rounded once to the weight's dtype. New
// weights and biases are fresh initializers (a weight may be shared with another node, so it
// is never changed in place); the operands nothing reads afterwards are removed. A splat weight
// (constant_operand.h) scaled alike in every channel stays a splat.
#pragma once

#include <string>
#include <vector>

#include "ir/batchnorm.h"
#include "ir/graph.h"
#include "passes/util/constant_operand.h"

namespace fusionopt::passes {

enum class ContractionKind { kConv, kConvTranspose, kGemm, kMatMul };

// A contraction whose weights can absorb a ChannelAffine over its output's axis 1.
struct AffineTarget {
  Node* node = nullptr;
  ContractionKind kind = ContractionKind::kConv;
  int64_t channels = 0;     // size of the output's axis 1
  int64_t output_rank = 0;
  ConstantOperand weight;
  std::optional<ConstantOperand> bias;  // Conv/ConvTranspose B, Gemm C
  int64_t group = 1;
  bool trans_b = false;
  double beta = 1;
};

// The target `node` is, or why it cannot absorb a per-channel map (a short stable reason).
// MatMul qualifies only when `allow_matmul` (it becomes a Gemm when a shift is folded).
Decided<AffineTarget> AnalyzeAffineTarget(Node& node, const Model& model, bool allow_matmul);

// Default of the folding passes' `max-bytes` option: the largest splat weight a per-channel
// scale may materialise (the same cap fold-constants puts on results that grow the model).
inline constexpr int64_t kDefaultMaterializeBytes = 1 << 20;

// Why folding `affine` into `target` is refused (empty when it is not): a splat weight that a scale differing
// between channels would materialise beyond `max_bytes`.
WhyNot WhyNotFold(const AffineTarget& target, const ChannelAffine& affine, int64_t max_bytes);

// Folds `affine` into `target` so that it (or the Gemm replacing a MatMul) computes `result`,
// the output of the last of `absorbed`: the nodes after the target, in chain order, each
// intermediate read only inside the chain. Returns whether a node was appended out of order
// (the caller sorts the graph before it is used).
bool FoldAffine(Graph& graph, AffineTarget& target, const ChannelAffine& affine, const std::vector<Node*>& absorbed,
                Value& result);

}  // namespace fusionopt::passes
