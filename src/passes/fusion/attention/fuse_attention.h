#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// fuse-attention (O3): see fuse_attention.cc.
// fuse-attention (O3): scaled dot-product attention, with the head split and merge around it
// where the graph has them, outlined into one ai.fusionopt node whose body is the original ops
// (outline.h) and which a runtime recognises as one kernel (patterns/attention/attention.h):
inline constexpr std::string_view kFuseAttentionRewrite = R"rewrite(
  %q, %k, %v = Split(%qkv, [W, W, W]) {axis: 2}           %ctx = ai.fusionopt::FusedAttention(%qkv, %sizes, %mask)
  %qh = Transpose(Reshape(%q, [B,S,H,D]), [0,2,1,3])
  %kt = Transpose(Reshape(%k, [B,S,H,D]), [0,2,3,1])      function FusedAttention(%x0, %x1, %x2) -> (%y0)
  %vh = Transpose(Reshape(%v, [B,S,H,D]), [0,2,1,3])  →   { the original ops; the Shape → Gather →
  %s  = Div(MatMul(%qh, %kt), 8.0)                          Unsqueeze → Concat chains computing the
  %p  = Softmax(Add(%s, %mask)) {axis: -1}                  Reshape targets come along when nothing
  %o  = Transpose(MatMul(%p, %vh), [0,2,1,3])               else reads them }
  %ctx = Reshape(%o, [B,S,H·D])
)rewrite";
// Forms: Q, K and V as three tensors or the outputs of one Split along the last axis (the
// combined projection); with or without the head split (then [B,H,S,D], K also [B,H,D,S]) and
// merge (a Reshape of the context to its own shape before it, as the TorchScript exporter's
// sdpa writes, included); scale by Mul or Div by a constant after the product, or on Q and K
// before it (sdpa's √scale on each, any mix of the two), or none; an additive mask (BERT's
// extended mask, T5's position bias), a Where with a boolean condition and a constant fill
// (GPT-2's causal mask, recorded as causal when sliced from a constant lower-triangular
// buffer), or none (ViT); beside a mask, an additive score bias before it (ALiBi) and 16-bit
// scores cast to float32 with the probabilities cast back (MPT's upcast); the dynamo exporter's
// guard Where(IsNaN(p), 0, p) after the Softmax; rotary embedding on Q and K (rotate_half by
// Slice or Split, or RotaryEmbedding-23); grouped-query K and V repeated by Unsqueeze / Expand /
// Reshape; any other chain of layout ops (Transpose, Reshape, Squeeze, Unsqueeze, Gather of a
// scalar, a Split's output) where those forms stop at one,
// composed by the kernel into a strided view (torchvision's packed in-projection); a head merge
// by any perm that keeps the features innermost; and at opset 23 the core as one Attention node
// with the same operand forms around it.
//
// Checked for every candidate (a near miss is reported with its reason): the matcher's checks
// (perms, constant scales and fill, the softmax over the last axis, a mask that may broadcast
// to the scores without widening them, intermediates of the core read only inside and no graph
// output); float32, float16 or bfloat16 Q, K, V, mask and rotary tables, Q, K and V of one dtype;
// outlinable members; the cost model's verdict.
//
// Dynamic shapes: exporters compute the head split's targets from run-time shapes, and some
// read shapes of the pattern's intermediates for other purposes (GPT-2 slices its causal mask
// with Shape(qh)[2] and Shape(kt)[3]). Such a Shape read outside is rewired to a value outside
// the pattern with the same dim — proven through the Split (any axis but the split one), the
// Transposes (their perm), scales and rotary embedding (which keep their operand's dims), the
// head split's and repeat's Reshapes (a target entry that is a constant, or a dim the graph
// reads from a value that provably has it), and the context (Dv from V; B, H and Sq from Q where
// K, V and the mask provably do not widen them) — so the group reads nothing it computes. A
// read that cannot be proven so (a dim of the scores, which a mask might widen) leaves the
// candidate alone.
//
// Limits: 4-D scores; partial rotary embedding (fewer rotated features than the head size) and
// interleaved pairs in the decomposed form are not recognised (RotaryEmbedding-23's interleaved
// form is); Q/K/V sliced from a combined tensor by Slice ops rather than a Split are three
// tensors here; an Attention node with a cache, nonpad lengths, 3-D operands or a read score
// output stays as it is (the runtime runs it as one kernel anyway).
class FuseAttention : public Pass {
 public:
  std::string_view rewrite() const override { return kFuseAttentionRewrite; }
  std::string_view name() const override { return "fuse-attention"; }
  std::string_view summary() const override {
    return "Softmax(Q·Kᵀ·scale + mask)·V with its head split and merge -> one ai.fusionopt attention node";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
