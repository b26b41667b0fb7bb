// fuse-attention: BERT (three projections, additive padding mask), the same after the Q/K/V
// projections merged into one Split, GPT-2 (combined QKV Split, causal Where, Shape reads of the
// heads rewired) and ViT (no mask) outlined into one FusedAttention node each — the rewritten
// graph with its body, the body recognised, and the same numbers inlined and run with the fused
// kernel — and the near misses left alone with their reasons.
#include <catch2/catch.hpp>

#include "attention_test_models.h"
#include "cpu_runtime/compare.h"
#include "fusion_test_util.h"
#include "ir/attention_pattern.h"
#include "ir/text_format.h"

using namespace fusionopt;
using namespace fusionopt::fusion_test;
using namespace fusionopt::attention_test;

namespace {

constexpr const char* kPass = "fuse-attention";

// BERT's body as the outliner writes it: the K, V and Q head splits (the inputs in first-use
// order) with the chains computing their targets, the core, the head merge; scalars inlined.
const char* kBertBody = R"(function ai.fusionopt::FusedAttention (%x0, %x1, %x2, %x3) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Shape(%x0)
  %c0 = Constant() {value: tensor int64[] [0]}
  %t1 = Gather(%t0, %c0) {axis: 0}
  %c1 = Constant() {value: tensor int64[1] [0]}
  %t2 = Unsqueeze(%t1, %c1)
  %c2 = Constant() {value: tensor int64[] [1]}
  %t3 = Gather(%t0, %c2) {axis: 0}
  %t4 = Unsqueeze(%t3, %c1)
  %c3 = Constant() {value: tensor int64[1] [2]}
  %c4 = Constant() {value: tensor int64[1] [4]}
  %t5 = Concat(%t2, %t4, %c3, %c4) {axis: 0}
  %t6 = Reshape(%x0, %t5)
  %t7 = Transpose(%t6) {perm: [0, 2, 3, 1]}
  %t8 = Shape(%x1)
  %t9 = Gather(%t8, %c0) {axis: 0}
  %t10 = Unsqueeze(%t9, %c1)
  %t11 = Gather(%t8, %c2) {axis: 0}
  %t12 = Unsqueeze(%t11, %c1)
  %t13 = Concat(%t10, %t12, %c3, %c4) {axis: 0}
  %t14 = Reshape(%x1, %t13)
  %t15 = Transpose(%t14) {perm: [0, 2, 1, 3]}
  %t16 = Shape(%x2)
  %t17 = Gather(%t16, %c0) {axis: 0}
  %t18 = Unsqueeze(%t17, %c1)
  %t19 = Gather(%t16, %c2) {axis: 0}
  %t20 = Unsqueeze(%t19, %c1)
  %t21 = Concat(%t18, %t20, %c3, %c4) {axis: 0}
  %t22 = Reshape(%x2, %t21)
  %t23 = Transpose(%t22) {perm: [0, 2, 1, 3]}
  %t24 = MatMul(%t23, %t7)
  %c5 = Constant() {value: tensor float[] [2.0]}
  %t25 = Div(%t24, %c5)
  %t26 = Add(%t25, %x3)
  %t27 = Softmax(%t26) {axis: -1}
  %t28 = MatMul(%t27, %t15)
  %t29 = Transpose(%t28) {perm: [0, 2, 1, 3]}
  %t30 = Shape(%t29)
  %t31 = Gather(%t30, %c0) {axis: 0}
  %t32 = Unsqueeze(%t31, %c1)
  %t33 = Gather(%t30, %c2) {axis: 0}
  %t34 = Unsqueeze(%t33, %c1)
  %c6 = Constant() {value: tensor int64[1] [8]}
  %t35 = Concat(%t32, %t34, %c6) {axis: 0}
  %y0 = Reshape(%t29, %t35)
}
)";

std::string FusedNodesOf(const std::vector<std::string>& names) {
  std::string text = "[";
  for (size_t i = 0; i < names.size(); ++i) text += (i ? ", \"" : "\"") + names[i] + "\"";
  return text + "]";
}

std::vector<std::string> ChainNames(const std::string& name) {
  return {name + "_shape", name + "_gather_b", name + "_unsqueeze_b", name + "_gather_s", name + "_unsqueeze_s",
          name + "_concat", name + "_reshape", name + "_transpose"};
}

