// fuse-attention: BERT (three projections, additive padding mask), the same after the Q/K/V
// projections merged into one Split, GPT-2 (combined QKV Split, causal Where, Shape reads of the
// heads rewired) and ViT (no mask) outlined into one FusedAttention node each — the rewritten
// graph with its body, the body recognised, and the same numbers inlined and run with the fused
// kernel — and the near misses left alone with their reasons.
#include <catch2/catch.hpp>

#include <cctype>
#include <initializer_list>
#include <map>

#include "attention_test_models.h"
#include "cpu_runtime/engine/compare.h"
#include "pass_harness.h"
#include "patterns/attention/attention.h"
#include "text_format/text_format.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;
using namespace fusionopt::attention_test;

namespace {

constexpr const char* kPass = "fuse-attention";

// The head split's perm, and K's, which also transposes the heads for Q·Kᵀ.
constexpr const char* kHeadsPerm = "[0, 2, 1, 3]";
constexpr const char* kKeyPerm = "[0, 2, 3, 1]";

// `pattern` with each "%t+N" written %t<first + N>: the printer numbers a body's temporaries in
// order, so a chain's names depend on where in the body it stands.
std::string NumberTemporaries(const std::string& pattern, int first) {
  std::string text;
  for (size_t at = 0; at < pattern.size();) {
    if (pattern.compare(at, 3, "%t+") != 0) {
      text += pattern[at++];
      continue;
    }
    size_t end = at + 3;
    while (end < pattern.size() && std::isdigit(static_cast<unsigned char>(pattern[end]))) ++end;
    text += "%t" + std::to_string(first + std::stoi(pattern.substr(at + 3, end - at - 3)));
    at = end;
  }
  return text;
}

// `text` with every `from` replaced by `to`.
std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// `text` with its first `from` replaced by `to`; `from` must occur.
std::string Replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// The header of an outlined attention function of `inputs` formal inputs.
std::string BodyHeader(int inputs) {
  std::string text = "function ai.fusionopt::FusedAttention (";
  for (int i = 0; i < inputs; ++i) text += (i ? ", %x" : "%x") + std::to_string(i);
  return text + ") -> (%y0) attributes [fused_nodes] opset \"\" 17 {\n";
}

// One head split of an outlined body, `x`.view(B, S, 2, 4).permute(`perm`), the target
// computed from x's shape. The body's first chain declares the shape constants %c0..%c4 that
// the later chains and the head merge reuse.
std::string BodyHeadSplit(int first, const std::string& x, const std::string& perm, bool declares_constants) {
  std::string text = NumberTemporaries(R"(  %t+0 = Shape($x)
  %c0 = Constant() {value: tensor int64[] [0]}
  %t+1 = Gather(%t+0, %c0) {axis: 0}
  %c1 = Constant() {value: tensor int64[1] [0]}
  %t+2 = Unsqueeze(%t+1, %c1)
  %c2 = Constant() {value: tensor int64[] [1]}
  %t+3 = Gather(%t+0, %c2) {axis: 0}
  %t+4 = Unsqueeze(%t+3, %c1)
  %c3 = Constant() {value: tensor int64[1] [2]}
  %c4 = Constant() {value: tensor int64[1] [4]}
  %t+5 = Concat(%t+2, %t+4, %c3, %c4) {axis: 0}
  %t+6 = Reshape($x, %t+5)
  %t+7 = Transpose(%t+6) {perm: $perm}
)", first);
  if (!declares_constants) {
    std::string kept;
    for (size_t at = 0, end; at < text.size(); at = end + 1) {
      end = text.find('\n', at);
      if (text.compare(at, 4, "  %c") != 0) kept += text.substr(at, end - at + 1);
    }
    text = kept;
  }
  return ReplaceAll(ReplaceAll(text, "$x", x), "$perm", perm);
}

// The head merge ending an outlined body: the context in %t<first - 1> permuted back and
// reshaped to [B,S,8], the width a constant `width` of its own; then the body's end.
std::string BodyHeadMerge(int first, const std::string& width) {
  return ReplaceAll(ReplaceAll(NumberTemporaries(R"(  %t+0 = Transpose($context) {perm: [0, 2, 1, 3]}
  %t+1 = Shape(%t+0)
  %t+2 = Gather(%t+1, %c0) {axis: 0}
  %t+3 = Unsqueeze(%t+2, %c1)
  %t+4 = Gather(%t+1, %c2) {axis: 0}
  %t+5 = Unsqueeze(%t+4, %c1)
  $width = Constant() {value: tensor int64[1] [8]}
  %t+6 = Concat(%t+3, %t+5, $width) {axis: 0}
  %y0 = Reshape(%t+0, %t+6)
}
)", first), "$context", "%t" + std::to_string(first - 1)), "$width", width);
}

// The head splits of BERT's and ViT's bodies in %t0..%t23: K, V and Q, the inputs %x0..%x2 in
// first-use order.
std::string ThreeProjectionHeadSplits() {
  return BodyHeadSplit(0, "%x0", kKeyPerm, true) + BodyHeadSplit(8, "%x1", kHeadsPerm, false) +
         BodyHeadSplit(16, "%x2", kHeadsPerm, false);
}

std::string FusedNodesOf(const std::vector<std::string>& names) {
  std::string text = "[";
  for (size_t i = 0; i < names.size(); ++i) text += (i ? ", \"" : "\"") + names[i] + "\"";
  return text + "]";
}

// The fused_nodes of a split-head attention: `members` (nodes before the head splits), the
// head-split chains of `projections` in order, the `core` nodes, then the head merge.
std::vector<std::string> SplitHeadMembers(std::vector<std::string> members,
                                          std::initializer_list<const char*> projections,
                                          std::initializer_list<const char*> core) {
  for (const std::string name : projections) {
    for (const char* step : {"_shape", "_gather_b", "_unsqueeze_b", "_gather_s", "_unsqueeze_s", "_concat",
                             "_reshape", "_transpose"}) {
      members.push_back(name + step);
    }
  }
  members.insert(members.end(), core.begin(), core.end());
  for (const char* name : {"merge_transpose", "merge_shape", "merge_gather_b", "merge_unsqueeze_b", "merge_gather_s",
                           "merge_unsqueeze_s", "merge_concat", "merge_reshape"}) {
    members.push_back(name);
  }
  return members;
}

// The model the pass writes: `graph` (the signature, initializers and nodes before the fused
// node), the FusedAttention node on `arguments` writing %context, then the function `body`.
std::string FusedModel(const std::string& graph, const std::string& arguments, const std::vector<std::string>& members,
                       const std::string& body) {
  return kHeader + "opset \"ai.fusionopt\" 1\n" + graph + "  %context = ai.fusionopt::FusedAttention(" + arguments +
         ") {fused_nodes: " + FusedNodesOf(members) + "} @FusedAttention\n}\n\n" + body;
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

struct Outlined {
  Rewritten fused;
  FusedAttention attention;
};

// The pass rewrites `text` to `expected` (ExpectFused: inlined, the same numbers), and the
// outlined body is recognised and runs close to the original, symbolic dims from `symbols`.
Outlined ExpectOutlined(const std::string& text, const std::string& expected,
                        const std::map<std::string, int64_t>& symbols) {
  Outlined outlined;
  outlined.fused = ExpectRewrite(text, kPass, expected, {.numbers = Inlined(symbols)});
  outlined.attention = ExpectRecognisedAndClose(outlined.fused, symbols);
  return outlined;
}

}  // namespace

TEST_CASE("fuse-attention: BERT's self-attention with three projections and a padding mask", "[attention]") {
  // The body as the outliner writes it: the K, V and Q head splits (the inputs in first-use
  // order) with the chains computing their targets, the core, the head merge; scalars inlined.
  const std::string body = BodyHeader(4) + ThreeProjectionHeadSplits() + R"(  %t24 = MatMul(%t23, %t7)
  %c5 = Constant() {value: tensor float[] [2.0]}
  %t25 = Div(%t24, %c5)
  %t26 = Add(%t25, %x3)
  %t27 = Softmax(%t26) {axis: -1}
  %t28 = MatMul(%t27, %t15)
)" + BodyHeadMerge(29, "%c6");
  const std::string expected =
      FusedModel("graph main (float[B,S,8] %q, float[B,S,8] %k, float[B,S,8] %v, float[B,1,1,S] %mask) -> "
                 "(float[B,S,8] %context)\n{\n",
                 "%k, %v, %q, %mask",
                 SplitHeadMembers({}, {"k", "v", "q"}, {"scores", "div", "mask", "softmax", "context"}), body);
  auto [fused, attention] = ExpectOutlined(Bert(), expected, {{"B", 2}, {"S", 7}});
  CHECK(fused.Counter("attention") == 1);
  CHECK(fused.Counter("additive_masks") == 1);
  CHECK(fused.Counter("head_splits") == 1);
  CHECK(fused.Counter("head_merges") == 1);
  CHECK(fused.Counter("combined_qkv") == 0);
  REQUIRE(fused.run.fusions.size() == 1);
  CHECK(fused.run.fusions[0].kind == "attention");

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
  return SplitHeadMembers({"split"}, {"q", "k", "v"}, {"scores", "div", "mask", "softmax", "context"});
}

// The body of a combined-projection attention; `mask` is its masking node (and its constant).
std::string CombinedBody(const std::string& mask) {
  const std::string width = mask.find("%c6") != std::string::npos ? "%c7" : "%c6";  // the next constant
  return BodyHeader(3) + "  %t0, %t1, %t2 = Split(%x0, %x1) {axis: 2}\n" + BodyHeadSplit(3, "%t0", kHeadsPerm, true) +
         BodyHeadSplit(11, "%t1", kKeyPerm, false) + BodyHeadSplit(19, "%t2", kHeadsPerm, false) +
         R"(  %t27 = MatMul(%t10, %t18)
  %c5 = Constant() {value: tensor float[] [2.0]}
  %t28 = Div(%t27, %c5)
)" + mask + R"(  %t30 = Softmax(%t29) {axis: -1}
  %t31 = MatMul(%t30, %t26)
)" + BodyHeadMerge(32, width);
}

}  // namespace

