// fuse-attention on the forms current exporters write (issue 14): the sdpa decomposition with
// √scale on Q and K and the IsNaN guard after the Softmax (fully masked rows included),
// grouped-query K/V repeats with rotary embedding on Q and K (Slice and Split halves), the
// opset-23 Attention node as the core — each outlined into one node whose body is recognised
// and whose fused kernel computes the original's numbers — and the near misses beside them: a
// guard that is no NaN guard, a repeat on another axis, rotary halves that do not halve, a scale
// computed at run time.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "cpu_runtime/engine/compare.h"
#include "attention_test_models.h"
#include "pass_harness.h"
#include "ir/constant_value.h"
#include "patterns/attention/attention.h"
#include "patterns/attention/layout.h"
#include "text_format/text_format.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "fuse-attention";

// The pass outlines `text`'s attention, the body is recognised as attention and both the
// inlined model and the fused kernel compute the original's numbers.
struct Fused {
  Rewritten rewritten;
  FusedAttention attention;
};

Fused ExpectAttention(const std::string& text, const std::map<std::string, int64_t>& symbols = {},
                      cpu::Tolerance kernel_tolerance = {1e-5, 1e-6}) {
  Fused out;
  out.rewritten = Rewrite(text, kPass);
  REQUIRE(out.rewritten.Counter("attention") == 1);
  ExpectSameNumbers(*out.rewritten.original, *out.rewritten.model, Inlined(symbols));
  const Function* function = out.rewritten.model->FindFunction(kFusionDomain, "FusedAttention");
  REQUIRE(function != nullptr);
  INFO(PrintGraph(*function->body));
  std::optional<FusedAttention> attention = RecognizeAttention(*function);
  REQUIRE(attention.has_value());
  out.attention = *attention;
  const OpenDims dims{symbols};
  ExpectClose(RunOnCpu(*out.rewritten.model, dims), RunOnCpu(*out.rewritten.original, dims), kernel_tolerance);
  return out;
}

// The ops the rewritten main graph keeps outside the fused node.
std::vector<std::string> OpsOutside(const Rewritten& rewritten) { return OpTypes(*rewritten.model->graph); }

// sdpa as the dynamo exporter decomposes it: K transposed, √scale on each of Q and K, the mask
// Where(mask, 0, -inf) added, Softmax, Where(IsNaN(p), 0, p), MatMul with V. `guard` replaces
// the guard's two lines.
std::string Sdpa(const std::string& guard = "") {
  const std::string guard_lines = guard.empty() ? "  %nan = IsNaN(%p) @isnan\n  %g = Where(%nan, %zero, %p) @guard\n" : guard;
  return R"(ir_version 8
opset "" 18
graph main (float[B,2,S,4] %qh, float[B,2,S,4] %kh, float[B,2,S,4] %vh, bool[B,1,1,S] %mask) -> (float[B,2,S,4] %o)
  init float[] %root = [0.7071068]
  init float[] %zero = [0.0]
  init float[] %ninf = [-inf]
{
  %kt = Transpose(%kh) {perm: [0, 1, 3, 2]} @key_transpose
  %qs = Mul(%qh, %root) @q_scale
  %ks = Mul(%kt, %root) @k_scale
  %bias = Where(%mask, %zero, %ninf) @bias
  %s = MatMul(%qs, %ks) @scores
  %z = Add(%s, %bias) @mask_add
  %p = Softmax(%z) {axis: -1} @softmax
)" + guard_lines + R"(  %o = MatMul(%g, %vh) @context
}
)";
}

}  // namespace

TEST_CASE("fuse-attention: sdpa's √scale on Q and K and its IsNaN guard, fully masked rows giving 0", "[attention]") {
  // Random boolean masks leave some rows with no key at all: the guard turns their NaN into 0,
  // and the fused kernel must give the same 0.
  auto [rewritten, attention] = ExpectAttention(Sdpa(), {{"B", 3}, {"S", 6}});
  CHECK(rewritten.Counter("nan_guards") == 1);
  CHECK(attention.nan_guard);
  CHECK(attention.q.prescale == Approx(0.7071068));
  CHECK(attention.k.prescale == Approx(0.7071068));
  CHECK(attention.mask_kind == AttentionMaskKind::kAdditive);
  // The mask's Where stays outside (computed once, read by every layer in a real model).
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"Where", "ai.fusionopt::FusedAttention"});
}

TEST_CASE("fuse-attention: a guard that is no NaN guard is left alone", "[attention]") {
  // Where(IsInf(p), 0, p) and Where(IsNaN(p), 1, p) mean something else: no attention here.
  for (const std::string& guard : {std::string("  %nan = IsInf(%p) @isnan\n  %g = Where(%nan, %zero, %p) @guard\n"),
                                   std::string("  %nan = IsNaN(%p) @isnan\n  %g = Where(%nan, %root, %p) @guard\n")}) {
    Rewritten rewritten = Rewrite(Sdpa(guard), kPass);
    CHECK(rewritten.Counter("attention") == 0);
  }
}

TEST_CASE("fuse-attention: a scale computed at run time on Q stays outside the fused node", "[attention]") {
  std::string text = Sdpa();
  text.replace(text.find("bool[B,1,1,S] %mask)"), 20, "bool[B,1,1,S] %mask, float[] %runtime)");
  text.replace(text.find("%qs = Mul(%qh, %root)"), 21, "%qs = Mul(%qh, %runtime)");
  auto [rewritten, attention] = ExpectAttention(text, {{"B", 2}, {"S", 5}});
  CHECK(attention.q.prescale == 1.0);
  CHECK(attention.k.prescale == Approx(0.7071068));
  const std::vector<std::string> outside = OpsOutside(rewritten);
  CHECK(std::count(outside.begin(), outside.end(), "Mul") == 1);
}