// The outlined function is recognised as attention, and the fused model runs the kernel and
// computes the original's numbers.
FusedAttention ExpectRecognisedAndClose(const Rewritten& fused, const std::map<std::string, int64_t>& symbols) {
  const Function* function = fused.model->FindFunction(kFusionDomain, "FusedAttention");
  REQUIRE(function != nullptr);
  INFO(PrintGraph(*function->body));
  std::optional<FusedAttention> attention = RecognizeAttention(*function);
  REQUIRE(attention.has_value());
  const OpenDims dims{symbols};
  auto expected = RunOnCpu(*fused.original, dims);
  auto actual = RunOnCpu(*fused.model, dims);
  ExpectClose(actual, expected, {1e-5, 1e-6});
  return *attention;
}

}  // namespace

TEST_CASE("fuse-attention: BERT's self-attention with three projections and a padding mask", "[attention]") {
  std::vector<std::string> members = ChainNames("k");
  for (const auto& name : ChainNames("v")) members.push_back(name);
  for (const auto& name : ChainNames("q")) members.push_back(name);
  for (const char* name : {"scores", "div", "mask", "softmax", "context", "merge_transpose", "merge_shape",
                           "merge_gather_b", "merge_unsqueeze_b", "merge_gather_s", "merge_unsqueeze_s", "merge_concat",
                           "merge_reshape"}) {
    members.push_back(name);
  }
  const std::string expected = kHeader + "opset \"ai.fusionopt\" 1\n" +
                               "graph main (float[B,S,8] %q, float[B,S,8] %k, float[B,S,8] %v, float[B,1,1,S] %mask) -> "
                               "(float[B,S,8] %context)\n{\n  %context = ai.fusionopt::FusedAttention(%k, %v, %q, %mask) "
                               "{fused_nodes: " +
                               FusedNodesOf(members) + "} @FusedAttention\n}\n\n" + kBertBody;
  Rewritten fused = ExpectFused(Bert(), kPass, expected, {}, {{"B", 2}, {"S", 7}});
  CHECK(fused.Counter("attention") == 1);
  CHECK(fused.Counter("additive_masks") == 1);
  CHECK(fused.Counter("head_splits") == 1);
  CHECK(fused.Counter("head_merges") == 1);
  CHECK(fused.Counter("combined_qkv") == 0);
  REQUIRE(fused.run.fusions.size() == 1);
  CHECK(fused.run.fusions[0].kind == "attention");

  FusedAttention attention = ExpectRecognisedAndClose(fused, {{"B", 2}, {"S", 7}});
  CHECK(attention.q.layout == HeadLayout::kSplitHeads);
  CHECK(attention.q.input == 2);
  CHECK(attention.k.input == 0);
  CHECK(attention.v.input == 1);
  CHECK_FALSE(attention.combined);
  CHECK(attention.scale == 2.0);
  CHECK(attention.scale_divides);
  CHECK(attention.mask_kind == AttentionMaskKind::kAdditive);
  CHECK(attention.mask.input == 3);
  REQUIRE(attention.merge.has_value());
  REQUIRE(attention.q.split.has_value());
  REQUIRE(attention.q.split->parts.size() == 4);
  CHECK(attention.q.split->parts[0].kind == ShapePartMatch::Kind::kDimOf);
  CHECK(attention.q.split->parts[0].of.kind == AttentionDimSource::Kind::kInput);
  CHECK(attention.q.split->parts[1].axis == 1);
  CHECK(attention.q.split->parts[3].constant == std::vector<int64_t>{4});
  CHECK(attention.merge->parts[0].of.kind == AttentionDimSource::Kind::kMergedContext);
}