TEST_CASE("fuse-attention: GPT-2's combined QKV Split and causal Where; the mask's Shape reads rewired", "[attention]") {
  // Shape(qh)[2] and Shape(kt)[3] are S of the projection: the Transposes' perms lead to the
  // head split's target entry 1, which the chain reads from the Split output's dim 1, which is
  // the projection's dim 1 (not the split axis).
  const std::string graph = "graph main (float[B,S,24] %qkv) -> (float[B,S,8] %context)\n"
                            "  init int64[1] %axes0 = [0]\n  init int64[3] %sizes = [8, 8, 8]\n"
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
)";
  const std::string body = CombinedBody("  %c6 = Constant() {value: tensor float[] [-3.4028235e+38]}\n"
                                        "  %t29 = Where(%x2, %t28, %c6)\n");
  auto [fused, attention] = ExpectOutlined(
      Combined(true), FusedModel(graph, "%qkv, %sizes, %allowed", CombinedMembers(), body), {{"B", 2}, {"S", 8}});
  CHECK(fused.Counter("shape_reads_rewired") == 2);
  CHECK(fused.Counter("combined_qkv") == 1);
  CHECK(fused.Counter("causal_masks") == 1);
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
  const std::string expected =
      FusedModel("graph main (float[B,S,24] %qkv, float[B,1,1,S] %mask) -> (float[B,S,8] %context)\n"
                 "  init int64[3] %sizes = [8, 8, 8]\n{\n",
                 "%qkv, %sizes, %mask", CombinedMembers(), CombinedBody("  %t29 = Add(%t28, %x2)\n"));
  auto [fused, attention] = ExpectOutlined(Combined(false), expected, {{"B", 2}, {"S", 6}});
  CHECK(fused.Counter("combined_qkv") == 1);
  CHECK(fused.Counter("additive_masks") == 1);
  CHECK(fused.Counter("shape_reads_rewired") == 0);
  CHECK(attention.mask_kind == AttentionMaskKind::kAdditive);
}