namespace {

// LLaMA-style: 4 query heads, 2 key/value heads of 8 features; rotary on Q (Slice halves) and K
// (Split halves) with [1,1,S,8] tables; K and V repeated by Unsqueeze / Expand / Reshape.
// `unsqueeze_axes` and `q_rotate` vary it for the near misses.
std::string GroupedRotary(const std::string& unsqueeze_axes = "[2]", const std::string& q_rotate = "%q2n, %q1") {
  return R"(ir_version 8
opset "" 18
graph main (float[2,4,5,8] %qh, float[2,2,5,8] %kh, float[2,2,5,8] %vh, float[1,1,5,8] %cos, float[1,1,5,8] %sin)
    -> (float[2,4,5,8] %o)
  init int64[1] %zero_i = [0]
  init int64[1] %half = [4]
  init int64[1] %end = [9223372036854775807]
  init int64[1] %last = [-1]
  init int64[2] %halves = [4, 4]
  init int64[1] %unsqueeze_axes = )" + unsqueeze_axes + R"(
  init int64[5] %expanded = [2, 2, 2, 5, 8]
  init int64[4] %merged = [2, 4, 5, 8]
  init float[] %divisor = [2.828427]
{
  %q_cos = Mul(%qh, %cos) @q_cos
  %q1 = Slice(%qh, %zero_i, %half, %last) @q_first
  %q2 = Slice(%qh, %half, %end, %last) @q_second
  %q2n = Neg(%q2) @q_neg
  %q_rot = Concat()" + q_rotate + R"() {axis: -1} @q_rotate
  %q_sin = Mul(%q_rot, %sin) @q_sin
  %qr = Add(%q_cos, %q_sin) @q_rotary
  %k_cos = Mul(%cos, %kh) @k_cos
  %k1, %k2 = Split(%kh, %halves) {axis: -1} @k_halves
  %k2n = Neg(%k2) @k_neg
  %k_rot = Concat(%k2n, %k1) {axis: 3} @k_rotate
  %k_sin = Mul(%sin, %k_rot) @k_sin
  %kr = Add(%k_sin, %k_cos) @k_rotary
  %ku = Unsqueeze(%kr, %unsqueeze_axes) @k_unsqueeze
  %ke = Expand(%ku, %expanded) @k_expand
  %kx = Reshape(%ke, %merged) @k_repeat
  %vu = Unsqueeze(%vh, %unsqueeze_axes) @v_unsqueeze
  %ve = Expand(%vu, %expanded) @v_expand
  %vx = Reshape(%ve, %merged) @v_repeat
  %kt = Transpose(%kx) {perm: [0, 1, 3, 2]} @key_transpose
  %s = MatMul(%qr, %kt) @scores
  %d = Div(%s, %divisor) @scale
  %p = Softmax(%d) {axis: -1} @softmax
  %o = MatMul(%p, %vx) @context
}
)";
}

}  // namespace

TEST_CASE("fuse-attention: grouped-query K and V repeats and rotary embedding on Q and K", "[attention]") {
  auto [rewritten, attention] = ExpectAttention(GroupedRotary());
  CHECK(rewritten.Counter("rotary") == 1);
  CHECK(rewritten.Counter("repeated_kv") == 1);
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
  REQUIRE(attention.q.rotary.has_value());
  REQUIRE(attention.k.rotary.has_value());
  CHECK(attention.q.rotary->half == 4);
  // The outliner passes the Split's sizes, the Expand and Reshape targets in as inputs (only
  // scalars stay in the body): the kernel reads and checks them each run.
  CHECK(attention.k.rotary->half == 0);
  CHECK(attention.k.rotary->split_sizes >= 0);
  CHECK_FALSE(attention.q.repeat.has_value());
  REQUIRE(attention.k.repeat.has_value());
  REQUIRE(attention.v.repeat.has_value());
  CHECK(attention.k.repeat->repeats == 0);
  CHECK(attention.k.layout == HeadLayout::kHeadsFirst);
}

