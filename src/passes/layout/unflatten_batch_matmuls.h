#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// unflatten-batch-matmuls (O1): a region of batched MatMuls and the ops around them that reads
// tensors through a Reshape flattening two axes into one batch axis, and is read back through
// Reshapes, runs on the unflattened tensors instead. BLOOM's eager attention as exported:
inline constexpr std::string_view kUnflattenBatchMatmulsRewrite = R"rewrite(
  %q3 = Reshape(%q[B,H,S,D], [B·H,S,D])                 %kt = Transpose(%k) {perm: [0,1,3,2]}
  %k3 = Reshape(%k[B,H,S,D], [B·H,S,D])                 %s = MatMul(%q, %kt)
  %kt3 = Transpose(%k3) {perm: [0,2,1]}           →     %a = Mul(%s, %alpha)
  %s3 = MatMul(%q3, %kt3)                               %alibi4 = Reshape(%alibi, [0,0,1,-1])
  %a3 = Mul(%s3, %alpha)                                %b = Add(%a, %alibi4)
  %b3 = Add(%a3, Reshape(%alibi[B,H,S], [B·H,1,S]))     %y = Reshape(%b, [B,H,S,S])  (a no-op now)
  %y = Reshape(%b3, [B,H,S,S])
)rewrite";
// torch's nn.MultiheadAttention with need_weights ([L,B,E] → [L,B·H,D], a bmm over B·H) is the
// other form. An entry is a Reshape x → v whose axis m flattens x's axis m (outer) with what x
// holds beyond v's trailing dims (inner), with the dims before m unchanged; every entry of a
// region splits the same way. Members are MatMuls of two flattened operands (a projection by
// weights stays as the exporter wrote it: its Gemm and ORT forms want the flat rows), elementwise
// ops whose other operands do not reach that axis, Transposes, and Softmax over the last axis;
// what reads a member is a member, a Reshape (which reads the unflattened value the same,
// element for element; one that now spells its input's shape goes), or a Shape op (TorchScript
// sizes its next view so: it reads the unflattened dims with the split pair multiplied back).
// Limits: one flattened axis per value, a region with at least one MatMul of two flattened
// operands, no graph output inside, and a split the Reshape targets can spell.
class UnflattenBatchMatmuls : public Pass {
 public:
  std::string_view rewrite() const override { return kUnflattenBatchMatmulsRewrite; }
  std::string_view name() const override { return "unflatten-batch-matmuls"; }
  std::string_view summary() const override {
    return "batched MatMuls over a flattened batch axis ([B·H,S,D], BLOOM's baddbmm, nn.MultiheadAttention's bmm) run "
           "on the unflattened tensors, so attention meets its 4-D form";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
