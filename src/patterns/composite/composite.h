// Composites: the row and activation patterns (LayerNorm, RMSNorm, Softmax with scale and mask,
// GELU, SiLU) as exporters spell them, recognised in two places from one set of matchers —
//
//   * the fuse-composites pass matches them in a model's graph (MatchCompositeAt) and adds the
//     checks only a typed graph allows (dtypes, shapes, the axis being the last);
//   * a runtime recognises the body of an ai.fusionopt function the pass created
//     (RecognizeComposite) and runs it as one row or elementwise kernel, without depending on
//     the passes.
//
// The forms (any operand order where the op commutes; every constant a scalar the graph cannot
// override, compared with a relative tolerance of 1e-6 — float32 rounding of the exact value,
// a few ulps, while a constant 1% off is no match):
//
//   layernorm  m = ReduceMean(x); d = Sub(x, m); v = ReduceMean(Pow(d, 2) | Mul(d, d));
//              n = Div(d, Sqrt(Add(v, eps))) | Mul(d, Reciprocal(Sqrt(..)) | Div(1, Sqrt(..)));
//              [y = Mul(n, gamma) [; y = Add(y, beta)]]       or   LayerNormalization(x, gamma, beta)
//   rmsnorm    v = ReduceMean(Pow(x, 2) | Mul(x, x)); n as above with x for d; [y = Mul(n, gamma)]
//                                                             or   RMSNormalization(x, gamma)
//   both norms may start with a residual prologue x = Add(a, b), whose sum may also be read
//              outside (a second result, as BERT's and GPT-2's residual streams need)
//   softmax    Softmax(z): z = s | Add(s, mask) | Where(cond, s, fill) | Where(cond, fill, s);
//              s = x | Mul(x, c) | Div(x, c)
//   gelu       x · 0.5 · (1 + Erf(x / √2 | x · 1/√2)), the factors multiplied in any order
//              (or the 0.5 as a Div by 2);  x · 0.5 · (1 + Tanh(√(2/π) · (x + 0.044715 · x³)))
//              with x³ = Pow(x, 3) | x·x·x;  or the Gelu op. Constants match within 1e-6, or
//              within half an ulp of their own type where they are stored as float16 or bfloat16
//              (fp16 exports hold √2 as 1.4140625)
//   silu       Mul(x, Sigmoid(x))
//
// Every intermediate is read only inside the pattern and is no graph output; the result (and a
// residual prologue's sum) may be read anywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/why_not.h"

namespace fusionopt {

enum class CompositeKind { kLayerNorm, kRmsNorm, kSoftmax, kGelu, kSilu };

std::string_view NameOf(CompositeKind kind);  // "layernorm", "rmsnorm", "softmax", "gelu", "silu"

enum class GeluForm { kErf, kTanh };

// A composite found in a graph: its ops and what they read, as Values of that graph.
struct CompositeMatch {
  CompositeKind kind = CompositeKind::kGelu;
  std::vector<Node*> nodes;  // the composite's ops, without the Constant nodes they read
  bool standard_op = false;  // LayerNormalization, RMSNormalization, Gelu or a lone Softmax at its core

  Value* x = nullptr;
  Value* output = nullptr;  // the composite's result

  // Norms.
  Node* residual_add = nullptr;  // the prologue: x = Add(x, residual) (then `x` is its first operand)
  Value* residual = nullptr;
  Value* residual_sum = nullptr;  // the prologue's result
  std::vector<Node*> mean_reductions;  // decomposed forms: the ReduceMean nodes
  Node* gamma_mul = nullptr;           // decomposed forms: the affine tail
  Node* beta_add = nullptr;
  Value* gamma = nullptr;
  Value* beta = nullptr;
  double epsilon = 0;
  // Norms computed in float32 on a 16-bit input, as float16 exports write them: Cast(x, to=float)
  // before the normalization and a Cast back (to cast_back_to, an ONNX type) after it, before
  // the affine tail. Both Casts or neither; 0 when there are none.
  Node* cast_in = nullptr;
  Node* cast_out = nullptr;
  int64_t cast_back_to = 0;

  // SiLU: x·sigmoid(alpha·x); alpha 1 is SiLU itself, 1.702 QuickGELU (CLIP), as ONNX's Swish-24
  // and ORT's QuickGelu write it.
  double alpha = 1.0;