namespace {

// Falcon-7B's attention: one projection [B,S,(H+2)·D] viewed as [B,S,H+2,D] and split along the
// heads into Q (2 heads), one K and one V head (multi-query, broadcast by the products), each
// moved heads first; the rotary turns Q and K after that Transpose.
std::string MultiQueryRotary() {
  return R"(ir_version 8
opset "" 18
graph main (float[2,5,16] %qkv, float[1,1,5,4] %cos, float[1,1,5,4] %sin) -> (float[2,5,8] %context)
  init int64[4] %heads = [2, 5, 4, 4]
  init int64[3] %head_sizes = [2, 1, 1]
  init int64[2] %halves = [2, 2]
  init int64[3] %merged = [2, 5, 8]
  init float[] %scale = [0.5]
{
  %view = Reshape(%qkv, %heads) @view
  %q0, %k0, %v0 = Split(%view, %head_sizes) {axis: 2} @split_heads
  %qh = Transpose(%q0) {perm: [0, 2, 1, 3]} @q_heads
  %kh = Transpose(%k0) {perm: [0, 2, 1, 3]} @k_heads
  %vh = Transpose(%v0) {perm: [0, 2, 1, 3]} @v_heads
  %q_cos = Mul(%qh, %cos) @q_cos
  %q1, %q2 = Split(%qh, %halves) {axis: -1} @q_halves
  %q2n = Neg(%q2) @q_neg
  %q_rot = Concat(%q2n, %q1) {axis: -1} @q_rotate
  %q_sin = Mul(%q_rot, %sin) @q_sin
  %qr = Add(%q_cos, %q_sin) @q_rotary
  %k_cos = Mul(%kh, %cos) @k_cos
  %k1, %k2 = Split(%kh, %halves) {axis: -1} @k_halves
  %k2n = Neg(%k2) @k_neg
  %k_rot = Concat(%k2n, %k1) {axis: -1} @k_rotate
  %k_sin = Mul(%k_rot, %sin) @k_sin
  %kr = Add(%k_cos, %k_sin) @k_rotary
  %qs = Mul(%qr, %scale) @q_scale
  %kt = Transpose(%kr) {perm: [0, 1, 3, 2]} @key_transpose
  %s = MatMul(%qs, %kt) @scores
  %p = Softmax(%s) {axis: -1} @softmax
  %o = MatMul(%p, %vh) @context_product
  %ot = Transpose(%o) {perm: [0, 2, 1, 3]} @merge_transpose
  %context = Reshape(%ot, %merged) @merge_reshape
}
)";
}

}  // namespace

TEST_CASE("fuse-attention: multi-query heads split from one projection, the rotary read through the view (Falcon)",
          "[attention]") {
  auto [rewritten, attention] = ExpectAttention(MultiQueryRotary());
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
  CHECK(rewritten.Counter("rotary") == 1);
  CHECK(attention.q.layout == HeadLayout::kView);
  CHECK(attention.k.layout == HeadLayout::kView);
  REQUIRE(attention.q.rotary.has_value());
  REQUIRE(attention.k.rotary.has_value());
  CHECK(attention.q.view.size() == 3);  // view, split, heads-first transpose
}

namespace {

// GPT-J's (and CodeGen's) rotary: rotate_every_two on the first 4 of each head's 8 features,
// in the [B,S,H,D] layout before the head split, with tables [B,S,1,4]. `q_stack` is Q's pair
// order (Neg of the odd features first is rotate_every_two).
std::string InterleavedPartialRotary(const std::string& q_stack = "%q_a, %q_b") {
  std::string text = R"(ir_version 8
opset "" 18
graph main (float[2,5,16] %q, float[2,5,16] %k, float[2,5,16] %v, float[2,5,1,4] %cos, float[2,5,1,4] %sin)
    -> (float[2,5,16] %context)
  init int64[4] %heads = [2, 5, 2, 8]
  init int64[2] %parts = [4, 4]
  init int64[1] %zero = [0]
  init int64[1] %one = [1]
  init int64[1] %end = [9223372036854775807]
  init int64[1] %last = [-1]
  init int64[1] %two = [2]
  init int64[4] %flat = [2, 5, 2, 4]
  init int64[3] %merged = [2, 5, 16]
  init float[] %scale = [0.35355338]
{
)";
  for (const std::string x : {"q", "k"}) {
    const std::string stack = x == "q" ? q_stack : "%k_a, %k_b";
    text += "  %" + x + "s = Reshape(%" + x + ", %heads) @" + x + "_split\n" +
            "  %" + x + "_rot, %" + x + "_pass = Split(%" + x + "s, %parts) {axis: -1} @" + x + "_parts\n" +
            "  %" + x + "_even = Slice(%" + x + "_rot, %zero, %end, %last, %two) @" + x + "_even\n" +
            "  %" + x + "_odd = Slice(%" + x + "_rot, %one, %end, %last, %two) @" + x + "_odd\n" +
            "  %" + x + "_neg = Neg(%" + x + "_odd) @" + x + "_neg\n" +
            "  %" + x + "_a = Unsqueeze(%" + x + "_neg, %last) @" + x + "_a\n" +
            "  %" + x + "_b = Unsqueeze(%" + x + "_even, %last) @" + x + "_b\n" +
            "  %" + x + "_stack = Concat(" + stack + ") {axis: -1} @" + x + "_stack\n" +
            "  %" + x + "_pairs = Reshape(%" + x + "_stack, %flat) @" + x + "_flatten\n" +
            "  %" + x + "_cos = Mul(%" + x + "_rot, %cos) @" + x + "_cos\n" +
            "  %" + x + "_sin = Mul(%" + x + "_pairs, %sin) @" + x + "_sin\n" +
            "  %" + x + "_turned = Add(%" + x + "_cos, %" + x + "_sin) @" + x + "_rotary\n" +
            "  %" + x + "_all = Concat(%" + x + "_turned, %" + x + "_pass) {axis: -1} @" + x + "_join\n";
  }
  return text + R"(  %qh = Transpose(%q_all) {perm: [0, 2, 1, 3]} @q_heads
  %kh = Transpose(%k_all) {perm: [0, 2, 3, 1]} @k_heads
  %vs = Reshape(%v, %heads) @v_split
  %vh = Transpose(%vs) {perm: [0, 2, 1, 3]} @v_heads
  %s = MatMul(%qh, %kh) @scores
  %d = Mul(%s, %scale) @scale_scores
  %p = Softmax(%d) {axis: -1} @softmax
  %o = MatMul(%p, %vh) @context_product
  %ot = Transpose(%o) {perm: [0, 2, 1, 3]} @merge_transpose
  %context = Reshape(%ot, %merged) @merge_reshape
}
)";
}

}  // namespace