namespace {

std::vector<std::string> CombinedMembers() {
  std::vector<std::string> members = {"split"};
  for (const char* name : {"q", "k", "v"}) {
    for (const auto& chain : ChainNames(name)) members.push_back(chain);
  }
  for (const char* name : {"scores", "div", "mask", "softmax", "context", "merge_transpose", "merge_shape",
                           "merge_gather_b", "merge_unsqueeze_b", "merge_gather_s", "merge_unsqueeze_s", "merge_concat",
                           "merge_reshape"}) {
    members.push_back(name);
  }
  return members;
}

// The body of a combined-projection attention; `mask` is its masking node (and its constant).
std::string CombinedBody(const std::string& mask) {
  const std::string width = mask.find("%c6") != std::string::npos ? "%c7" : "%c6";  // the next constant
  return R"(function ai.fusionopt::FusedAttention (%x0, %x1, %x2) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0, %t1, %t2 = Split(%x0, %x1) {axis: 2}
  %t3 = Shape(%t0)
  %c0 = Constant() {value: tensor int64[] [0]}
  %t4 = Gather(%t3, %c0) {axis: 0}
  %c1 = Constant() {value: tensor int64[1] [0]}
  %t5 = Unsqueeze(%t4, %c1)
  %c2 = Constant() {value: tensor int64[] [1]}
  %t6 = Gather(%t3, %c2) {axis: 0}
  %t7 = Unsqueeze(%t6, %c1)
  %c3 = Constant() {value: tensor int64[1] [2]}
  %c4 = Constant() {value: tensor int64[1] [4]}
  %t8 = Concat(%t5, %t7, %c3, %c4) {axis: 0}
  %t9 = Reshape(%t0, %t8)
  %t10 = Transpose(%t9) {perm: [0, 2, 1, 3]}
  %t11 = Shape(%t1)
  %t12 = Gather(%t11, %c0) {axis: 0}
  %t13 = Unsqueeze(%t12, %c1)
  %t14 = Gather(%t11, %c2) {axis: 0}
  %t15 = Unsqueeze(%t14, %c1)
  %t16 = Concat(%t13, %t15, %c3, %c4) {axis: 0}
  %t17 = Reshape(%t1, %t16)
  %t18 = Transpose(%t17) {perm: [0, 2, 3, 1]}
  %t19 = Shape(%t2)
  %t20 = Gather(%t19, %c0) {axis: 0}
  %t21 = Unsqueeze(%t20, %c1)
  %t22 = Gather(%t19, %c2) {axis: 0}
  %t23 = Unsqueeze(%t22, %c1)
  %t24 = Concat(%t21, %t23, %c3, %c4) {axis: 0}
  %t25 = Reshape(%t2, %t24)
  %t26 = Transpose(%t25) {perm: [0, 2, 1, 3]}
  %t27 = MatMul(%t10, %t18)
  %c5 = Constant() {value: tensor float[] [2.0]}
  %t28 = Div(%t27, %c5)
)" + mask + R"(  %t30 = Softmax(%t29) {axis: -1}
  %t31 = MatMul(%t30, %t26)
  %t32 = Transpose(%t31) {perm: [0, 2, 1, 3]}
  %t33 = Shape(%t32)
  %t34 = Gather(%t33, %c0) {axis: 0}
  %t35 = Unsqueeze(%t34, %c1)
  %t36 = Gather(%t33, %c2) {axis: 0}
  %t37 = Unsqueeze(%t36, %c1)
  )" + width + R"( = Constant() {value: tensor int64[1] [8]}
  %t38 = Concat(%t35, %t37, )" + width + R"() {axis: 0}
  %y0 = Reshape(%t32, %t38)
}
)";
}

}  // namespace