TEST_CASE("fuse-attention: ViT's unmasked attention scaled by a Mul", "[attention]") {
  const std::string body = BodyHeader(3) + ThreeProjectionHeadSplits() + R"(  %t24 = MatMul(%t23, %t7)
  %c5 = Constant() {value: tensor float[] [0.5]}
  %t25 = Mul(%c5, %t24)
  %t26 = Softmax(%t25) {axis: 3}
  %t27 = MatMul(%t26, %t15)
)" + BodyHeadMerge(28, "%c6");
  const std::string expected =
      FusedModel("graph main (float[B,S,8] %q, float[B,S,8] %k, float[B,S,8] %v) -> (float[B,S,8] %context)\n{\n",
                 "%k, %v, %q", SplitHeadMembers({}, {"k", "v", "q"}, {"scores", "scale", "softmax", "context"}), body);
  auto [fused, attention] = ExpectOutlined(Vit(), expected, {{"B", 3}, {"S", 5}});
  CHECK(fused.Counter("unmasked") == 1);
  CHECK(attention.mask_kind == AttentionMaskKind::kNone);
  CHECK(attention.scale == 0.5);
  CHECK_FALSE(attention.scale_divides);
  CHECK(attention.softmax_axis == 3);
}

TEST_CASE("fuse-attention: [B,H,S,D] operands without a head split or merge", "[attention]") {
  const std::string expected = FusedModel(
      "graph main (float[1,2,7,4] %qh, float[1,2,7,4] %kh, float[1,2,7,4] %vh, float[1,1,1,7] %mask) -> "
      "(float[?,?,?,?] %context)\n{\n",
      "%kh, %qh, %mask, %vh", {"key_transpose", "scores", "div", "mask", "softmax", "context"},
      BodyHeader(4) + R"(  %t0 = Transpose(%x0) {perm: [0, 1, 3, 2]}
  %t1 = MatMul(%x1, %t0)
  %c0 = Constant() {value: tensor float[] [2.0]}
  %t2 = Div(%t1, %c0)
  %t3 = Add(%x2, %t2)
  %t4 = Softmax(%t3) {axis: -1}
  %y0 = MatMul(%t4, %x3)
}
)");
  auto [fused, attention] = ExpectOutlined(HeadsFirst("[1,1,1,7]"), expected, {});
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
  ExpectSameNumbers(*fused.original, *fused.model, Inlined({{"B", 2}, {"S", 8}}));
}

