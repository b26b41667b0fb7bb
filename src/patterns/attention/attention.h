// Attention: Softmax(Q·Kᵀ·scale + mask)·V with the head split and merge around it, as exporters
// write it, recognised in two places from one matcher (like patterns/composite/composite.h) —
//
//   * the fuse-attention pass matches it in a model's graph (MatchAttentionAt, anchored at the
//     Softmax or at a standard Attention node) and outlines the match into one ai.fusionopt node;
//   * a runtime recognises the body of such a function (RecognizeAttention) and runs it as one
//     kernel, reading Q, K and V where they lie.
//
// The form, B batch, S sequence (Sq queries, Sk keys), H heads (Hkv key/value heads), D head size:
//
//   [q, k, v = Split(qkv) {axis: last}]                          combined projection (optional)
//   qh = Transpose(Reshape(q, [B,Sq,H,D]), [0,2,1,3])            head split (optional: else q is [B,H,Sq,D])
//   kt = Transpose(Reshape(k, [B,Sk,H,D]), [0,2,3,1])            (or [0,2,1,3] then [0,1,3,2];
//   vh = Transpose(Reshape(v, [B,Sk,H,D]), [0,2,1,3])             else k is [B,H,D,Sk] or [B,H,Sk,D] transposed)
//     each of them optionally, on its heads-first [B,H,S,D] value (Q and K only for the first two):
//       rotary   r = Add(Mul(x, cos), Mul(rotate_half(x), sin)),  rotate_half(x) = Concat(Neg(x₂), x₁)
//                over the last axis, x₁ and x₂ its halves by Slice (or Split); or on a prefix of the
//                head only: Concat(r(x₁), x₂) {axis: last} with x₁, x₂ = Split(x, [r, D − r])
//       repeat   Reshape(Expand(Unsqueeze(x, [2]), [B,Hkv,n,S,D]), [B,Hkv·n,S,D])   grouped-query K, V
//       scale    Mul(x, c) | Div(x, c)                          Q and K, c a constant scalar (sdpa's √scale)
//   s  = MatMul(qh, kt)  [· c | / c]                             c a constant scalar
//   z  = s | Add(s, mask) | Where(cond, s, fill) | Where(cond, fill, s)    fill a constant scalar
//        where, beside a mask, s may carry an additive bias first: Add(s, bias) (ALiBi's
//        slopes × key positions, then the padding or causal mask); and 16-bit scores may be
//        cast to float32 first, the probabilities cast back before the product (MPT's upcast)
//   p  = Softmax(z) {last axis}  [p = Where(IsNaN(p), 0, p)]     the exporters' guard of empty rows
//   o  = MatMul(p, vh)
//   [y = Reshape(Transpose(o, [0,2,1,3]), [B,Sq,H·D])]           head merge (optional)
//
// or, opset 23, the core as one op: o = Attention(qh, kh, vh[, mask]) {scale, is_causal, softcap}
// on 4-D operands (which may be rotated and repeated as above), with no past key/value, no
// nonpad_kv_seqlen and no output but the first.
//
// A Reshape's target is whatever the graph computes it with: a constant, a value computed
// elsewhere (read at run time), or — absorbed into the pattern — the exporters' chain
// Concat(Unsqueeze(Gather(Shape(x), i)) | Shape(x){start: i, end: i + 1}, ..., [H], [D]) when
// nothing else reads its nodes.
//
// Checked here: ops of the default domain; perms; a constant scale and fill; the softmax axis
// the last one (where the rank is known); the head split's target ending in [H, D] constants
// (where it is a known constant or chain); a Split along the last axis; a mask that may
// broadcast to the scores (only a provable widening refuses — a runtime checks each run's
// shapes); the rotary halves splitting the last axis at one constant point; the repeat's
// Unsqueeze at axis 2; every intermediate of the core read only inside and no graph output.
// Around the core the match shrinks instead of failing: a head split or merge whose
// intermediates are read elsewhere stays outside, and so does a Split with an output read
// elsewhere. Shape nodes outside that read an intermediate are listed for the caller (the
// pass proves their values from the inputs and rewires them, or gives up).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/why_not.h"