TEST_CASE("fuse-attention: GPT-2's combined QKV Split and causal Where; the mask's Shape reads rewired", "[attention]") {
  // Shape(qh)[2] and Shape(kt)[3] are S of the projection: the Transposes' perms lead to the
  // head split's target entry 1, which the chain reads from the Split output's dim 1, which is
  // the projection's dim 1 (not the split axis).
  const std::string expected = kHeader + "opset \"ai.fusionopt\" 1\n" +
                               "graph main (float[B,S,24] %qkv) -> (float[B,S,8] %context)\n" +
                               "  init int64[1] %axes0 = [0]\n  init int64[3] %sizes = [8, 8, 8]\n" +
                               "  init int64[1] %axis2 = [2]\n  init int64[1] %axis3 = [3]\n  init int64[1] %step = [1]\n" +
                               CausalBuffer(8) + R"(  init int64[] %query_length_index = [1]
  init int64[] %key_length_index = [1]
{
  %qkv_shape = Shape(%qkv) @query_length_shape_1
  %query_length = Gather(%qkv_shape, %query_length_index) {axis: 0} @query_length
  %qkv_shape_1 = Shape(%qkv) @key_length_shape_1
  %key_length = Gather(%qkv_shape_1, %key_length_index) {axis: 0} @key_length
  %offset = Sub(%key_length, %query_length) @offset
  %start = Unsqueeze(%offset, %axes0) @start
  %end = Unsqueeze(%key_length, %axes0) @end
  %rows = Slice(%causal, %start, %end, %axis2, %step) @rows
  %allowed = Slice(%rows, %axes0, %end, %axis3, %step) @allowed
  %context = ai.fusionopt::FusedAttention(%qkv, %sizes, %allowed) {fused_nodes: )" +
                               FusedNodesOf(CombinedMembers()) + "} @FusedAttention\n}\n\n" +
                               CombinedBody("  %c6 = Constant() {value: tensor float[] [-3.4028235e+38]}\n"
                                            "  %t29 = Where(%x2, %t28, %c6)\n");
  Rewritten fused = ExpectFused(Combined(true), kPass, expected, {}, {{"B", 2}, {"S", 8}});
  CHECK(fused.Counter("shape_reads_rewired") == 2);
  CHECK(fused.Counter("combined_qkv") == 1);
  CHECK(fused.Counter("causal_masks") == 1);
  FusedAttention attention = ExpectRecognisedAndClose(fused, {{"B", 2}, {"S", 8}});
  CHECK(attention.combined);
  CHECK(attention.combined_input == 0);
  CHECK(attention.split_sizes.input == 1);
  CHECK(attention.split_outputs == 3);
  CHECK(attention.q.split_output == 0);
  CHECK(attention.k.split_output == 1);
  CHECK(attention.v.split_output == 2);
  CHECK(attention.q.split->parts[0].of.kind == AttentionDimSource::Kind::kSplitOutput);
  CHECK(attention.mask_kind == AttentionMaskKind::kBoolean);
  CHECK(attention.mask.input == 2);
  CHECK_FALSE(attention.fill_when_true);
  CHECK(attention.fill == Approx(-3.4028235e+38));
  // Shorter queries than the buffer, and a batch of one.
  ExpectRecognisedAndClose(fused, {{"B", 1}, {"S", 5}});
}

TEST_CASE("fuse-attention: BERT after fuse-horizontal-contractions, Q/K/V from one Split", "[attention]") {
  const std::string expected = kHeader + "opset \"ai.fusionopt\" 1\n" +
                               "graph main (float[B,S,24] %qkv, float[B,1,1,S] %mask) -> (float[B,S,8] %context)\n" +
                               "  init int64[3] %sizes = [8, 8, 8]\n{\n" +
                               "  %context = ai.fusionopt::FusedAttention(%qkv, %sizes, %mask) {fused_nodes: " +
                               FusedNodesOf(CombinedMembers()) + "} @FusedAttention\n}\n\n" +
                               CombinedBody("  %t29 = Add(%t28, %x2)\n");
  Rewritten fused = ExpectFused(Combined(false), kPass, expected, {}, {{"B", 2}, {"S", 6}});
  CHECK(fused.Counter("combined_qkv") == 1);
  CHECK(fused.Counter("additive_masks") == 1);
  CHECK(fused.Counter("shape_reads_rewired") == 0);
  FusedAttention attention = ExpectRecognisedAndClose(fused, {{"B", 2}, {"S", 6}});
  CHECK(attention.mask_kind == AttentionMaskKind::kAdditive);
}

TEST_CASE("fuse-attention: ViT's unmasked attention scaled by a Mul", "[attention]") {
  const std::string text = Vit();
  const std::string body = R"(function ai.fusionopt::FusedAttention (%x0, %x1, %x2) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Shape(%x0)
  %c0 = Constant() {value: tensor int64[] [0]}
  %t1 = Gather(%t0, %c0) {axis: 0}
  %c1 = Constant() {value: tensor int64[1] [0]}
  %t2 = Unsqueeze(%t1, %c1)
  %c2 = Constant() {value: tensor int64[] [1]}
  %t3 = Gather(%t0, %c2) {axis: 0}
  %t4 = Unsqueeze(%t3, %c1)
  %c3 = Constant() {value: tensor int64[1] [2]}
  %c4 = Constant() {value: tensor int64[1] [4]}
  %t5 = Concat(%t2, %t4, %c3, %c4) {axis: 0}
  %t6 = Reshape(%x0, %t5)
  %t7 = Transpose(%t6) {perm: [0, 2, 3, 1]}
  %t8 = Shape(%x1)
  %t9 = Gather(%t8, %c0) {axis: 0}
  %t10 = Unsqueeze(%t9, %c1)
  %t11 = Gather(%t8, %c2) {axis: 0}
  %t12 = Unsqueeze(%t11, %c1)
  %t13 = Concat(%t10, %t12, %c3, %c4) {axis: 0}
  %t14 = Reshape(%x1, %t13)
  %t15 = Transpose(%t14) {perm: [0, 2, 1, 3]}
  %t16 = Shape(%x2)
  %t17 = Gather(%t16, %c0) {axis: 0}
  %t18 = Unsqueeze(%t17, %c1)
  %t19 = Gather(%t16, %c2) {axis: 0}
  %t20 = Unsqueeze(%t19, %c1)
  %t21 = Concat(%t18, %t20, %c3, %c4) {axis: 0}
  %t22 = Reshape(%x2, %t21)
  %t23 = Transpose(%t22) {perm: [0, 2, 1, 3]}
  %t24 = MatMul(%t23, %t7)
  %c5 = Constant() {value: tensor float[] [0.5]}
  %t25 = Mul(%c5, %t24)
  %t26 = Softmax(%t25) {axis: 3}
  %t27 = MatMul(%t26, %t15)
  %t28 = Transpose(%t27) {perm: [0, 2, 1, 3]}
  %t29 = Shape(%t28)
  %t30 = Gather(%t29, %c0) {axis: 0}
  %t31 = Unsqueeze(%t30, %c1)
  %t32 = Gather(%t29, %c2) {axis: 0}
  %t33 = Unsqueeze(%t32, %c1)
  %c6 = Constant() {value: tensor int64[1] [8]}
  %t34 = Concat(%t31, %t33, %c6) {axis: 0}
  %y0 = Reshape(%t28, %t34)
}
)";
  std::vector<std::string> members = ChainNames("k");
  for (const auto& name : ChainNames("v")) members.push_back(name);
  for (const auto& name : ChainNames("q")) members.push_back(name);
  for (const char* name : {"scores", "scale", "softmax", "context", "merge_transpose", "merge_shape", "merge_gather_b",
                           "merge_unsqueeze_b", "merge_gather_s", "merge_unsqueeze_s", "merge_concat", "merge_reshape"}) {
    members.push_back(name);
  }
  const std::string expected = kHeader + "opset \"ai.fusionopt\" 1\n" +
                               "graph main (float[B,S,8] %q, float[B,S,8] %k, float[B,S,8] %v) -> (float[B,S,8] %context)\n"
                               "{\n  %context = ai.fusionopt::FusedAttention(%k, %v, %q) {fused_nodes: " +
                               FusedNodesOf(members) + "} @FusedAttention\n}\n\n" + body;
  Rewritten fused = ExpectFused(text, kPass, expected, {}, {{"B", 3}, {"S", 5}});
  CHECK(fused.Counter("unmasked") == 1);
  FusedAttention attention = ExpectRecognisedAndClose(fused, {{"B", 3}, {"S", 5}});
  CHECK(attention.mask_kind == AttentionMaskKind::kNone);
  CHECK(attention.scale == 0.5);
  CHECK_FALSE(attention.scale_divides);
  CHECK(attention.softmax_axis == 3);
}