// ---------------------------------------------------------------- near misses

namespace {

// The pass leaves `text` as it is, rejecting its attention for `reason`.
void ExpectLeftAlone(const std::string& text, const std::string& reason) {
  pass_test::ExpectUnchanged(text, kPass, "attention: " + reason);
}

// BERT's model (`bert`) with `output` also a graph output.
std::string AlsoOutput(const std::string& bert, const std::string& output) {
  return Replaced(bert, "-> (float[B,S,8] %context)", "-> (float[B,S,8] %context, " + output + ")");
}

}  // namespace

TEST_CASE("fuse-attention: a mask that widens the scores is left alone", "[attention]") {
  // [3,1,1,7] against scores [1,2,7,7]: the sum is [3,2,7,7], not the attention's shape.
  ExpectLeftAlone(HeadsFirst("[3,1,1,7]"), "the mask does not broadcast to the scores");
  ExpectLeftAlone(HeadsFirst("[1,1,1,1,7]"), "the mask does not broadcast to the scores");
}

TEST_CASE("fuse-attention: a scale computed at run time is left alone", "[attention]") {
  ExpectLeftAlone(Replaced(Bert("  %scores = Div(%product, %runtime_scale) @div\n"), "float[B,1,1,S] %mask)",
                           "float[B,1,1,S] %mask, float[] %runtime_scale)"),
                  "the scale is not a constant scalar");
}

TEST_CASE("fuse-attention: a softmax over another axis is left alone", "[attention]") {
  ExpectLeftAlone(Bert("  %scores = Div(%product, %scale) @div\n", "float[B,1,1,S] %mask", "2"),
                  "the softmax is not over the last axis");
}

TEST_CASE("fuse-attention: scores or probabilities read outside are left alone", "[attention]") {
  ExpectLeftAlone(AlsoOutput(Bert(), "float[B,2,S,S] %probs"), "a graph output is inside the pattern");
  ExpectLeftAlone(AlsoOutput(Bert("  %scores = Div(%product, %scale) @div\n  %seen = Relu(%scores) @relu\n"),
                             "float[B,2,S,S] %seen"),
                  "an intermediate is read outside the pattern");
}