TEST_CASE("fuse-attention: an interleaved rotary on a prefix, before the head split (GPT-J, CodeGen)", "[attention]") {
  auto [rewritten, attention] = ExpectAttention(InterleavedPartialRotary());
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
  CHECK(rewritten.Counter("rotary") == 1);
  for (const AttentionOperand* operand : {&attention.q, &attention.k}) {
    REQUIRE(operand->rotary.has_value());
    CHECK(operand->rotary->interleaved);
    CHECK(operand->rotary->partial);
    CHECK(operand->rotary->before_heads);
    CHECK(operand->layout == HeadLayout::kSplitHeads);
  }
}

TEST_CASE("fuse-attention: pairs stacked the other way round are no interleaved rotary", "[attention]") {
  // stack((x[..., ::2], −x[..., 1::2])) turns the other way: Q's stays outside, K's is taken.
  auto [rewritten, attention] = ExpectAttention(InterleavedPartialRotary("%q_b, %q_a"));
  CHECK_FALSE(attention.q.rotary.has_value());
  REQUIRE(attention.k.rotary.has_value());
  CHECK(attention.k.rotary->interleaved);
}

TEST_CASE("fuse-attention: a repeat on another axis and a rotation the other way stay outside", "[attention]") {
  // Unsqueeze at axis 1 repeats whole head blocks ([h0, h1, h0, h1]), not each head: no repeat.
  auto interleaved = ExpectAttention(GroupedRotary("[1]"));
  CHECK(interleaved.rewritten.Counter("repeated_kv") == 0);
  CHECK_FALSE(interleaved.attention.k.repeat.has_value());
  // Concat(x₁, Neg(x₂)) rotates the other way: no rotate_half; Q's stays outside, K's is taken.
  auto uneven = ExpectAttention(GroupedRotary("[2]", "%q1, %q2n"));
  CHECK_FALSE(uneven.attention.q.rotary.has_value());
  CHECK(uneven.attention.k.rotary.has_value());
}

TEST_CASE("fuse-attention: the opset-23 Attention node as the core, its head split and merge around it", "[attention]") {
  const std::string text = R"(ir_version 10
opset "" 23
graph main (float[B,S,8] %q, float[B,S,8] %k, float[B,S,8] %v, bool[B,1,1,S] %mask) -> (float[B,S,8] %context)
  init int64[4] %split = [0, 0, 2, 4]
  init int64[3] %merge = [0, 0, 8]
{
  %qr = Reshape(%q, %split) @q_reshape
  %qh = Transpose(%qr) {perm: [0, 2, 1, 3]} @q_transpose
  %kr = Reshape(%k, %split) @k_reshape
  %kh = Transpose(%kr) {perm: [0, 2, 1, 3]} @k_transpose
  %vr = Reshape(%v, %split) @v_reshape
  %vh = Transpose(%vr) {perm: [0, 2, 1, 3]} @v_transpose
  %o = Attention(%qh, %kh, %vh, %mask) {scale: 0.5, is_causal: 1, softcap: 3.0} @attention
  %ot = Transpose(%o) {perm: [0, 2, 1, 3]} @merge_transpose
  %context = Reshape(%ot, %merge) @merge_reshape
}
)";
  auto [rewritten, attention] = ExpectAttention(text, {{"B", 2}, {"S", 7}});
  CHECK(rewritten.Counter("attention_ops") == 1);
  CHECK(rewritten.Counter("head_merges") == 1);
  REQUIRE(attention.op.has_value());
  CHECK(attention.op->scale == Approx(0.5));
  CHECK(attention.op->causal);
  CHECK(attention.op->softcap == Approx(3.0));
  CHECK(attention.mask.input >= 0);  // boolean by its dtype at run time
  CHECK(attention.q.layout == HeadLayout::kSplitHeads);
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
}

namespace {

// nn.MultiheadAttention as torchvision's ViT runs it, sequence first: one packed in-projection
// [S,B,3E], unflattened to [S,B,3,E] (as [1,S,B,3,E]), moved to [3,S,B,E], squeezed and
// gathered into Q, K and V, each reshaped to [S,B·H,D], transposed to [B·H,S,D] and reshaped to
// [B,H,S,D]; the context transposed to [S,B,H,D] and reshaped to [S·B,E]. `k_index` varies the
// near miss (K gathered from Q's slot).
std::string PackedProjection(const std::string& k_index = "%one") {
  return R"(ir_version 8
opset "" 18
graph main (float[5,2,24] %packed) -> (float[10,8] %context)
  init int64[5] %unflatten = [1, 5, 2, 3, 8]
  init int64[1] %squeeze_axes = [3]
  init int64[] %zero = [0]
  init int64[] %one = [1]
  init int64[] %two = [2]
  init int64[3] %heads_shape = [5, 4, 4]
  init int64[4] %split = [2, 2, 5, 4]
  init int64[2] %merged = [-1, 8]
  init float[] %root = [0.7071068]
{
  %u = Reshape(%packed, %unflatten) @unflatten
  %t = Transpose(%u) {perm: [3, 1, 2, 0, 4]} @move
  %sq = Squeeze(%t, %squeeze_axes) @squeeze
  %q0 = Gather(%sq, %zero) {axis: 0} @select_q
  %k0 = Gather(%sq, )" + k_index + R"() {axis: 0} @select_k
  %v0 = Gather(%sq, %two) {axis: 0} @select_v
  %q1 = Reshape(%q0, %heads_shape) @q_view
  %q2 = Transpose(%q1) {perm: [1, 0, 2]} @q_transpose
  %q3 = Reshape(%q2, %split) @q_split
  %k1 = Reshape(%k0, %heads_shape) @k_view
  %k2 = Transpose(%k1) {perm: [1, 0, 2]} @k_transpose
  %k3 = Reshape(%k2, %split) @k_split
  %v1 = Reshape(%v0, %heads_shape) @v_view
  %v2 = Transpose(%v1) {perm: [1, 0, 2]} @v_transpose
  %v3 = Reshape(%v2, %split) @v_split
  %kt = Transpose(%k3) {perm: [0, 1, 3, 2]} @key_transpose
  %qs = Mul(%q3, %root) @q_scale
  %ks = Mul(%kt, %root) @k_scale
  %s = MatMul(%qs, %ks) @scores
  %p = Softmax(%s) {axis: -1} @softmax
  %o = MatMul(%p, %v3) @context_product
  %ot = Transpose(%o) {perm: [2, 0, 1, 3]} @merge_transpose
  %context = Reshape(%ot, %merged) @merge_reshape
}
)";
}

}  // namespace