TEST_CASE("fuse-attention: [B,H,S,D] operands without a head split or merge", "[attention]") {
  Rewritten fused = ExpectFused(HeadsFirst("[1,1,1,7]"), kPass, kHeader + "opset \"ai.fusionopt\" 1\n" + R"(graph main (float[1,2,7,4] %qh, float[1,2,7,4] %kh, float[1,2,7,4] %vh, float[1,1,1,7] %mask) -> (float[?,?,?,?] %context)
{
  %context = ai.fusionopt::FusedAttention(%kh, %qh, %mask, %vh) {fused_nodes: ["key_transpose", "scores", "div", "mask", "softmax", "context"]} @FusedAttention
}

function ai.fusionopt::FusedAttention (%x0, %x1, %x2, %x3) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Transpose(%x0) {perm: [0, 1, 3, 2]}
  %t1 = MatMul(%x1, %t0)
  %c0 = Constant() {value: tensor float[] [2.0]}
  %t2 = Div(%t1, %c0)
  %t3 = Add(%x2, %t2)
  %t4 = Softmax(%t3) {axis: -1}
  %y0 = MatMul(%t4, %x3)
}
)");
  FusedAttention attention = ExpectRecognisedAndClose(fused, {});
  CHECK(attention.q.layout == HeadLayout::kHeadsFirst);
  CHECK(attention.k.layout == HeadLayout::kHeadsFirst);
  CHECK(attention.v.layout == HeadLayout::kHeadsFirst);
  CHECK_FALSE(attention.q.split.has_value());
  CHECK_FALSE(attention.merge.has_value());
  CHECK(fused.Counter("head_splits") == 0);
}