TEST_CASE("fuse-attention: a head split with another perm is left alone", "[attention]") {
  // Q permuted to [B,H,D,S] (S = D = 4 keep the product well-formed): not Q·Kᵀ of the heads.
  std::string text = Bert();
  for (const std::string from : {"float[B,S,8] %q", "float[B,S,8] %k", "float[B,S,8] %v", "float[B,1,1,S]", "float[B,S,8] %context"}) {
    text = Replaced(text, from, Replaced(from, "S", "4"));
  }
  text = Replaced(text, "%qh = Transpose(%q_r) {perm: [0, 2, 1, 3]}", "%qh = Transpose(%q_r) {perm: [0, 2, 3, 1]}");
  ExpectLeftAlone(text, "query: transpose perm [0, 2, 3, 1] is not the head split's [0, 2, 1, 3]");
}

// The pipeline fuzzer's finding: a perm naming an axis past 3 was composed by indexing with it.
// Such a Transpose is no head split: the attention reads its output as it is, and the
// Transpose (which fails when run) stays outside the fused node.
TEST_CASE("fuse-attention: a Transpose whose perm is no permutation is not taken for a head split", "[attention]") {
  for (const std::string perm : {"[0, 2, 1, 9]", "[0, 2, 2, 3]", "[0, -2, 1, 3]"}) {
    auto model = pass_test::ParseInferred(
        Replaced(Bert(), "%qh = Transpose(%q_r) {perm: [0, 2, 1, 3]}", "%qh = Transpose(%q_r) {perm: " + perm + "}"));
    pass_test::PassRun run = pass_test::RunPass(*model, kPass);
    CHECK(run.Counter("attention") == 1);
    const Node* transpose = pass_test::FindNode(*model->graph, "q_transpose");
    REQUIRE(transpose != nullptr);
    REQUIRE(transpose->output(0)->uses().size() == 1);
    const Node* reader = transpose->output(0)->uses()[0].node;
    CHECK(reader->domain() == "ai.fusionopt");
  }
}

// The pipeline fuzzer's finding: H * D of a hostile head-split target overflowed int64.
TEST_CASE("fuse-attention: a head split whose H * D overflows is left alone", "[attention]") {
  std::string text = Replaced(Bert(), "init int64[1] %heads = [2]", "init int64[1] %heads = [3399705346246180896]");
  ExpectLeftAlone(text, "query: the head split's [H, D] do not make the width");
}

TEST_CASE("fuse-attention: a Shape read of the Split's own axis is left alone", "[attention]") {
  // q's width is Split's dim 2: no value outside the pattern provably has it.
  ExpectLeftAlone(Combined(true, "float[B,S,8] %context, int64[1] %q_width",
                           "  %width_shape = Shape(%q) @width_shape\n  %width_dim = Gather(%width_shape, %two) {axis: 0} @width\n"
                           "  %q_width = Unsqueeze(%width_dim, %axes0) @width_unsqueeze\n"),
                  "a dim of an intermediate is read outside and is not provably an input's");
}

// ---------------------------------------------------------------- the matcher itself

namespace {

// MatchAttentionAt at the (last) Softmax of `model`, opset 17.
AttentionSearch SearchAtSoftmax(const Model& model) {
  Node* softmax = nullptr;
  for (const auto& node : model.graph->nodes()) {
    if (node->op_type() == "Softmax") softmax = node.get();
  }
  REQUIRE(softmax != nullptr);
  return MatchAttentionAt(*softmax, 17);
}

}  // namespace

TEST_CASE("MatchAttentionAt: GPT-2's match, its heads, causal mask and the Shape reads it leaves to the pass", "[attention]") {
  auto model = pass_test::ParseInferred(Combined(true));
  AttentionSearch search = SearchAtSoftmax(*model);
  REQUIRE_FALSE(search.near_miss);
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
  auto other = pass_test::ParseInferred(Replaced(Combined(true), "%causal = [1, 0", "%causal = [0, 1"));
  search = SearchAtSoftmax(*other);
  REQUIRE(search.match.has_value());
  CHECK_FALSE(search.match->causal);
}

TEST_CASE("MatchAttentionAt: heads from the inferred shapes, and a Softmax that is no attention", "[attention]") {
  auto heads_first = pass_test::ParseInferred(HeadsFirst("[1,1,1,7]"));
  AttentionSearch search = SearchAtSoftmax(*heads_first);
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
  search = SearchAtSoftmax(*plain);
  CHECK_FALSE(search.match.has_value());
  CHECK_FALSE(search.near_miss);
}