namespace fusionopt {

// How the pattern reads Q, K or V.
enum class HeadLayout {
  kSplitHeads,            // [B,S,H·D] reshaped to [B,S,H,D] (or [B,S,H,D] itself), transposed inside
  kHeadsFirst,            // [B,H,S,D] as it is (K: transposed inside by [0,1,3,2])
  kHeadsFirstTransposed,  // K only: [B,H,D,Sk] as it is
  kView,                  // any chain of layout ops from the source (`view`), composed at run time
                          // into a strided [B,H,S,D] view (K read by the MatMul core: [B,H,D,S])
};

enum class AttentionMaskKind { kNone, kAdditive, kBoolean };

// One part of a Reshape target the pattern computes: constant values, one dim of a value
// (Gather(Shape(value), axis)), or the values of a tensor read at run time.
struct ShapePartMatch {
  enum class Kind { kConstant, kDimOf, kValues };
  Kind kind = Kind::kConstant;
  std::vector<int64_t> constant;
  Value* value = nullptr;  // kDimOf, kValues
  int64_t axis = 0;        // kDimOf, as written (may be negative)
};

// A Reshape of the head split or merge and how its target is known.
struct HeadReshapeMatch {
  Node* reshape = nullptr;
  bool allow_zero = false;
  std::vector<ShapePartMatch> parts;  // the target, in order
  std::vector<Node*> chain;           // nodes computing the target absorbed into the pattern
};

// Rotary position embedding on a heads-first [B,H,S,D] operand.
struct RotaryMatch {
  std::vector<Node*> nodes;  // Mul, Mul, Add, the halves' Slices (or Split), Neg, Concat; or the op
  Value* cos = nullptr;      // broadcasting to [B,H,S,D]: [B|1, 1, S, D] as exporters unsqueeze it
  Value* sin = nullptr;
  int64_t half = 0;          // the halves' split point, D / 2 (a runtime checks D); 0: D / 2
  Value* split_sizes = nullptr;  // the halves' Split sizes when not a constant (read at run time)
  bool op = false;           // a RotaryEmbedding-23 node: caches [B,S,D/2], maybe interleaved
  bool interleaved = false;
  // Partial rotary (Phi, GPT-NeoX, Falcon): the form above turns x₁ of x₁, x₂ = Split(x, [r, D − r])
  // {axis: last}, and Concat(turned, x₂) {axis: last} is the operand; `nodes` hold neither.
  Node* part_concat = nullptr;
  Node* part_split = nullptr;
  // Applied in the [B,S,H,D] layout, before the head-split Transpose (GPT-J): the tables
  // broadcast as [B|1, S, 1, D] there, the same rows the kernels read after the split.
  bool before_heads = false;
  // The interleaved form's Reshape flattening the stacked pairs back: its target is checked
  // against the operand each run (a body knows no shapes).
  Node* pair_flatten = nullptr;
};

// Grouped-query K or V: each of Hkv heads repeated n times, as transformers' repeat_kv writes it.
struct RepeatMatch {
  Node* unsqueeze = nullptr;
  Node* expand = nullptr;
  Node* reshape = nullptr;
  int64_t repeats = 0;            // n, the Expand target's entry 2
  HeadReshapeMatch expand_shape;  // the Expand target as parts (reshape unset)
  HeadReshapeMatch reshape_shape;
};

// One layout op of a kView operand: Transpose, Reshape (with its target), Squeeze, Unsqueeze,
// Gather of a constant scalar index, or one output of a Split of constant sizes (a packed
// projection's Q, K or V: torchvision's Gather, timm's unbind).
struct ViewStepMatch {
  Node* node = nullptr;
  std::optional<HeadReshapeMatch> reshape;
  int output = 0;  // the Split's output read
};

struct AttentionOperandMatch {
  HeadLayout layout = HeadLayout::kHeadsFirst;
  std::vector<ViewStepMatch> view;        // kView, source side first (beneath the rotary, if any)
  Value* source = nullptr;  // what the pattern reads ([B,S,W], [B,S,H,D] or the 4-D operand)
  std::optional<HeadReshapeMatch> split;  // kSplitHeads from [B,S,W]
  std::vector<Node*> transposes;          // source side first
  int split_output = -1;                  // source is this output of the combined Split
  std::optional<RotaryMatch> rotary;      // Q, K
  std::optional<RepeatMatch> repeat;      // K, V
  std::vector<Node*> scales;              // Q, K: Mul / Div by constant scalars
  double prescale = 1.0;                  // their product (a Div contributes 1 / c)
};

// The standard Attention op (opset 23) as the core.
struct AttentionOpCore {
  std::optional<double> scale;  // the attribute; unset: 1/√D
  bool causal = false;
  double softcap = 0;
};

struct AttentionMatch {
  std::vector<Node*> nodes;  // every member, without the Constant nodes they read
  Node* softmax = nullptr;
  Node* score_matmul = nullptr;
  Node* context_matmul = nullptr;
  Node* attention_op = nullptr;  // the core when it is a standard Attention node
  std::optional<AttentionOpCore> op;
  Node* guard = nullptr;         // Where(IsNaN(p), 0, p) after the Softmax
  Node* guard_test = nullptr;    // its IsNaN
  AttentionOperandMatch q, k, v;

