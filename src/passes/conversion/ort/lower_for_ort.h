// lower-for-ort (`fusionopt optimize --runtime ort`): the fused groups ONNX Runtime has a
// kernel for, written as that kernel, so that ORT runs them fused instead of inlining our
// functions back into their ops. It runs after the pipeline has made its decisions and changes
// none of them; it only picks how each group is spelled.
//
//   %qkv = ai.fusionopt::FusedMatMulAdd(%x, %W, %b)             →   %ctx = com.microsoft::Attention(%x, %W, %b, , , %bias)
//   %ctx = ai.fusionopt::FusedAttention(%qkv, %sizes, ...)            {num_heads, scale}  (W, b initializers; ORT packs W)
//                                                                (or, where the provider runs MultiHeadAttention faster at
//                                                                this key count, the form below: ort_kernel_choice.h)
//   %qkv = Reshape(Gemm(Reshape(%x, [-1, D]), %W, %b), [B,S,N])  →   the same Attention, then Reshape(%ctx, rows) where the
//      (GPT-2's Conv1D: rows flattened, projected, put back)         group merged to [B·S, H·D]
//   %ctx = ai.fusionopt::FusedAttention(%qkv, %sizes, ...)   →   %q, %k, %v = Split(%qkv, %sizes) {axis: -1}
//                                                                [%q, %k = com.microsoft::RotaryEmbedding(%q | %k, [0], cos, sin)]
//                                                                [%k, %v = Reshape(Expand(Reshape(%k | %v, [0,0,Hkv,1,D]), [1,1,1,n,1]), [0,0,H·D])]
//                                                                %ctx = com.microsoft::MultiHeadAttention(%q, %k, %v,
//                                                                   , , %bias) {num_heads, scale}
//   %y, %sum = ai.fusionopt::FusedAddLayerNorm(%a, %b, %g, %be)   →   com.microsoft::SkipLayerNormalization
//   %y, %sum = ai.fusionopt::FusedAddRMSNorm(%a, %b, %g)          →   com.microsoft::SkipSimplifiedLayerNormalization
//   %sum = ai.fusionopt::FusedMatMulAdd[Add](%x, %W[, %b], %r)    →   %p = MatMul(%x, %W)
//   %y = ai.fusionopt::FusedRMSNorm | FusedLayerNorm(%sum, %g)        %y, , , %sum = com.microsoft::Skip(Simplified)LayerNormalization(%p, %r, %g[, %be][, %b])
//      (or the standard LayerNormalization(%sum, %g, %be) op, its statistics unread)
//   %e = Add(%x, %pos[1,S,H]); %y = LayerNormalization(%e, %g, %be)   →   %y, , , %e = com.microsoft::SkipLayerNormalization(%x, %pos, %g, %be)
//      (or %pos of %x's own [B,S,H] shape, proven here where ORT's own fusion cannot prove it)
//   %y = ai.fusionopt::FusedRMSNorm(%x, %g)  (no residual)       →   Mul(Div(%x, Sqrt(ReduceMean(Pow(%x, 2)) + eps)), %g),
//                                                                     the spelling ORT's SimplifiedLayerNormFusion matches
//   a GELU inside any fused group (alone or a contraction's epilogue): the group is inlined and
//   its GELU written as com.microsoft::BiasGelu (erf, after a bias Add), Gelu (erf) or FastGelu
//   (tanh, with its bias Add when there is one); the rest of the group's ops stay standard ops.
//   A QuickGELU x·σ(αx) (α not 1: CLIP's 1.702) the same way, as com.microsoft::QuickGelu {alpha}.
//
// Every attribute ORT needs is derived from the recognised body (patterns/attention/attention.h,
// patterns/composite/composite.h), never guessed: heads, head size and repeat from the addressing every
// runtime reads the operands with (patterns/attention/layout.h) at trial sizes of the open dims
// (trial_layout.h; K's and V's heads times their repeat must be Q's), the scale from every constant the pattern multiplies the scores by, the epsilon
// from the norm. The mask becomes attention_bias: an additive mask as it is; a Where mask whose
// fill is the float32 minimum as the bias Where(cond, 0, fill); either expanded to [., ., Sq, Sk]
// from Q's and K's run-time shapes when its last dims are not provably those (ORT's
// attention_bias does not broadcast there). A rotary's caches are the first halves of its
// [1,1,S,D] tables, which must provably have equal halves (Cos / Sin of Concat(f, f)).
// Biases, expansions and caches are written once and shared by the layers that provably agree.
//
// Limits: float32 or float16 (a float16 residual norm stays ops for the CPU EP, where they run
// faster than its Skip kernel: ort_kernel_choice.h); attention needs Q, K and V split into heads inside the group from
// [B,S,H·D] values (or [B,S,H,D] values split outside with H and D known, reshaped back first;
// or reached by layout chains over one packed [B,S,3·H·D] projection that read its thirds
// split into heads: torchvision's in-projection, lower_for_ort_packed.cc), the heads merged back inside (to [B,S,H·D], or to [B·S, H·D] with a Reshape
// after the kernel), a rotary (if any) by transformers' half rotation over whole heads with tables
// shared by the batch, and a grouped-query repeat (if any) on K and V alike. A group that does not
// qualify stays an ai.fusionopt function, which ORT inlines; the report says why for each.
#pragma once

