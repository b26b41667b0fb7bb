// ir/batchnorm.h: BatchNormalization as a per-channel affine map, the one home of its
// conditions, arithmetic and Mul/Add form (fold-batchnorm, lower-batchnorm, the CPU kernel and
// the CUDA generator all use it).
#include <catch2/catch.hpp>

#include <cmath>

#include "ir/batchnorm.h"
#include "text_format/text_format.h"

using namespace fusionopt;

namespace {

std::unique_ptr<Model> BatchNormModel(const std::string& attributes = "", const std::string& inputs = "",
                                      const std::string& variance = "[0.25, 1.0, 4.0]", int opset = 17) {
  auto model = ParseModel(R"(ir_version 8
opset "" )" + std::to_string(opset) + R"(
graph main (float[2,3,4] %x)" + inputs + R"() -> (float[2,3,4] %y)
  init float[3] %gamma = [1.5, -0.5, 2.0]
  init float[3] %beta = [0.25, 0.0, -1.0]
  init float[3] %mean = [0.5, -0.25, 1.0]
  init float[3] %var = )" + variance + R"(
{
  %y = BatchNormalization(%x, %gamma, %beta, %mean, %var))" + attributes + R"( @bn
}
)");
  INFO(model.status().message());
  REQUIRE(model.ok());
  return std::move(*model);
}

Node& OnlyNode(Model& model) { return *model.graph->nodes().front(); }

}  // namespace

TEST_CASE("BatchNormChannelAffine is s = γ/√(σ² + ε), t = β − μ·s per channel", "[ir]") {
  ChannelAffine affine = BatchNormChannelAffine({1.5, -0.5}, {0.25, 0.0}, {0.5, -0.25}, {0.25, 1.0}, 0.0);
  CHECK(affine.scale == std::vector<double>{3.0, -0.5});
  CHECK(affine.shift == std::vector<double>{0.25 - 0.5 * 3.0, 0.0 - (-0.25) * (-0.5)});
  CHECK(std::isinf(BatchNormChannelAffine({1.0}, {0.0}, {0.0}, {0.0}, 0.0).scale[0]));  // the formula's answer
}

TEST_CASE("BatchNormAffine reads constant [C] statistics under the caller's initializer rule", "[ir]") {
  auto model = BatchNormModel();
  auto affine = BatchNormAffine(OnlyNode(*model), 3, InitializerRule::kFeedsOverride);
  REQUIRE(affine.ok());
  CHECK(affine->scale[2] == Approx(2.0 / std::sqrt(4.0 + 1e-5)));
  CHECK(BatchNormAffine(OnlyNode(*model), 4, InitializerRule::kFeedsOverride).why_not().reason() ==
        "statistics are not [C]");

  auto fed_mean = BatchNormModel("", ", float[3] %mean");  // the mean is a default a feed may replace
  CHECK(BatchNormAffine(OnlyNode(*fed_mean), 3, InitializerRule::kFeedsOverride).why_not().reason() ==
        "non-constant statistics");
  CHECK(BatchNormAffine(OnlyNode(*fed_mean), 3, InitializerRule::kAllConstant).ok());

  auto negative = BatchNormModel("", "", "[0.25, -1.0, 4.0]");
  CHECK(BatchNormAffine(OnlyNode(*negative), 3, InitializerRule::kAllConstant).why_not().reason() ==
        "variance + epsilon is not positive");
}

TEST_CASE("WhyNotInferenceBatchNorm names training mode, legacy spatial=0 and the opset range", "[ir]") {
  CHECK_FALSE(WhyNotInferenceBatchNorm(OnlyNode(*BatchNormModel()), 17));
  CHECK(WhyNotInferenceBatchNorm(OnlyNode(*BatchNormModel(" {training_mode: 1}")), 17).reason() == "training mode");
  CHECK(WhyNotInferenceBatchNorm(OnlyNode(*BatchNormModel(" {spatial: 0}", "", "[0.25, 1.0, 4.0]", 8)), 8).reason() ==
        "spatial=0 (per-activation statistics)");
  CHECK(WhyNotInferenceBatchNorm(OnlyNode(*BatchNormModel()), 6).reason() == "BatchNormalization opset outside 7-28");
}

TEST_CASE("WriteBatchNormAsAffine writes Mul and Add with [C,1] constants before the BatchNormalization", "[ir]") {
  auto model = BatchNormModel();
  Graph& graph = *model->graph;
  Node& batchnorm = OnlyNode(*model);
  auto written = WriteBatchNormAsAffine(graph, batchnorm, 17, InitializerRule::kFeedsOverride);
  REQUIRE(written.ok());
  const BatchNormAsAffine nodes = *written;
  std::vector<std::string> order;
  for (const auto& node : graph.nodes()) order.push_back(node->name());
  CHECK(order == std::vector<std::string>{"bn_scale", "bn_shift", "bn"});
  CHECK(nodes.mul->input(0) == batchnorm.input(0));
  CHECK(nodes.add->input(0) == nodes.mul->output(0));
  const TensorPtr scale = nodes.mul->input(1)->initializer(), shift = nodes.add->input(1)->initializer();
  REQUIRE(scale != nullptr);
  REQUIRE(shift != nullptr);
  CHECK(scale->dims() == std::vector<int64_t>{3, 1});
  CHECK((*scale->AsDoubles())[0] == Approx(1.5 / std::sqrt(0.25 + 1e-5)));
  CHECK((*shift->AsDoubles())[1] == Approx(0.0 - (-0.25) * (-0.5 / std::sqrt(1.0 + 1e-5))));

  auto fed = BatchNormModel("", ", float[3] %var");
  CHECK(WriteBatchNormAsAffine(*fed->graph, OnlyNode(*fed), 17, InitializerRule::kFeedsOverride).why_not().reason() ==
        "non-constant statistics");
  CHECK(fed->graph->nodes().size() == 1);  // nothing written when it declines
}
