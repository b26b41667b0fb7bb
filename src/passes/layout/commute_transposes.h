#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// commute-transposes (O1): a Transpose that keeps the last axis in place commutes with the ops
// that act on that axis alone — MatMul by a constant matrix, Gemm, a bias Add — so it moves
// across them toward the layout ops on their other side, where merge-reshapes composes it with
// them and attention absorbs the lot as a strided read. torchvision's batch-first
// nn.MultiheadAttention as the dynamo exporter writes it:
inline constexpr std::string_view kCommuteTransposesRewrite = R"rewrite(
  %t = Transpose(%x[B,S,E]) {perm: [1,0,2]}       %p = MatMul(%x, %W_in)
  %p = MatMul(%t, %W_in[E,3E])               →     %q = Add(%p, %b_in)
  %q = Add(%p, %b_in)                              %t = Transpose(%q) {perm: [1,0,2]}
  (head split: Reshape, Transpose, Gather...)      (head split)
)rewrite";
//   %a = (head merge)[S·B,E]                          %a3 = Reshape(%a, [S,-1,E])
//   %o = Gemm(%a, %W_out, %b_out) {transB: 1}  →      %at = Transpose(%a3) {perm: [1,0,2]}
//   %r = Reshape(%o, [S,B,E])                         %m = MatMul(%at, %W_outᵀ)
//   %y = Transpose(%r) {perm: [1,0,2]}                %y = Add(%m, %b_out)
//
// Sinking: the Transpose is read by the MatMul (constant rank-2 right operand) and by Shape ops
// at most — each Shape becomes a Gather of the input's shape by the perm — and the MatMul, or
// the bias Add (a constant that broadcasts along the last axis only) that alone reads it, is
// read by layout ops only (and Shape ops). Hoisting: the Transpose's input is a Reshape that keeps the last dim,
// of a Gemm (alpha = beta = 1, no transA, constant B and a constant bias over the last axis) or
// a MatMul of a rank-2 input by a constant matrix, whose input a layout op computes, and the
// Transpose is not read by layout ops alone; the leading dims of the Reshape's output are
// known sizes but for at most one. Each moves a Transpose next to another layout op, away
// from where the other would take it, so neither undoes the other. Limits: a Transpose read by
// anything else stays, and so does one whose move would need a shape that cannot be spelled.
class CommuteTransposes : public Pass {
 public:
  std::string_view rewrite() const override { return kCommuteTransposesRewrite; }
  std::string_view name() const override { return "commute-transposes"; }
  std::string_view summary() const override {
    return "a Transpose that keeps the last axis moves across a MatMul/Gemm by constant weights and its bias, "
           "next to the layout ops on their other side";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