TEST_CASE("fuse-attention: torchvision's packed in-projection read through its layout ops, merged sequence first",
          "[attention]") {
  auto [rewritten, attention] = ExpectAttention(PackedProjection());
  CHECK(rewritten.Counter("layout_views") == 1);
  CHECK(rewritten.Counter("head_merges") == 1);
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
  CHECK(attention.q.layout == HeadLayout::kView);
  CHECK(attention.k.layout == HeadLayout::kView);
  CHECK(attention.v.layout == HeadLayout::kView);
  CHECK(attention.q.view.size() == 7);  // unflatten, move, squeeze, gather, view, transpose, split
  CHECK(attention.merge_perm == std::vector<int64_t>{2, 0, 1, 3});
}

TEST_CASE("fuse-attention: layout views are only as good as the run's shapes; K from Q's slot still computes K·K", "[attention]") {
  // K gathered from slot 0 as Q is: still attention (of Q with itself), read through views.
  auto [rewritten, attention] = ExpectAttention(PackedProjection("%zero"));
  CHECK(attention.k.layout == HeadLayout::kView);
}

namespace {

// nn.MultiheadAttention with need_weights, once unflatten-batch-matmuls gave its [S,B·H,D]
// bmm the heads: each of Q, K, V gathered from the packed in-projection [S,B,E], split to
// [S,B,H,D] and moved to [B,H,S,D] ([B,H,D,S] for K) by one Transpose, sequence first.
// `q_source` replaces Q's split (a graph input then, not a layout op).
std::string SequenceFirstHeads(const std::string& q_split = "  %q1 = Reshape(%q0, %heads) @q_split\n") {
  return R"(ir_version 8
opset "" 18
graph main (float[5,2,24] %packed, float[5,2,2,4] %q_input) -> (float[10,8] %context)
  init int64[5] %unflatten = [1, 5, 2, 3, 8]
  init int64[1] %squeeze_axes = [3]
  init int64[] %zero = [0]
  init int64[] %one = [1]
  init int64[] %two = [2]
  init int64[4] %heads = [5, 2, 2, 4]
  init int64[2] %merged = [-1, 8]
  init float[] %scale = [0.5]
{
  %u = Reshape(%packed, %unflatten) @unflatten
  %t = Transpose(%u) {perm: [3, 1, 2, 0, 4]} @move
  %sq = Squeeze(%t, %squeeze_axes) @squeeze
  %q0 = Gather(%sq, %zero) {axis: 0} @select_q
  %k0 = Gather(%sq, %one) {axis: 0} @select_k
  %v0 = Gather(%sq, %two) {axis: 0} @select_v
)" + q_split + R"(  %qh = Transpose(%q1) {perm: [1, 2, 0, 3]} @q_heads
  %k1 = Reshape(%k0, %heads) @k_split
  %kh = Transpose(%k1) {perm: [1, 2, 3, 0]} @k_heads
  %v1 = Reshape(%v0, %heads) @v_split
  %vh = Transpose(%v1) {perm: [1, 2, 0, 3]} @v_heads
  %qs = Mul(%qh, %scale) @q_scale
  %s = MatMul(%qs, %kh) @scores
  %p = Softmax(%s) {axis: -1} @softmax
  %o = MatMul(%p, %vh) @context_product
  %ot = Transpose(%o) {perm: [2, 0, 1, 3]} @merge_transpose
  %context = Reshape(%ot, %merged) @merge_reshape
}
)";
}

}  // namespace

TEST_CASE("fuse-attention: heads split sequence first by one Transpose are read through their layout ops", "[attention]") {
  auto [rewritten, attention] = ExpectAttention(SequenceFirstHeads());
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
  CHECK(attention.q.layout == HeadLayout::kView);
  CHECK(attention.k.layout == HeadLayout::kView);
  CHECK(attention.v.layout == HeadLayout::kView);
  CHECK(attention.k.view.size() == 6);  // unflatten, move, squeeze, gather, split, transpose
}

TEST_CASE("fuse-attention: a sequence-first head split of a tensor no layout op computes is left alone", "[attention]") {
  Rewritten kept = Rewrite(SequenceFirstHeads("  %q1 = Identity(%q_input) @q_given\n"), kPass);
  CHECK(kept.Counter("attention") == 0);
  CHECK(kept.run.Rejections("attention: query: transpose perm [1, 2, 0, 3] is not the head split's [0, 2, 1, 3]") == 1);
}

