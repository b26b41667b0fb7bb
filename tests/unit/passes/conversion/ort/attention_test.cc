// lower-for-ort, attention (passes/conversion/ort/attention.cc): a recognised attention written as
// MultiHeadAttention with the heads and scale its layout gives — the heads read from the layout
// every runtime uses, at two trial sizes of the open dims — and the groups that stay, with their
// reasons. Every exporter form, and ORT's numbers against the original's:
// tests/python/test_runtime_ort.py.
#include <catch2/catch.hpp>

#include "../../../attention_test_models.h"
#include "pass_test_support.h"
#include "passes/conversion/ort/lower_for_ort.h"

namespace fusionopt {
namespace {

const Node* Find(const Graph& graph, const std::string& op) {
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == op) return node.get();
  }
  return nullptr;
}

Result<passes::OrtLoweringReport> Lowered(Model& model) { return passes::LowerForOrt(model); }

TEST_CASE("ort attention: BERT over open B and S becomes MultiHeadAttention with the layout's heads", "[passes][ort]") {
  for (auto [heads, size] : {std::pair{2, 4}, {4, 2}, {8, 1}}) {
    auto model = pass_test::ParseOptimized(attention_test::WithHeads(attention_test::Bert(), heads, size), 3);
    auto report = Lowered(*model);
    REQUIRE(report.ok());
    REQUIRE(report->lowered.size() == 1);
    CHECK(report->lowered[0].written == "com.microsoft::MultiHeadAttention");
    const Node* mha = Find(*model->graph, "MultiHeadAttention");
    REQUIRE(mha != nullptr);
    CHECK(mha->GetInt("num_heads", 0) == heads);
    CHECK(mha->GetFloat("scale", 0.0f) == Approx(0.5));  // the scores divided by 2
    CHECK(mha->inputs().size() == 6);  // Q, K, V, -, -, attention_bias
    CHECK(mha->input(5) != nullptr);
  }
}

TEST_CASE("ort attention: ViT without a mask, and a combined projection split three ways", "[passes][ort]") {
  auto vit = pass_test::ParseOptimized(attention_test::Vit(), 3);
  REQUIRE(Lowered(*vit).ok());
  const Node* mha = Find(*vit->graph, "MultiHeadAttention");
  REQUIRE(mha != nullptr);
  CHECK(mha->GetInt("num_heads", 0) == 2);
  CHECK(mha->GetFloat("scale", 0.0f) == Approx(0.5));
  CHECK(mha->inputs().size() == 5);  // no attention_bias
  CHECK(mha->input(4) == nullptr);

  auto combined = pass_test::ParseOptimized(attention_test::Combined(false), 3);
  REQUIRE(Lowered(*combined).ok());
  mha = Find(*combined->graph, "MultiHeadAttention");
  REQUIRE(mha != nullptr);
  CHECK(mha->GetInt("num_heads", 0) == 2);
  const Node* split = Find(*combined->graph, "Split");  // Q, K, V as [B,S,8] slices of the projection
  REQUIRE(split != nullptr);
  CHECK(split->outputs().size() == 3);
}

TEST_CASE("ort attention: heads a feed supplies stay a function, with the reason", "[passes][ort]") {
  std::string text = attention_test::Bert();
  text.replace(text.find("  init int64[1] %heads = [2]\n"), 29, "");
  text.replace(text.find("float[B,1,1,S] %mask)"), 21, "float[B,1,1,S] %mask, int64[1] %heads)");
  auto model = pass_test::ParseOptimized(text, 3);
  auto report = Lowered(*model);
  REQUIRE(report.ok());
  CHECK(report->lowered.empty());
  REQUIRE(report->kept.size() == 1);
  CHECK(report->kept[0].reason == "a Reshape target the group reads is not known ahead of time");
  CHECK(Find(*model->graph, "MultiHeadAttention") == nullptr);
  CHECK(model->functions.size() == 1);
}

TEST_CASE("ort attention: inputs whose batch and sequence dims have no name are sized at the trials too", "[passes][ort]") {
  const std::string text = attention_test::UnnamedBert();
  auto model = pass_test::ParseOptimized(text, 3);
  auto report = Lowered(*model);
  REQUIRE(report.ok());
  REQUIRE(report->lowered.size() == 1);
  const Node* mha = Find(*model->graph, "MultiHeadAttention");
  REQUIRE(mha != nullptr);
  CHECK(mha->GetInt("num_heads", 0) == 2);
}

TEST_CASE("ort attention: attention on [B,H,S,D] operands split nowhere stays, with the reason", "[passes][ort]") {
  auto model = pass_test::ParseOptimized(attention_test::HeadsFirst("[1,1,7,7]"), 3);
  auto report = Lowered(*model);
  REQUIRE(report.ok());
  CHECK(report->lowered.empty());
  REQUIRE(report->kept.size() == 1);
  CHECK(report->kept[0].reason == "Q is not split into heads inside the group");
}

}  // namespace
}  // namespace fusionopt