  Node* split = nullptr;  // the combined projection's Split, when inside
  Value* combined = nullptr;
  int64_t split_axis = -1;  // as written

  std::optional<double> scale;
  bool scale_divides = false;
  Node* scale_node = nullptr;

  Node* score_cast = nullptr;        // Cast(s) to float32 of 16-bit scores, when present
  Node* probability_cast = nullptr;  // Cast(p) back to V's type before the product, when present
  Node* bias_node = nullptr;   // Add(s, bias) under a mask, when present
  Value* bias = nullptr;       // an additive score bias before the mask (ALiBi)

  AttentionMaskKind mask_kind = AttentionMaskKind::kNone;
  Node* mask_node = nullptr;
  Value* mask = nullptr;       // additive mask, or the Where condition
  double fill = 0;             // Where: the value where the condition selects it
  bool fill_when_true = false;
  bool causal = false;  // the condition is sliced from a constant lower-triangular buffer

  int64_t softmax_axis = -1;  // as written, the opset's default resolved

  std::optional<HeadReshapeMatch> merge_view;  // a Reshape of the context to its own shape first
  Node* merge_transpose = nullptr;  // the head merge, when inside
  std::vector<int64_t> merge_perm;  // its perm: [0,2,1,3], or any that keeps the features last
  std::optional<HeadReshapeMatch> merge;

  Value* output = nullptr;
  int64_t heads = 0;      // 0: not known before run time
  int64_t head_size = 0;  // 0: not known before run time