  // Norms and softmax: the normalized axis as written (the opset's default resolved). Only a
  // last axis is a row; the graph's ranks decide whether it is (see NormalizedAxis).
  int64_t axis = -1;

  // Softmax.
  Value* mask = nullptr;       // additive mask
  Value* condition = nullptr;  // Where mask: positions where `condition` selects the fill
  std::optional<double> scale;
  bool scale_divides = false;  // s = x / scale rather than x · scale
  std::optional<double> fill;
  bool fill_when_true = false;  // Where(cond, fill, s) rather than Where(cond, s, fill)
  Node* mask_node = nullptr;    // the Add or Where before the Softmax

  // GELU.
  GeluForm gelu_form = GeluForm::kErf;
};

// The result of looking for a composite at one node: a match; or a near miss, a reason such as
// "layernorm: epsilon is not a constant scalar" when the pattern's skeleton is there but a
// check failed; or neither when the node starts no composite.
struct CompositeSearch {
  std::optional<CompositeMatch> match;
  WhyNot near_miss;
};

// Looks for the composite whose anchor is `anchor`: Sqrt (decomposed norms), LayerNormalization,
// RMSNormalization, Softmax, Erf or Tanh (decomposed GELU), Gelu, Sigmoid (SiLU). `opset` is
// the default domain's version the graph is run under. The optional prologue and affine tail
// are included whenever the graph's structure allows; a caller with stricter rules may drop
// them (the prologue, the beta Add, or the gamma Mul with the beta Add after it).
CompositeSearch MatchCompositeAt(Node& anchor, int64_t opset);

// `axis` made non-negative for a tensor of `rank`, or nullopt when out of range.
std::optional<int64_t> NormalizedAxis(int64_t axis, int64_t rank);

// An operand of a recognised body: one of the body's formal inputs, or a constant the body
// holds itself (the outliner copies scalar constants into the body).
struct CompositeOperand {
  int input = -1;      // index into the body's inputs, or -1
  TensorPtr constant;  // set when the body holds the operand as a Constant node
  bool present() const { return input >= 0 || constant != nullptr; }
};

enum class CompositeRole { kX, kResidual, kGamma, kBeta, kMask, kCondition };

// What a fused body computes, for a kernel that implements it in one pass.
struct FusedComposite {
  CompositeKind kind = CompositeKind::kGelu;
  bool standard_op = false;  // see CompositeMatch
  // One per formal input; an input serving two roles gets the first of x, residual, gamma,
  // beta, mask, condition.
  std::vector<CompositeRole> input_roles;
  CompositeOperand x, residual, gamma, beta, mask, condition;
  int result_output = 0;         // the body output holding the composite's result
  int residual_sum_output = -1;  // the body output holding x + residual, when returned
  double epsilon = 0;
  // Norms and softmax: as written. A row kernel must check NormalizedAxis(axis, rank) == rank-1
  // for its input's rank; then the opset < 13 Softmax (2-D coercion) agrees with the newer one.
  int64_t axis = -1;
  // Softmax: x·scale or x/scale when scale_divides. An unscaled additive mask may be either
  // addend — addition commutes, and the pass keeps the body as written — so a kernel takes
  // whichever of x and mask has the scores' full shape as the scores.
  std::optional<double> scale;
  bool scale_divides = false;
  std::optional<double> fill;  // Where mask: the value where the condition selects it
  bool fill_when_true = false;
  GeluForm gelu_form = GeluForm::kErf;
  double alpha = 1.0;  // SiLU: x·sigmoid(alpha·x), see CompositeMatch
  // Norms between float32 Casts (see CompositeMatch): the type the result is cast back to, which
  // a kernel must find equal to x's (it computes in float32 and writes x's type); 0: no Casts.
  int64_t cast_back_to = 0;
};

// The composite `body` computes, when its nodes are exactly one composite (plus the Constant
// nodes it reads) and its outputs are the composite's result (and optionally a residual
// prologue's sum); nullopt otherwise. `opset` is the default domain's version of the body.
std::optional<FusedComposite> RecognizeComposite(const Graph& body, int64_t opset);
// The same for a model-local function (its own default-domain opset).
std::optional<FusedComposite> RecognizeComposite(const Function& function);

}  // namespace fusionopt