TEST_CASE("fuse-attention: a head split read elsewhere stays outside, and so does its Split", "[attention]") {
  // GPT-2's `present` output reads the value heads: V is read as [B,H,S,D], and the Split, one
  // of whose outputs now feeds a node outside, is not absorbed.
  Rewritten fused = Rewrite(Combined(true, "float[B,S,8] %context, float[B,2,S,4] %present", "  %present = Identity(%vh) @present\n"), kPass);
  REQUIRE(fused.Counter("attention") == 1);
  CHECK(fused.Counter("combined_qkv") == 0);
  const std::vector<std::string> ops = OpTypes(*fused.model->graph);
  CHECK(std::count(ops.begin(), ops.end(), "Split") == 1);
  CHECK(std::count(ops.begin(), ops.end(), "Reshape") == 1);    // V's head split
  CHECK(std::count(ops.begin(), ops.end(), "Transpose") == 1);
  CHECK(std::count(ops.begin(), ops.end(), "ai.fusionopt::FusedAttention") == 1);
  FusedAttention attention = ExpectRecognisedAndClose(fused, {{"B", 2}, {"S", 8}});
  CHECK_FALSE(attention.combined);
  CHECK(attention.q.layout == HeadLayout::kSplitHeads);
  CHECK(attention.v.layout == HeadLayout::kHeadsFirst);
  ExpectSameNumbers(*fused.original, *fused.model, {{"B", 2}, {"S", 8}});
}

// ---------------------------------------------------------------- near misses

TEST_CASE("fuse-attention: a mask that widens the scores is left alone", "[attention]") {
  // [3,1,1,7] against scores [1,2,7,7]: the sum is [3,2,7,7], not the attention's shape.
  pass_test::ExpectUnchanged(HeadsFirst("[3,1,1,7]"), kPass, "attention: the mask does not broadcast to the scores");
  pass_test::ExpectUnchanged(HeadsFirst("[1,1,1,1,7]"), kPass, "attention: the mask does not broadcast to the scores");
}

TEST_CASE("fuse-attention: a scale computed at run time is left alone", "[attention]") {
  std::string text = Bert("  %scores = Div(%product, %runtime_scale) @div\n");
  text.replace(text.find("float[B,1,1,S] %mask)"), 21, "float[B,1,1,S] %mask, float[] %runtime_scale)");
  pass_test::ExpectUnchanged(text, kPass, "attention: the scale is not a constant scalar");
}

TEST_CASE("fuse-attention: a softmax over another axis is left alone", "[attention]") {
  pass_test::ExpectUnchanged(Bert("  %scores = Div(%product, %scale) @div\n", "float[B,1,1,S] %mask", "2"), kPass,
                             "attention: the softmax is not over the last axis");
}

TEST_CASE("fuse-attention: scores or probabilities read outside are left alone", "[attention]") {
  std::string probabilities = Bert();
  probabilities.replace(probabilities.find("-> (float[B,S,8] %context)"), 26,
                        "-> (float[B,S,8] %context, float[B,2,S,S] %probs)");
  pass_test::ExpectUnchanged(probabilities, kPass, "attention: a graph output is inside the pattern");

  std::string scores = Bert("  %scores = Div(%product, %scale) @div\n  %seen = Relu(%scores) @relu\n");
  scores.replace(scores.find("-> (float[B,S,8] %context)"), 26, "-> (float[B,S,8] %context, float[B,2,S,S] %seen)");
  pass_test::ExpectUnchanged(scores, kPass, "attention: an intermediate is read outside the pattern");
}