#include <string_view>

#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/status.h"
#include "passes/conversion/ort/kernel_choice.h"
#include "passes/pass.h"

namespace fusionopt::passes {

inline constexpr const char* kOrtDomain = "com.microsoft";
// The --report section lower-for-ort writes: OrtLoweringToJson's document.
inline constexpr std::string_view kOrtLoweringSection = "ort_lowering";

struct OrtLowering {
  std::string node;      // the fused call (or, for a GELU, the group it was inlined from)
  std::string function;  // its ai.fusionopt function, or "LayerNormalization" for the standard op
  std::string written;   // what ORT runs now: "com.microsoft::MultiHeadAttention", ...
  std::vector<std::string> absorbed;  // earlier fused calls the same kernel took in (Attention's projection)
  std::string because;                // why this kernel where ORT had several (ort_kernel_choice.h); else empty
};

struct OrtKeptGroup {
  std::string node;
  std::string function;
  std::string reason;  // why it stays a function ORT inlines
};

struct OrtLoweringReport {
  std::vector<OrtLowering> lowered;
  std::vector<OrtKeptGroup> kept;
};

// Passes whose rewrite helps fusionopt's runtimes but costs ONNX Runtime time, so `--runtime ort`
// leaves them out: lower-batchnorm turns a BatchNormalization no contraction absorbed into a
// Mul and an Add, which ORT runs as two kernels where it had one (DenseNet-121 under ORT: 83.1
// ms with the pass against 74.0 without, the original 74.1; bench/ort_runtime.py, docs/benchmarks.md).
const std::vector<std::string>& PassesOrtRunsBetterWithout();

// Pass options `--runtime ort` sets unless the user set them: {pass, option, value}. Convolutions
// merged horizontally become Conv + Split once ORT inlines the group, and ORT's NCHWc layout
// transformer reorders out of its blocked layout before the Split and back after it: YOLOv8n ran
// 225 ORT nodes against the original's 219, no faster (bench/ort_runtime.py, docs/benchmarks.md).
struct OrtPassOption {
  const char* pass;
  const char* option;
  const char* value;
};
const std::vector<OrtPassOption>& PassOptionsForOrt();

// Rewrites `model`'s main graph in place and imports the com.microsoft domain when it wrote an
// op of it. Functions no call uses any more are removed. Where ORT has more than one kernel for
// a group, `options` (the execution provider, --dim sizes) picks it.
Result<OrtLoweringReport> LowerForOrt(Model& model, const OrtLoweringOptions& options = {});

std::string OrtLoweringToJson(const OrtLoweringReport& report);

// LowerForOrt as the conversion `--runtime ort` ends the pipeline with (registry.h): the
// provider from the pipeline's target, the choices' sizes from its --dim. Each group written
// counts a match and its op; each kept is a rejection with its reason; the full account is the
// report's "ort_lowering" section.
// The rewrite lower-for-ort makes (the full account is this header's first comment):
inline constexpr std::string_view kLowerForOrtRewrite = R"rewrite(
  %ctx = ai.fusionopt::FusedAttention(%qkv, ...)   →   com.microsoft::Attention | MultiHeadAttention
  %y, %sum = ai.fusionopt::FusedAddLayerNorm(...)   →   com.microsoft::SkipLayerNormalization
  a group with a GELU epilogue                      →   its ops, the GELU as BiasGelu | Gelu | FastGelu
  any other group                                   →   unchanged (ONNX Runtime inlines the function)
)rewrite";
class LowerForOrtPass : public Pass {
 public:
  std::string_view rewrite() const override { return kLowerForOrtRewrite; }
  std::string_view name() const override { return "lower-for-ort"; }
  std::string_view summary() const override {
    return "the fused groups ONNX Runtime has kernels for, written as its com.microsoft ops (--runtime ort)";
  }
  Result<bool> Run(Model& model, PassContext& context) override;
};

}  // namespace fusionopt::passes