namespace {

// The addressing every runtime reads the fused node's operands with, at the call's static shapes.
std::optional<AttentionLayout> LayoutOfCall(const Rewritten& rewritten, const FusedAttention& attention) {
  const Node* call = nullptr;
  for (const auto& node : rewritten.model->graph->nodes()) {
    if (node->op_type() == "FusedAttention") call = node.get();
  }
  REQUIRE(call != nullptr);
  AttentionInputs inputs;
  inputs.dims = [call](int input) -> std::optional<std::vector<int64_t>> {
    const auto& shape = call->input(static_cast<size_t>(input))->shape();
    if (!shape) return std::nullopt;
    std::vector<int64_t> dims;
    for (const Dim& dim : *shape) dims.push_back(dim.value);
    return dims;
  };
  inputs.values = [call](int input) -> std::optional<std::vector<int64_t>> {
    TensorPtr tensor = ConstantValueOf(*call->input(static_cast<size_t>(input)), InitializerRule::kFeedsOverride);
    return tensor != nullptr ? tensor->AsInt64s() : std::nullopt;
  };
  return LayOutAttention(attention, inputs);
}

}  // namespace

TEST_CASE("fuse-attention: timm's packed qkv unbound by a Split is read in place, one slot each", "[attention]") {
  for (const std::string& split : {std::string("  %qs0, %ks0, %vs0 = Split(%t) {axis: 0, num_outputs: 3} @unbind\n"),
                                   std::string("  %qs0, %ks0, %vs0 = Split(%t, %thirds) {axis: 0} @unbind\n")}) {
    auto [rewritten, attention] = ExpectAttention(attention_test::TimmUnbind(split));
    CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
    CHECK(attention.q.layout == HeadLayout::kView);
    REQUIRE(attention.v.view.size() == 4);  // unflatten, move, the Split's slot, squeeze
    CHECK(attention.v.view[2].kind == AttentionViewStep::Kind::kSplit);
    CHECK(attention.v.view[2].index == 2);
    std::optional<AttentionLayout> layout = LayoutOfCall(rewritten, attention);
    REQUIRE(layout.has_value());
    // [B,N,3,H,D] = [2,5,3,2,4] in place: slot s at s·H·D, heads D apart, rows 3·H·D apart.
    for (auto [operand, slot] : {std::pair{&layout->q, 0}, std::pair{&layout->k, 1}, std::pair{&layout->v, 2}}) {
      CHECK(operand->offset == slot * 8);
      CHECK(operand->head_stride == 4);
      CHECK(operand->row_stride == 24);
      CHECK(operand->batch_stride == 120);
      CHECK(operand->column_stride == 1);
    }
  }
}

TEST_CASE("fuse-attention: a Split of the packed qkv read elsewhere stays outside; sizes fed at run time do not",
          "[attention]") {
  // A slot also read outside: the Split and its slots stay outside the fused node.
  std::string shared = attention_test::TimmUnbind("  %qs0, %ks0, %vs0 = Split(%t) {axis: 0, num_outputs: 3} @unbind\n",
                                  "float[2,5,8] %context, float[1,2,2,5,4] %vs0");
  Rewritten rewritten = Rewrite(shared, kPass);
  REQUIRE(rewritten.Counter("attention") == 1);
  ExpectSameNumbers(*rewritten.original, *rewritten.model, Inlined({}));
  const std::vector<std::string> outside = OpsOutside(rewritten);
  CHECK(std::count(outside.begin(), outside.end(), "Split") == 1);
  // Sizes fed at run time are read then, as a Reshape's target is: still one fused node.
  std::string fed = attention_test::TimmUnbind("  %qs0, %ks0, %vs0 = Split(%t, %sizes) {axis: 0} @unbind\n");
  fed.replace(fed.find("(float[2,5,24] %packed)"), 23, "(float[2,5,24] %packed, int64[3] %sizes)");
  rewritten = Rewrite(fed, kPass);
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
}

namespace {

// MPT's eager attention: the scaled scores plus the ALiBi bias (slopes × key positions,
// [1,H,1,S], computed once for every layer), then the padding/causal mask as a Where with the
// dtype's minimum, Softmax, the context. `bias_type` is the bias's type in the graph inputs.
std::string Alibi(const std::string& bias_type = "float[1,2,1,S]") {
  return R"(ir_version 8
opset "" 18
graph main (float[B,2,S,4] %qh, float[B,2,S,4] %kh, float[B,2,S,4] %vh, )" + bias_type + R"( %alibi, bool[B,1,S,S] %masked) -> (float %o)
  init float[] %scale = [0.5]
  init float[] %lowest = [-3.4028235e38]
{
  %kt = Transpose(%kh) {perm: [0, 1, 3, 2]} @key_transpose
  %s = MatMul(%qh, %kt) @scores
  %scaled = Mul(%s, %scale) @scale
  %biased = Add(%scaled, %alibi) @alibi_add
  %z = Where(%masked, %lowest, %biased) @masked_fill
  %p = Softmax(%z) {axis: -1} @softmax
  %o = MatMul(%p, %vh) @context
}
)";
}

}  // namespace

