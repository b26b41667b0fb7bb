#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// fuse-horizontal-contractions (O3): contractions that read the same input with constant
// weights become one contraction over the concatenated weights; a Split hands each former
// reader its own columns (DESIGN.md §2, horizontal fusion). One launch and one read of the
// shared input instead of one per contraction, and a wider GEMM that uses the machine better.
inline constexpr std::string_view kFuseHorizontalContractionsRewrite = R"rewrite(
  %q = MatMul(%x, %Wq)  %q1 = Add(%q, %bq)         %m = MatMul(%x, Wq|Wk|Wv)
  %k = MatMul(%x, %Wk)  %k1 = Add(%k, %bk)    →    %a = Add(%m, bq|bk|bv)
  %v = MatMul(%x, %Wv)  %v1 = Add(%v, %bv)         %q1, %k1, %v1 = Split(%a, [Nq, Nk, Nv]) {axis: last}
)rewrite";
// Members: MatMul with a constant 2-D B; Gemm with constant B and C (C absent, [N] or [1, N]);
// Conv with a constant weight and bias and group 1 (Inception's parallel 1×1 convolutions,
// detector heads). Members of one group have the same op, the same attributes, and weights
// that differ only in the output axis; at most `max_members` per group (the rest form further
// groups). Bias C or B missing on some members is filled with zeros. Option `convolutions=0`
// leaves Conv out (what `--runtime ort` asks: ORT's NCHWc layout does not cross the Split).
//
// Epilogues move below the Split while every member continues the same way, so the O2
// epilogue fusion can take the merged contraction, its bias and activation as one kernel:
// a bias Add by a per-channel constant (concatenated like the weights), then a unary
// activation with the same attributes (Relu, LeakyRelu, Sigmoid, Tanh, HardSwish, Clip with
// the same bounds, ...) or SiLU as x · Sigmoid(x) (YOLO's heads: left behind the Split it would
// cost a kernel per member that O2 folds into each unmerged convolution). A member's value read by several nodes or being a graph output ends
// the epilogue there; the Split produces that value under its own name.
//
// MatMul members of which some continue with a bias Add and the others with no epilogue at all
// (Whisper's key projection has no bias) merge too: the others' columns add zeros, and no
// further step moves below the Split. A member whose value goes on to an elementwise op the
// others do not share would lose that epilogue fusion: it is left out, reported, and the rest
// merge without it (Phi's fc1 and its GELU beside Q, K and V on one LayerNorm).
//
// Legality: members read only the shared input and constants, so no path can join two of them
// and merging never creates a cycle; contractions and the sunk ops are pure. At O3 the cost
// model decides (PassContext::JudgeFusion over the members and their moved epilogues, the
// Split counted as free — a view or read in place by the attention node). Limits: Conv with
// groups, kernels of different sizes (zero-padding the smaller would be exact but is not
// done), non-constant weights, and MatMuls whose shared operand is B are left alone.
class FuseHorizontalContractions : public Pass {
 public:
  std::string_view rewrite() const override { return kFuseHorizontalContractionsRewrite; }
  std::string_view name() const override { return "fuse-horizontal-contractions"; }
  std::string_view summary() const override {
    return "merge MatMul/Gemm/Conv that read the same input with constant weights into one contraction + Split";
  }
  std::vector<PassOptionInfo> options() const override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