TEST_CASE("fuse-attention: a head split with another perm is left alone", "[attention]") {
  // Q permuted to [B,H,D,S] (S = D = 4 keep the product well-formed): not Q·Kᵀ of the heads.
  std::string text = Bert();
  for (const char* from : {"float[B,S,8] %q", "float[B,S,8] %k", "float[B,S,8] %v", "float[B,1,1,S]", "float[B,S,8] %context"}) {
    std::string to = from;
    to.replace(to.find("S"), 1, "4");
    text.replace(text.find(from), std::string(from).size(), to);
  }
  const std::string q_perm = "%qh = Transpose(%q_r) {perm: [0, 2, 1, 3]}";
  text.replace(text.find(q_perm), q_perm.size(), "%qh = Transpose(%q_r) {perm: [0, 2, 3, 1]}");
  pass_test::ExpectUnchanged(text, kPass, "attention: query: transpose perm [0, 2, 3, 1] is not the head split's [0, 2, 1, 3]");
}

TEST_CASE("fuse-attention: a Shape read of the Split's own axis is left alone", "[attention]") {
  // q's width is Split's dim 2: no value outside the pattern provably has it.
  pass_test::ExpectUnchanged(
      Combined(true, "float[B,S,8] %context, int64[1] %q_width",
               "  %width_shape = Shape(%q) @width_shape\n  %width_dim = Gather(%width_shape, %two) {axis: 0} @width\n"
               "  %q_width = Unsqueeze(%width_dim, %axes0) @width_unsqueeze\n"),
      kPass, "attention: a dim of an intermediate is read outside and is not provably an input's");
}

// ---------------------------------------------------------------- the matcher itself

namespace {

Node& SoftmaxOf(const Model& model) {
  Node* softmax = nullptr;
  for (const auto& node : model.graph->nodes()) {
    if (node->op_type() == "Softmax") softmax = node.get();
  }
  REQUIRE(softmax != nullptr);
  return *softmax;
}

}  // namespace

TEST_CASE("MatchAttentionAt: GPT-2's match, its heads, causal mask and the Shape reads it leaves to the pass", "[attention]") {
  auto model = pass_test::ParseInferred(Combined(true));
  AttentionSearch search = MatchAttentionAt(SoftmaxOf(*model), 17);
  REQUIRE(search.near_miss.empty());
  REQUIRE(search.match.has_value());
  const AttentionMatch& match = *search.match;
  CHECK(match.heads == 2);
  CHECK(match.head_size == 4);
  CHECK(match.causal);
  CHECK(match.mask_kind == AttentionMaskKind::kBoolean);
  REQUIRE(match.split != nullptr);
  CHECK(match.split->name() == "split");
  CHECK(match.merge.has_value());
  CHECK(match.output->name() == "context");
  CHECK(match.nodes.size() == CombinedMembers().size());
  REQUIRE(match.outside_shape_reads.size() == 2);
  CHECK(match.outside_shape_reads[0]->name() == "query_length_shape");
  CHECK(match.outside_shape_reads[1]->name() == "key_length_shape");

  // A mask that is no lower triangle is boolean, not causal.
  std::string text = Combined(true);
  text.replace(text.find("%causal = [1, 0"), 15, "%causal = [0, 1");
  auto other = pass_test::ParseInferred(text);
  search = MatchAttentionAt(SoftmaxOf(*other), 17);
  REQUIRE(search.match.has_value());
  CHECK_FALSE(search.match->causal);
}

TEST_CASE("MatchAttentionAt: heads from the inferred shapes, and a Softmax that is no attention", "[attention]") {
  auto heads_first = pass_test::ParseInferred(HeadsFirst("[1,1,1,7]"));
  AttentionSearch search = MatchAttentionAt(SoftmaxOf(*heads_first), 17);
  REQUIRE(search.match.has_value());
  CHECK(search.match->heads == 2);
  CHECK(search.match->head_size == 4);
  CHECK(search.match->outside_shape_reads.empty());
  CHECK(search.match->k.layout == HeadLayout::kHeadsFirst);
  CHECK(search.match->k.transposes.size() == 1);

  // Softmax(x)·W with x a graph input: no Q·Kᵀ behind it, not even a near miss.
  auto plain = pass_test::ParseInferred(kHeader + R"(graph main (float[2,7] %x, float[7,3] %w) -> (float[2,3] %y)
{
  %p = Softmax(%x) {axis: -1} @softmax
  %y = MatMul(%p, %w) @matmul
}
)");
  search = MatchAttentionAt(SoftmaxOf(*plain), 17);
  CHECK_FALSE(search.match.has_value());
  CHECK(search.near_miss.empty());
}