  // Shape nodes outside the pattern that read one of its intermediates.
  std::vector<Node*> outside_shape_reads;
};

struct AttentionSearch {
  std::optional<AttentionMatch> match;
  WhyNot near_miss;  // "attention: <reason>" when the skeleton is there but a check failed
};

// Looks for attention whose Softmax, or standard Attention node, is `anchor`. `opset` is the
// default domain's version.
AttentionSearch MatchAttentionAt(Node& anchor, int64_t opset);

// The parts of a Reshape target held in `shape`: a constant, or the exporters' Concat chain
// (then `chain` receives its nodes); nullopt for anything else.
std::optional<std::vector<ShapePartMatch>> ShapeParts(Value& shape, std::vector<Node*>* chain);

// ---------------------------------------------------------------- a recognised body

// A value whose dims a kernel knows at run time: a body input, an output of the combined
// Split, the head merge's transposed context [B,Sq,H,D], the context [B,H,Sq,Dv] itself, or an
// operand's heads-first value [B,H,S,D] (the output of its head-split Transpose).
struct AttentionDimSource {
  enum class Kind { kInput, kSplitOutput, kMergedContext, kContext, kOperandHeads };
  Kind kind = Kind::kInput;
  int index = 0;  // input, Split output, or operand (0 Q, 1 K, 2 V)
};

struct AttentionShapePart {
  ShapePartMatch::Kind kind = ShapePartMatch::Kind::kConstant;
  std::vector<int64_t> constant;
  AttentionDimSource of;  // kDimOf
  int64_t axis = 0;       // kDimOf
  int input = -1;         // kValues: the body input holding the values
};

struct AttentionReshape {
  bool allow_zero = false;
  std::vector<AttentionShapePart> parts;
};

// A body input or a constant the body holds.
struct AttentionInput {
  int input = -1;
  TensorPtr constant;
  bool present() const { return input >= 0 || constant != nullptr; }
};

struct AttentionRotary {
  int cos = -1, sin = -1;  // body inputs
  int64_t half = 0;        // 0: D / 2
  int split_sizes = -1;    // the body input holding the halves' Split sizes, checked at run time
  bool op = false;         // RotaryEmbedding-23's [B,S,D/2] caches, else tables as wide as D
  bool interleaved = false;
  bool partial = false;    // the first r features of each head turned, the rest passed through
  bool before_heads = false;  // applied before the head split: tables [B|1, S, 1, W]
  // interleaved graph form: the flatten of the stacked pairs, its target and allowzero
  AttentionInput pair_target;
  bool pair_allow_zero = false;
  // partial: the sizes of the Split into [r, D − r] — its sizes input, else its `split`
  // attribute; neither: even halves (read and checked at run time like a view step's Split)
  AttentionInput part_sizes;
  std::vector<int64_t> part_attribute;
};

struct AttentionRepeat {
  int64_t repeats = 0;
  int64_t source_heads = 0;  // Hkv where the body's types know it (0: found at run time)
  AttentionReshape expand_shape, reshape_shape;
};

struct AttentionViewStep {
  enum class Kind { kTranspose, kReshape, kSqueeze, kUnsqueeze, kGather, kSplit };
  Kind kind = Kind::kTranspose;
  std::vector<int64_t> ints;  // Transpose's perm, Squeeze's / Unsqueeze's axes, Split's `split` attribute
  int64_t axis = 0, index = 0;  // Gather's axis and index; Split's axis and the output read
  int64_t outputs = 0;          // kSplit: its output count
  AttentionInput sizes;         // kSplit: its sizes input (opset >= 13), when given
  AttentionReshape reshape;   // kReshape
};

struct AttentionOperand {
  HeadLayout layout = HeadLayout::kHeadsFirst;
  std::vector<AttentionViewStep> view;  // kView, source side first
  int input = -1;         // body input read, unless split_output >= 0
  int split_output = -1;  // the combined Split's output read
  std::optional<AttentionReshape> split;
  std::optional<AttentionRotary> rotary;
  std::optional<AttentionRepeat> repeat;
  double prescale = 1.0;
};

struct FusedAttention {
  AttentionOperand q, k, v;

  bool combined = false;      // Q, K and V are outputs of one Split of body input `combined_input`
  int combined_input = -1;
  int64_t split_axis = -1;    // as written; a kernel checks it is the last
  int split_outputs = 0;      // the Split's output count
  AttentionInput split_sizes;               // opset >= 13: the sizes input, when given
  std::vector<int64_t> split_attribute;     // opset < 13: the `split` attribute

  std::optional<double> scale;
  bool scale_divides = false;

  AttentionInput bias;  // added to the scaled scores before the mask, when present

  AttentionMaskKind mask_kind = AttentionMaskKind::kNone;
  AttentionInput mask;  // additive mask or Where condition
  double fill = 0;
  bool fill_when_true = false;

  int64_t softmax_axis = -1;  // as written; a kernel checks it is the last
  bool nan_guard = false;     // rows whose softmax is NaN give 0
  // The core is a standard Attention node; its mask (input 3) is boolean or additive by the dtype
  // a runtime sees (mask_kind says what the match's types said).
  std::optional<AttentionOpCore> op;
  std::optional<AttentionReshape> merge_view;  // resolves to the context's own [B,H,Sq,Dv]
  // The output is the context transposed by `merge_perm` and reshaped to `merge`'s target when
  // set ([0,2,1,3] and [B,Sq,H·D] as exporters merge heads), else [B,H,Sq,D].
  std::vector<int64_t> merge_perm;
  std::optional<AttentionReshape> merge;
  int result_output = 0;
};

// The attention `body` computes, when its nodes are exactly one match (plus Constant nodes it
// reads) and its only output is the match's result; nullopt otherwise.
std::optional<FusedAttention> RecognizeAttention(const Graph& body, int64_t opset);
std::optional<FusedAttention> RecognizeAttention(const Function& function);

}  // namespace fusionopt
