#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// matmul-add-to-gemm (O1): a 2-D MatMul and the bias Add after it become one Gemm.
inline constexpr std::string_view kMatMulAddToGemmRewrite = R"rewrite(
  %y = MatMul(%a, %b)      (a: [M, K], b: [K, N])        %z = Gemm(%a, %b, %c)
  %z = Add(%y, %c)         (c: [N], [1, N], [M, N], ...)  →
)rewrite";
// The Add may read the MatMul result as either operand (addition commutes). C must broadcast
// to [M, N] one way (Gemm's rule): right-aligned, each of its dims 1 or equal to the output's
// (a known size or the same symbol), rank at most 2 — so the Add's output is exactly the
// MatMul's. B may be any rank-2 value: Gemm takes computed weights as well as constants.
//
// Batched MatMuls (A of rank > 2, the transformer layers' [batch, seq, hidden] activations) stay
// as they are. Gemm is 2-D only; Flatten → Gemm → Reshape would be exact and its reshapes are
// free views, but it adds two nodes, needs static leading dims (exported transformers have
// symbolic batch and sequence), and buys nothing: the O2 contraction-epilogue fusion takes
// MatMul + Add as one kernel anyway.
//
// Conditions, each reported when it fails: standard domain, opset 7 or later (Gemm's one-way
// broadcasting of C), A and B of known rank 2, a dtype Gemm takes at that opset (float,
// float16, double; bfloat16 from 13), the MatMul output read only by the Add and not a graph
// output, C of the same dtype and a known shape that broadcasts as above.
class MatMulAddToGemm : public Pass {
 public:
  std::string_view rewrite() const override { return kMatMulAddToGemmRewrite; }
  std::string_view name() const override { return "matmul-add-to-gemm"; }
  std::string_view summary() const override { return "turn a 2-D MatMul followed by a bias Add into one Gemm"; }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
