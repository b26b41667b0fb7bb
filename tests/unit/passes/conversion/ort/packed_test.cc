// lower-for-ort, packed in-projections (passes/conversion/ort/packed.cc): Q, K and V read through
// layout chains over one packed [B,S,3·H·D] projection are proven to be its thirds split into heads
// — from patterns/attention/layout.h's addressing at the trial sizes — and refused, with the
// reason, where a chain reads anything else. torchvision's and timm's real exports, and ORT's
// numbers on them: tests/python/test_runtime_ort.py.
#include <catch2/catch.hpp>

#include "attention_test_models.h"
#include "pass_test_support.h"
#include "passes/conversion/ort/lower_for_ort.h"
#include "passes/conversion/ort/support.h"

namespace fusionopt {
namespace {

using passes::ort_lowering::PackedOperands;
using passes::ort_lowering::ProvePackedOperands;
using passes::ort_lowering::TrialModels;

// timm's ViT attention (attention_test_models.h) with K squeezed from the Split's output
// `k_slot`.
std::string TimmUnbind(const std::string& k_slot = "%ks0") {
  std::string text = attention_test::TimmUnbind();
  const std::string k = "%k = Squeeze(%ks0";
  text.replace(text.find(k), k.size(), "%k = Squeeze(" + k_slot);
  return text;
}

struct Call {
  const Node* node = nullptr;
  FusedAttention attention;
};

Call AttentionCall(const Model& model) {
  for (const auto& node : model.graph->nodes()) {
    const Function* function = model.FindFunction(node->domain(), node->op_type());
    if (function == nullptr) continue;
    if (std::optional<FusedAttention> attention = RecognizeAttention(*function)) return {node.get(), *attention};
  }
  FAIL("no fused attention in the model");
  return {};
}

TEST_CASE("ort packed: timm's unbound thirds are proven slots 0, 1, 2 of H heads of D", "[passes][ort]") {
  auto model = pass_test::ParseOptimized(TimmUnbind(), 3);
  Call call = AttentionCall(*model);
  REQUIRE(call.attention.q.layout == HeadLayout::kView);
  TrialModels trials(*model);
  PackedOperands packed;
  WhyNot why = ProvePackedOperands(call.attention, *call.node, trials, packed);
  INFO(why);
  REQUIRE_FALSE(why);
  CHECK(packed.heads == 2);
  CHECK(packed.head_size == 4);
  CHECK(packed.slots == std::array<int, 3>{0, 1, 2});
  CHECK(packed.input == call.attention.q.input);

  auto report = passes::LowerForOrt(*model);
  REQUIRE(report.ok());
  REQUIRE(report->lowered.size() == 1);
  CHECK(report->lowered[0].written == "com.microsoft::MultiHeadAttention");
}

TEST_CASE("ort packed: K read from Q's third, and operands that are no layout chains, are refused", "[passes][ort]") {
  auto same_third = pass_test::ParseOptimized(TimmUnbind("%qs0"), 3);
  Call call = AttentionCall(*same_third);
  TrialModels trials(*same_third);
  PackedOperands packed;
  CHECK(ProvePackedOperands(call.attention, *call.node, trials, packed).reason() ==
        "Q, K and V read the same third of the packed projection");

  auto bert = pass_test::ParseOptimized(attention_test::Bert(), 3);
  Call split_heads = AttentionCall(*bert);
  TrialModels bert_trials(*bert);
  CHECK(ProvePackedOperands(split_heads.attention, *split_heads.node, bert_trials, packed).reason() ==
        "Q, K and V are not layout chains over one packed projection");
}

}  // namespace
}  // namespace fusionopt
