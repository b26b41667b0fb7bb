// The attention matcher (patterns/attention/attention.h): MatchAttentionAt from the Softmax
// outwards — the core, each operand's head split, the combined Split, the mask and the head
// merge — on the exporters' forms written as IR text (attention_test_models.h), and the near
// misses it reports where the skeleton is there but a check fails. The fused bodies it leads to,
// and every real exporter form: tests/unit/passes/fusion/attention/.
#include <catch2/catch.hpp>

#include "attention_test_models.h"
#include "pass_test_support.h"
#include "patterns/attention/attention.h"

namespace fusionopt {
namespace {

using pass_test::ParseInferred;

Node& Softmax(const Model& model) {
  Node* found = nullptr;
  for (const auto& node : model.graph->nodes()) {
    if (node->op_type() == "Softmax") found = node.get();
  }
  REQUIRE(found != nullptr);
  return *found;
}

AttentionSearch SearchIn(const Model& model) { return MatchAttentionAt(Softmax(model), 17); }

TEST_CASE("attention matcher: BERT's core, three head splits, the additive mask and the merge", "[patterns]") {
  auto model = ParseInferred(attention_test::Bert());
  AttentionSearch search = SearchIn(*model);
  REQUIRE(search.match);
  CHECK_FALSE(search.near_miss);
  const AttentionMatch& match = *search.match;
  CHECK(match.score_matmul->name() == "scores");
  CHECK(match.context_matmul->name() == "context");
  CHECK(match.scale == 2.0);
  CHECK(match.scale_divides);
  CHECK(match.mask_kind == AttentionMaskKind::kAdditive);
  CHECK(match.mask == model->graph->FindValue("mask"));
  CHECK(match.softmax_axis == -1);
  for (const AttentionOperandMatch* operand : {&match.q, &match.k, &match.v}) {
    CHECK(operand->layout == HeadLayout::kSplitHeads);
    REQUIRE(operand->split);
    CHECK(operand->split->parts.size() == 4);  // [Shape(x)[0], Shape(x)[1], 2, 4]
    CHECK(operand->split->parts[0].kind == ShapePartMatch::Kind::kDimOf);
    CHECK(operand->split->parts[2].constant == std::vector<int64_t>{2});
    CHECK(operand->split->parts[3].constant == std::vector<int64_t>{4});
  }
  CHECK(match.q.source == model->graph->FindValue("q"));
  CHECK(match.k.source == model->graph->FindValue("k"));
  CHECK(match.merge_perm == std::vector<int64_t>{0, 2, 1, 3});
  REQUIRE(match.merge);
  CHECK(match.output == model->graph->FindValue("context"));
  // Every node of the model but the shape constants is a member.
  CHECK(match.nodes.size() == model->graph->num_nodes());
}

TEST_CASE("attention matcher: ViT's scale as a Mul with the constant first, no mask, softmax axis 3", "[patterns]") {
  auto model = ParseInferred(attention_test::Vit());
  AttentionSearch search = SearchIn(*model);
  REQUIRE(search.match);
  CHECK(search.match->scale == 0.5);
  CHECK_FALSE(search.match->scale_divides);
  CHECK(search.match->mask_kind == AttentionMaskKind::kNone);
  CHECK(search.match->softmax_axis == 3);
}

TEST_CASE("attention matcher: one projection split three ways, with GPT-2's causal Where mask", "[patterns]") {
  auto model = ParseInferred(attention_test::Combined(true));
  AttentionSearch search = SearchIn(*model);
  REQUIRE(search.match);
  const AttentionMatch& match = *search.match;
  REQUIRE(match.split != nullptr);
  CHECK(match.combined == model->graph->FindValue("qkv"));
  CHECK(match.q.split_output == 0);
  CHECK(match.k.split_output == 1);
  CHECK(match.v.split_output == 2);
  CHECK(match.mask_kind == AttentionMaskKind::kBoolean);
  CHECK(match.causal);
  CHECK(match.fill < -3e38);
  CHECK_FALSE(match.fill_when_true);
}

TEST_CASE("attention matcher: heads-first operands are read as they are, K transposed inside", "[patterns]") {
  auto model = ParseInferred(attention_test::HeadsFirst("[1,1,7,7]"));
  AttentionSearch search = SearchIn(*model);
  REQUIRE(search.match);
  CHECK(search.match->q.layout == HeadLayout::kHeadsFirst);
  CHECK(search.match->k.layout == HeadLayout::kHeadsFirst);
  CHECK(search.match->k.transposes.size() == 1);
  CHECK_FALSE(search.match->merge);
}

TEST_CASE("attention matcher: near misses name the check that failed", "[patterns]") {
  SECTION("a scale a feed may replace is no constant") {
    std::string text = attention_test::Bert();
    text.replace(text.find("  init float[] %scale = [2.0]\n"), 30, "");
    text.replace(text.find("float[B,1,1,S] %mask)"), 21, "float[B,1,1,S] %mask, float[] %scale)");
    AttentionSearch search = SearchIn(*ParseInferred(text));
    CHECK_FALSE(search.match);
    CHECK(search.near_miss.reason() == "attention: the scale is not a constant scalar");
  }
  SECTION("scores that are a graph output") {
    std::string text = attention_test::Bert();
    text.replace(text.find("-> (float[B,S,8] %context)"), 26, "-> (float[B,S,8] %context, float[B,2,S,S] %scores)");
    AttentionSearch search = SearchIn(*ParseInferred(text));
    CHECK_FALSE(search.match);
    CHECK(search.near_miss.reason() == "attention: a graph output is inside the pattern");
  }
  SECTION("scores read by a node outside the pattern") {
    std::string text = attention_test::Bert();
    text.replace(text.find("-> (float[B,S,8] %context)"), 26, "-> (float[B,S,8] %context, float[B,2,S,S] %probe)");
    text.replace(text.find("  %masked = Add("), 0, "  %probe = Relu(%scores) @probe\n");
    AttentionSearch search = SearchIn(*ParseInferred(text));
    CHECK_FALSE(search.match);
    CHECK(search.near_miss.reason() == "attention: an intermediate is read outside the pattern");
  }
  SECTION("a Softmax with no attention around it is neither a match nor a near miss") {
    auto model = ParseInferred(attention_test::kHeader + R"(graph main (float[2,8] %x) -> (float[2,8] %y)
{
  %y = Softmax(%x) {axis: -1} @softmax
}
)");
    AttentionSearch search = SearchIn(*model);
    CHECK_FALSE(search.match);
    CHECK_FALSE(search.near_miss);
  }
}

TEST_CASE("ShapeParts reads a constant target, the exporters' Concat of Shape dims, and nothing else", "[patterns]") {
  auto model = ParseInferred(attention_test::Bert());
  std::vector<Node*> chain;
  std::optional<std::vector<ShapePartMatch>> parts = ShapeParts(*model->graph->FindValue("q_target"), &chain);
  REQUIRE(parts);
  REQUIRE(parts->size() == 4);
  CHECK((*parts)[0].kind == ShapePartMatch::Kind::kDimOf);
  CHECK((*parts)[0].value == model->graph->FindValue("q"));
  CHECK((*parts)[0].axis == 0);
  CHECK((*parts)[1].axis == 1);
  CHECK((*parts)[2].kind == ShapePartMatch::Kind::kConstant);
  CHECK(chain.size() == 6);  // Shape, two Gathers, two Unsqueezes, the Concat

  std::optional<std::vector<ShapePartMatch>> constant = ShapeParts(*model->graph->FindValue("heads"), nullptr);
  REQUIRE(constant);
  CHECK(constant->front().constant == std::vector<int64_t>{2});
  CHECK_FALSE(ShapeParts(*model->graph->FindValue("q"), nullptr));  // a float input is no target
}

}  // namespace
}  // namespace fusionopt