TEST_CASE("fuse-attention: an ALiBi bias added before the mask is the fused node's score bias", "[attention]") {
  auto [rewritten, attention] = ExpectAttention(Alibi(), {{"B", 2}, {"S", 7}});
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
  CHECK(attention.bias.present());
  CHECK(attention.mask_kind == AttentionMaskKind::kBoolean);
  // The bias's strides broadcast it over the batch and the queries.
  AttentionInputs inputs;
  const std::vector<std::vector<int64_t>> dims = {{2, 2, 7, 4}, {2, 2, 7, 4}, {2, 2, 7, 4}, {1, 2, 1, 7}, {2, 1, 7, 7}};
  const Node* call = rewritten.model->graph->nodes().back().get();
  inputs.dims = [&](int input) -> std::optional<std::vector<int64_t>> {
    const std::string& name = call->input(static_cast<size_t>(input))->name();
    const std::vector<std::string> order = {"qh", "kh", "vh", "alibi", "masked"};
    for (size_t i = 0; i < order.size(); ++i) {
      if (order[i] == name) return dims[i];
    }
    return std::nullopt;
  };
  inputs.values = [](int) { return std::optional<std::vector<int64_t>>(); };
  std::optional<AttentionLayout> layout = LayOutAttention(attention, inputs);
  REQUIRE(layout.has_value());
  REQUIRE(layout->bias_strides.has_value());
  CHECK(*layout->bias_strides == std::array<int64_t, 4>{0, 7, 0, 1});
  CHECK(*layout->mask_strides == std::array<int64_t, 4>{49, 0, 7, 1});
}

TEST_CASE("fuse-attention: a score bias that widens the scores is left alone", "[attention]") {
  // 3 heads against the scores' 2: the bias would widen them.
  Rewritten rewritten = Rewrite(Alibi("float[1,3,1,S]"), kPass);
  CHECK(rewritten.Counter("attention") == 0);
  CHECK(rewritten.run.Rejections("attention: the score bias does not broadcast to the scores") == 1);
}

TEST_CASE("fuse-attention: float16 scores cast to float32 for the bias, mask and softmax, and back", "[attention]") {
  // MPT in float16: Q·Kᵀ scaled in 16 bits, cast to float32, the float32 ALiBi bias and the
  // mask, Softmax, the probabilities cast back to float16 for the product with V. The kernel
  // never rounds the scores to 16 bits: a float16 tolerance against the op-by-op original.
  std::string text = Alibi();
  for (const char* operand : {"float[B,2,S,4] %qh", "float[B,2,S,4] %kh", "float[B,2,S,4] %vh"}) {
    std::string half = operand;
    half.replace(0, 5, "float16");
    text.replace(text.find(operand), std::string(operand).size(), half);
  }
  text.replace(text.find("init float[] %scale"), 19, "init float16[] %scale");
  text.replace(text.find("  %biased = Add(%scaled, %alibi)"), 32,
               "  %upcast = Cast(%scaled) {to: 1} @upcast\n  %biased = Add(%upcast, %alibi)");
  text.replace(text.find("  %o = MatMul(%p, %vh)"), 22, "  %ph = Cast(%p) {to: 10} @downcast\n  %o = MatMul(%ph, %vh)");
  auto [rewritten, attention] = ExpectAttention(text, {{"B", 2}, {"S", 7}}, {2e-2, 4e-3});
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
  CHECK(attention.bias.present());
  // The cast probabilities also read outside: the core is not the attention's alone.
  std::string read = text;
  read.replace(read.find("-> (float %o)"), 13, "-> (float %o, float16 %ph)");
  Rewritten kept = Rewrite(read, kPass);
  CHECK(kept.Counter("attention") == 0);
  CHECK(kept.run.Rejections("attention: a graph output is inside the pattern") +
            kept.run.Rejections("attention: an intermediate is read outside the pattern") == 1);
}

namespace {

// rotate_half's rotary of %<x> into %<p>r: x·cos + Concat(Neg(x₂), x₁)·sin, halves by Split.
std::string RotateHalfLines(const std::string& p, const std::string& x) {
  return "  %" + p + "_cos = Mul(%" + x + ", %cos) @" + p + "_cos\n" +
         "  %" + p + "1, %" + p + "2 = Split(%" + x + ", %halves) {axis: 3} @" + p + "_halves\n" +
         "  %" + p + "2n = Neg(%" + p + "2) @" + p + "_neg\n" +
         "  %" + p + "_turn = Concat(%" + p + "2n, %" + p + "1) {axis: -1} @" + p + "_rotate\n" +
         "  %" + p + "_sin = Mul(%" + p + "_turn, %sin) @" + p + "_sin\n" +
         "  %" + p + "r = Add(%" + p + "_cos, %" + p + "_sin) @" + p + "_rotary\n";
}

// Phi / GPT-NeoX: rotary on the first 4 of each head's 8 features (the halves of that prefix
// by Split), the other 4 passed through and concatenated back; [1,1,S,4] tables. `split` names
// Q's two parts and `concat` joins them back, for the near misses.
std::string PartialRotary(const std::string& split = "%q_rot, %q_pass", const std::string& concat = "%qr, %q_pass") {
  return R"(ir_version 8
opset "" 18
graph main (float[2,2,5,8] %qh, float[2,2,5,8] %kh, float[2,2,5,8] %vh, float[1,1,5,4] %cos, float[1,1,5,4] %sin)
    -> (float[2,2,5,8] %o)
  init int64[2] %part = [4, 4]
  init int64[2] %halves = [2, 2]
  init float[] %scale = [0.35355338]
{
  )" + split + R"( = Split(%qh, %part) {axis: 3} @q_part
)" + RotateHalfLines("q", "q_rot") + "  %qp = Concat(" + concat + R"() {axis: -1} @q_join
  %k_rot, %k_pass = Split(%kh, %part) {axis: 3} @k_part
)" + RotateHalfLines("k", "k_rot") + R"(  %kp = Concat(%kr, %k_pass) {axis: -1} @k_join
  %kt = Transpose(%kp) {perm: [0, 1, 3, 2]} @key_transpose
  %s = MatMul(%qp, %kt) @scores
  %z = Mul(%s, %scale) @scale_mul
  %p = Softmax(%z) {axis: -1} @softmax
  %o = MatMul(%p, %vh) @context
}
)";
}

}  // namespace

