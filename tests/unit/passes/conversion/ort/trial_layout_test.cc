// lower-for-ort's trial layouts (passes/conversion/ort/trial_layout.h): the model copied with its
// open dims at trial sizes and its shape computations folded, the original left as it was, and
// the attention's layout — patterns/attention/layout.h's — read there where the call's own
// arguments leave dims open.
#include <catch2/catch.hpp>

#include "../../../attention_test_models.h"
#include "ir/constant_value.h"
#include "pass_test_support.h"
#include "passes/conversion/ort/trial_layout.h"
#include "patterns/attention/attention.h"

namespace fusionopt {
namespace {

using passes::ort_lowering::LayoutAt;
using passes::ort_lowering::TrialModels;
using passes::ort_lowering::TrialSizes;

const Node& AttentionCall(const Model& model) {
  for (const auto& node : model.graph->nodes()) {
    const Function* function = model.FindFunction(node->domain(), node->op_type());
    if (function != nullptr && RecognizeAttention(*function)) return *node;
  }
  FAIL("no fused attention in the model");
  throw;  // unreachable: FAIL throws
}

TEST_CASE("trial layout: every open dim of the model at one size, unnamed input dims included", "[passes][ort]") {
  auto model = pass_test::ParseInferred(attention_test::Bert());
  TrialModels trials(*model);
  CHECK(trials.EveryOpenDimAt(7) == TrialSizes{{"B", 7}, {"S", 7}});

  auto fixed = pass_test::ParseInferred(attention_test::HeadsFirst("[1,1,7,7]"));
  CHECK(TrialModels(*fixed).EveryOpenDimAt(7).empty());

  auto unnamed = pass_test::ParseInferred(attention_test::UnnamedBert());
  TrialModels unnamed_trials(*unnamed);
  const TrialSizes sizes = unnamed_trials.EveryOpenDimAt(11);
  CHECK(sizes == TrialSizes{{passes::ort_lowering::kUnnamedDims, 11}});
  const Model* trial = unnamed_trials.At(sizes);
  REQUIRE(trial != nullptr);
  CHECK(ShapeToString(*trial->graph->FindValue("q")->shape()) == "[11,11,8]");
  CHECK(ShapeToString(*trial->graph->FindValue("q_r")->shape()) == "[11,11,2,4]");  // inferred from the input
  CHECK(ShapeToString(*unnamed->graph->FindValue("q")->shape()) == "[?,?,8]");
}

TEST_CASE("trial layout: the copy has the trial's dims and folded shape arithmetic; the original keeps its symbols", "[passes][ort]") {
  auto model = pass_test::ParseInferred(attention_test::Bert());
  TrialModels trials(*model);
  const Model* trial = trials.At({{"B", 3}, {"S", 5}});
  REQUIRE(trial != nullptr);
  CHECK(trials.At({{"B", 3}, {"S", 5}}) == trial);  // made once per set of sizes

  REQUIRE(trial->graph->FindValue("q_r") != nullptr);
  CHECK(ShapeToString(*trial->graph->FindValue("q_r")->shape()) == "[3,5,2,4]");
  CHECK(ConstantInts(trial->graph->FindValue("q_target"), InitializerRule::kAllConstant) == std::vector<int64_t>{3, 5, 2, 4});
  CHECK(ShapeToString(*model->graph->FindValue("q")->shape()) == "[B,S,8]");
  CHECK_FALSE(ConstantInts(model->graph->FindValue("q_target"), InitializerRule::kAllConstant).has_value());
}

TEST_CASE("trial layout: an attention over open dims is laid out at the trial sizes, not without them", "[passes][ort]") {
  auto model = pass_test::ParseOptimized(attention_test::WithHeads(attention_test::Bert(), 4, 2), 3);
  const Node& call = AttentionCall(*model);
  std::optional<FusedAttention> attention = RecognizeAttention(*model->FindFunction(call.domain(), call.op_type()));
  REQUIRE(attention);
  TrialModels trials(*model);

  // B and S open: no numbers without a trial.
  CHECK(LayoutAt(*attention, call, trials, {}).why_not() == passes::ort_lowering::kDimsNotKnown);

  Decided<AttentionLayout> layout = LayoutAt(*attention, call, trials, trials.EveryOpenDimAt(11));
  REQUIRE(layout);
  CHECK(layout->heads == 4);
  CHECK(layout->batch == 11);
  CHECK(layout->queries == 11);
  for (const OperandLayout* operand : {&layout->q, &layout->k, &layout->v}) {
    CHECK(operand->heads == 4);
    CHECK(operand->columns == 2);
    CHECK(operand->group == 1);
    CHECK(operand->head_stride == 2);
    CHECK(operand->row_stride == 8);
  }
}

TEST_CASE("trial layout: a head split whose target a feed supplies cannot be evaluated", "[passes][ort]") {
  std::string text = attention_test::Bert();
  text.replace(text.find("  init int64[1] %heads = [2]\n"), 29, "");
  text.replace(text.find("float[B,1,1,S] %mask)"), 21, "float[B,1,1,S] %mask, int64[1] %heads)");
  auto model = pass_test::ParseOptimized(text, 3);
  const Node& call = AttentionCall(*model);
  std::optional<FusedAttention> attention = RecognizeAttention(*model->FindFunction(call.domain(), call.op_type()));
  REQUIRE(attention);
  TrialModels trials(*model);
  CHECK(LayoutAt(*attention, call, trials, trials.EveryOpenDimAt(7)).why_not() ==
        passes::ort_lowering::kTargetNotKnown);
}

}  // namespace
}  // namespace fusionopt