TEST_CASE("fuse-attention: rotary on a prefix of each head, the rest passed through", "[attention]") {
  auto [rewritten, attention] = ExpectAttention(PartialRotary());
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
  for (const AttentionOperand* operand : {&attention.q, &attention.k}) {
    REQUIRE(operand->rotary.has_value());
    CHECK(operand->rotary->partial);
  }
  std::optional<AttentionLayout> layout = LayoutOfCall(rewritten, attention);
  REQUIRE(layout.has_value());
  REQUIRE(layout->q_rotary.has_value());
  CHECK(layout->q_rotary->dims == 4);
  CHECK(layout->k_rotary->dims == 4);
}

TEST_CASE("fuse-attention: a partial rotary whose Split cuts even halves (num_outputs) turns the first half", "[attention]") {
  std::string text = PartialRotary();
  const std::string sized = "Split(%kh, %part) {axis: 3}";
  text.replace(text.find(sized), sized.size(), "Split(%kh) {axis: 3, num_outputs: 2}");
  auto [rewritten, attention] = ExpectAttention(text);
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
  REQUIRE(attention.k.rotary.has_value());
  CHECK(attention.k.rotary->partial);
  CHECK_FALSE(attention.k.rotary->part_sizes.present());
  std::optional<AttentionLayout> layout = LayoutOfCall(rewritten, attention);
  REQUIRE(layout.has_value());
  CHECK(layout->k_rotary->dims == 4);
}

TEST_CASE("fuse-attention: a rotary over a slice that is not the head's prefix stays outside", "[attention]") {
  // Q's rotary turns the second part of the head, concatenated in front of the first: a
  // rotary over a slice that is not the prefix. Q's stays outside, K's is taken.
  auto suffix = ExpectAttention(PartialRotary("%q_pass, %q_rot"));
  CHECK_FALSE(suffix.attention.q.rotary.has_value());
  CHECK(suffix.attention.k.rotary.has_value());
  // The prefix turned but joined after the rest: no partial form either.
  auto behind = ExpectAttention(PartialRotary("%q_rot, %q_pass", "%q_pass, %qr"));
  CHECK_FALSE(behind.attention.q.rotary.has_value());
}

TEST_CASE("fuse-attention: a partial rotary on Q and K read through a packed projection's view", "[attention]") {
  // GPT-NeoX: Q, K and V are thirds of one packed [B,H,S,3D] value; the chain beneath each
  // rotary is a view of it, ending at the heads-first value the rotary turns.
  std::string text = PartialRotary();
  const std::string separate = "(float[2,2,5,8] %qh, float[2,2,5,8] %kh, float[2,2,5,8] %vh,";
  text.replace(text.find(separate), separate.size(), "(float[2,2,5,24] %packed,");
  text.replace(text.find("  init int64[2] %part"), 21, "  init int64[3] %thirds = [8, 8, 8]\n  init int64[2] %part");
  text.replace(text.find("{\n"), 2, "{\n  %qh, %kh, %vh = Split(%packed, %thirds) {axis: 3} @unpack\n");
  auto [rewritten, attention] = ExpectAttention(text);
  CHECK(OpsOutside(rewritten) == std::vector<std::string>{"ai.fusionopt::FusedAttention"});
  CHECK(attention.q.layout == HeadLayout::kView);
  CHECK(attention.k.layout == HeadLayout::kView);
  REQUIRE(attention.k.rotary.has_value());
  CHECK(attention.k.rotary->partial);
  std::optional<AttentionLayout> layout = LayoutOfCall(rewritten, attention);
  REQUIRE(layout.has_value());
  for (auto [operand, third] : {std::pair{&layout->q, 0}, std::pair{&layout->k, 1}, std::pair{&layout->v, 2}}) {
    CHECK(operand->offset == third * 8);
    CHECK(operand->row_stride == 24);
    CHECK(operand->column_stride == 1);
  }
  CHECK(layout->k_rotary->dims == 4);
}

TEST_CASE("fuse-attention: a match whose outlined body no runtime would recognise is left alone", "[attention]") {
  // Rotary "tables" that are scalar constants: the outliner copies them into the body, where the
  // kernels cannot read them as tables. Outlined, the node would run op by op: not fused.
  std::string text = GroupedRotary();
  const std::string tables = ", float[1,1,5,8] %cos, float[1,1,5,8] %sin)";
  text.replace(text.find(tables), tables.size(), ")");
  text.replace(text.find("  init int64[1] %zero_i"), 23, "  init float[] %cos = [0.5]\n  init float[] %sin = [0.25]\n  init int64[1] %zero_i");
  Rewritten rewritten = Rewrite(text, kPass);
  CHECK(rewritten.Counter("attention") == 0);
  CHECK(rewritten.run.Rejections("attention: the outlined body would not be recognised as attention (run op by op)") == 1);
  ExpectSameNumbers(*rewritten.original, *rewritten.model, Inlined({}));
}
