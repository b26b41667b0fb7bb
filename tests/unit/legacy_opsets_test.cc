// Models of default-domain opsets 1-6: legacy op versions that compute what we implement run
// with the right numbers; those that do not are refused, naming the node and the feature.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "cpu_runtime/engine/session.h"
#include "cpu_test_support.h"
#include "ir/legacy_opsets.h"
#include "shape_inference/shape_inference.h"
#include "text_format/text_format.h"
#include "onnx_io/model_io.h"
#include "scratch_dir.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::cpu_test;
namespace fs = std::filesystem;

namespace {

// Parses, checks that the legacy check accepts, and runs on the CPU runtime.
std::vector<NamedTensor> RunLegacy(const std::string& text, const std::vector<NamedTensor>& feeds) {
  std::unique_ptr<Model> model = Parse(text);
  Status legacy = CheckLegacyOpsets(*model);
  INFO(legacy.message());
  REQUIRE(legacy.ok());
  auto session = Session::Create(*model);
  INFO(session.status().message());
  REQUIRE(session.ok());
  auto outputs = (*session)->Run(feeds);
  INFO(outputs.status().message());
  REQUIRE(outputs.ok());
  return std::move(outputs).value();
}

// A one-node model of default-domain `opset`.
std::string OneNode(int64_t opset, const std::string& signature, const std::string& node) {
  return "ir_version 3\nopset \"\" " + std::to_string(opset) + "\ngraph g " + signature + "\n{\n  " +
         node + "\n}\n";
}

Status LegacyStatus(const std::string& text) { return CheckLegacyOpsets(*Parse(text)); }

void RequireRefused(const Status& status, std::initializer_list<const char*> fragments) {
  INFO(status.message());
  REQUIRE(status.code() == ErrorCode::kUnsupported);
  for (const char* fragment : fragments) REQUIRE_THAT(status.message(), Catch::Contains(fragment));
}

// Through the file loader, as every CLI command reads a model.
Result<std::unique_ptr<Model>> SaveAndLoad(const std::string& text, const std::string& name) {
  test_support::ScratchDir dir("legacy_test_" + name);
  auto saved = SaveModel(*Parse(text), (dir / "model.onnx").string());
  REQUIRE(saved.ok());
  return LoadModel((dir / "model.onnx").string());
}

const char* kLegacyAxisAdd = R"(
ir_version 3
opset "" 6
graph g (float[2,3] %a, float[2] %b) -> (float[2,3] %y)
{
  %y = Add(%a, %b) {broadcast: 1, axis: 0} @bias_add
}
)";

}  // namespace

TEST_CASE("legacy broadcasting that numpy reproduces runs with the same numbers", "[legacy]") {
  RtTensor a = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  RtTensor b = Floats({3}, {10, 20, 30});
  SECTION("broadcast=1 without axis matches B to A's last dims") {
    auto out = RunLegacy(OneNode(6, "(float[2,3] %a, float[3] %b) -> (float[2,3] %y)",
                                 "%y = Add(%a, %b) {broadcast: 1}"),
                         {{"a", a}, {"b", b}});
    REQUIRE(Values(out[0].tensor) == std::vector<double>{11, 22, 33, 14, 25, 36});
  }
  SECTION("an axis equal to rank(A) - rank(B) is the same placement") {
    auto out = RunLegacy(OneNode(1, "(float[2,3] %a, float[3] %b) -> (float[2,3] %y)",
                                 "%y = Sub(%a, %b) {broadcast: 1, axis: 1, consumed_inputs: [0, 0]}"),
                         {{"a", a}, {"b", b}});
    REQUIRE(Values(out[0].tensor) == std::vector<double>{-9, -18, -27, -6, -15, -24});
  }
  SECTION("without broadcast, equal shapes are elementwise") {
    auto out = RunLegacy(OneNode(6, "(float[2,3] %a, float[2,3] %c) -> (float[2,3] %y)",
                                 "%y = Mul(%a, %c) {broadcast: 0}"),
                         {{"a", a}, {"c", a}});
    REQUIRE(Values(out[0].tensor) == std::vector<double>{1, 4, 9, 16, 25, 36});
  }
}

TEST_CASE("legacy broadcasting along another axis is refused, naming node and axis", "[legacy]") {
  RequireRefused(LegacyStatus(kLegacyAxisAdd),
                 {"node 'bias_add' (Add)", "Add-6", "broadcast=1 with axis=0", "opset 6"});

  SECTION("the version in force is named: Add-1 below opset 6") {
    std::string text = OneNode(5, "(float[2,3] %a, float[2] %b) -> (float[2,3] %y)",
                               "%y = Mul(%a, %b) {broadcast: 1, axis: 0} @scale");
    RequireRefused(LegacyStatus(text), {"node 'scale' (Mul)", "Mul-1", "axis=0"});
  }
  SECTION("inputs of unknown rank cannot be proven to agree") {
    std::string text = OneNode(6, "(float %a, float[3] %b) -> (float %y)",
                               "%y = Equal(%a, %b) {broadcast: 1, axis: 1} @eq");
    RequireRefused(LegacyStatus(text), {"node 'eq' (Equal)", "Equal-1", "unknown rank"});
  }
  SECTION("the CPU runtime refuses it too when a graph skips the loader") {
    std::unique_ptr<Model> model = Parse(kLegacyAxisAdd);
    auto session = Session::Create(*model);
    RequireRefused(session.status(), {"bias_add", "axis=0"});
  }
  SECTION("the same attributes at opset 7 are not legacy") {
    std::string text = kLegacyAxisAdd;
    text.replace(text.find("opset \"\" 6"), 10, "opset \"\" 7");
    REQUIRE(LegacyStatus(text).ok());
  }
}

TEST_CASE("training modes of BatchNormalization and Dropout before opset 7 are refused", "[legacy]") {
  const std::string bn_signature =
      "(float[1,2,1,2] %x, float[2] %s, float[2] %b, float[2] %m, float[2] %v) -> (float[1,2,1,2] %y)";
  SECTION("BatchNormalization-6 defaults to training mode") {
    RequireRefused(LegacyStatus(OneNode(6, bn_signature, "%y = BatchNormalization(%x, %s, %b, %m, %v) @bn")),
                   {"node 'bn' (BatchNormalization)", "BatchNormalization-6", "is_test=0"});
  }
  SECTION("Dropout-1 with is_test=0") {
    RequireRefused(LegacyStatus(OneNode(3, "(float[4] %x) -> (float[4] %y)",
                                        "%y = Dropout(%x) {is_test: 0, ratio: 0.5} @drop")),
                   {"node 'drop' (Dropout)", "Dropout-1", "is_test=0"});
  }
  SECTION("BatchNormalization-6 in test mode normalizes with the given statistics") {
    auto out = RunLegacy(OneNode(6, bn_signature,
                                 "%y = BatchNormalization(%x, %s, %b, %m, %v) {is_test: 1, epsilon: 0.0}"),
                         {{"x", Floats({1, 2, 1, 2}, {1, 3, 10, 20})},
                          {"s", Floats({2}, {2, 1})},
                          {"b", Floats({2}, {0, 1})},
                          {"m", Floats({2}, {1, 10})},
                          {"v", Floats({2}, {4, 25})}});
    REQUIRE(Values(out[0].tensor) == std::vector<double>{0, 2, 1, 3});
  }
  SECTION("Dropout-6 in test mode is the identity with a mask of the input's type") {
    auto out = RunLegacy(OneNode(6, "(float[3] %x) -> (float[3] %y, float[3] %mask)",
                                 "%y, %mask = Dropout(%x) {is_test: 1}"),
                         {{"x", Floats({3}, {1, -2, 3})}});
    REQUIRE(Values(out[0].tensor) == std::vector<double>{1, -2, 3});
    REQUIRE(out[1].tensor.dtype() == DataType::kFloat);
    REQUIRE(Values(out[1].tensor) == std::vector<double>{1, 1, 1});
  }
}

TEST_CASE("arguments that later became inputs or changed form are refused", "[legacy]") {
  SECTION("Reshape-1's shape attribute") {
    RequireRefused(LegacyStatus(OneNode(4, "(float[2,3] %x) -> (float[6] %y)",
                                        "%y = Reshape(%x) {shape: [6]} @flat")),
                   {"node 'flat' (Reshape)", "Reshape-1", "`shape` attribute"});
    REQUIRE(LegacyStatus(OneNode(5, "(float[2,3] %x, int64[1] %s) -> (float[6] %y)",
                                 "%y = Reshape(%x, %s)"))
                .ok());
  }
  SECTION("Cast-1's type name") {
    RequireRefused(LegacyStatus(OneNode(5, "(float[2] %x) -> (int32[2] %y)",
                                        "%y = Cast(%x) {to: \"INT32\"} @cast")),
                   {"node 'cast' (Cast)", "Cast-1", "'INT32'"});
    REQUIRE(LegacyStatus(OneNode(6, "(float[2] %x) -> (int32[2] %y)", "%y = Cast(%x) {to: 6}")).ok());
  }
  SECTION("Tile-1's tiles and axis inputs") {
    RequireRefused(LegacyStatus(OneNode(5, "(float[2] %x, int64[] %t, int64[] %a) -> (float[4] %y)",
                                        "%y = Tile(%x, %t, %a) @tile")),
                   {"node 'tile' (Tile)", "Tile-1", "`tiles` and `axis`"});
  }
  SECTION("Pad-1's paddings") {
    RequireRefused(LegacyStatus(OneNode(1, "(float[2] %x) -> (float[4] %y)",
                                        "%y = Pad(%x) {paddings: [1, 1]} @pad")),
                   {"node 'pad' (Pad)", "Pad-1", "`paddings`"});
  }
  SECTION("Upsample-1's per-dimension scales") {
    RequireRefused(LegacyStatus(OneNode(6, "(float[1,1,2,2] %x) -> (float[1,1,4,4] %y)",
                                        "%y = Upsample(%x) {height_scale: 2.0, width_scale: 2.0} @up")),
                   {"node 'up' (Upsample)", "Upsample-1", "height_scale"});
  }
  SECTION("Split-1 with lengths as input 1, or without an axis") {
    RequireRefused(LegacyStatus(OneNode(1, "(float[4] %x, int64[2] %s) -> (float[1] %a, float[3] %b)",
                                        "%a, %b = Split(%x, %s) {axis: 0} @split")),
                   {"node 'split' (Split)", "Split-1", "input 1"});
    RequireRefused(LegacyStatus(OneNode(1, "(float[4] %x) -> (float[2] %a, float[2] %b)",
                                        "%a, %b = Split(%x) @split")),
                   {"Split-1", "no `axis`"});
    REQUIRE(LegacyStatus(OneNode(2, "(float[4] %x) -> (float[2] %a, float[2] %b)", "%a, %b = Split(%x)")).ok());
  }
  SECTION("Lp pools of a non-integral p") {
    RequireRefused(LegacyStatus(OneNode(1, "(float[1,1,2,2] %x) -> (float[1,1,1,1] %y)",
                                        "%y = GlobalLpPool(%x) {p: 2.5} @lp")),
                   {"node 'lp' (GlobalLpPool)", "GlobalLpPool-1", "p=2.5"});
    RequireRefused(LegacyStatus(OneNode(1, "(float[1,1,2,2] %x) -> (float[1,1,1,1] %y)",
                                        "%y = LpPool(%x) {p: 2.0} @lp")),
                   {"LpPool-1", "kernel_shape"});
  }
}

TEST_CASE("legacy versions that compute the same run with the right numbers", "[legacy]") {
  SECTION("Split-1 with an axis attribute") {
    auto out = RunLegacy(OneNode(1, "(float[2,2] %x) -> (float[2,1] %a, float[2,1] %b)",
                                 "%a, %b = Split(%x) {axis: 1}"),
                         {{"x", Floats({2, 2}, {1, 2, 3, 4})}});
    REQUIRE(Values(out[0].tensor) == std::vector<double>{1, 3});
    REQUIRE(Values(out[1].tensor) == std::vector<double>{2, 4});
  }
  SECTION("GlobalLpPool-1 with an integral float p") {
    auto out = RunLegacy(OneNode(1, "(float[1,1,2,2] %x) -> (float[1,1,1,1] %y)",
                                 "%y = GlobalLpPool(%x) {p: 2.0}"),
                         {{"x", Floats({1, 1, 2, 2}, {3, 4, 0, 0})}});
    REQUIRE(Values(out[0].tensor) == std::vector<double>{5});
  }
  SECTION("Gemm-6 broadcasting C, Clip-1 with one bound, Sum-1 with its hint") {
    auto out = RunLegacy(R"(
ir_version 3
opset "" 6
graph g (float[2,2] %a, float[2,2] %b, float[2] %c) -> (float[2,2] %y)
{
  %g = Gemm(%a, %b, %c) {broadcast: 1, transB: 1}
  %k = Clip(%g) {max: 10.0}
  %y = Sum(%k, %k) {consumed_inputs: [0, 0]}
}
)",
                         {{"a", Floats({2, 2}, {1, 2, 3, 4})},
                          {"b", Floats({2, 2}, {1, 0, 1, 1})},
                          {"c", Floats({2}, {-100, 1})}});
    // A·Bᵀ = [[1, 3], [3, 7]]; + C = [[-99, 4], [-97, 8]]; clipped above at 10; doubled.
    REQUIRE(Values(out[0].tensor) == std::vector<double>{-198, 8, -194, 16});
  }
}

TEST_CASE("versions with other defaults read them per opset", "[legacy]") {
  SECTION("Selu-1 uses its four-decimal coefficients, Selu-6 the exact ones") {
    const std::string signature = "(float[1] %x) -> (float[1] %y)";
    auto old = RunLegacy(OneNode(1, signature, "%y = Selu(%x)"), {{"x", Floats({1}, {-1})}});
    auto modern = RunLegacy(OneNode(6, signature, "%y = Selu(%x)"), {{"x", Floats({1}, {-1})}});
    const double expm1 = std::exp(-1.0) - 1.0;
    REQUIRE(Values(old[0].tensor)[0] == Approx(1.0507 * 1.6732 * expm1).epsilon(1e-6));
    REQUIRE(Values(modern[0].tensor)[0] == Approx(1.0507009873554805 * 1.6732632423543772 * expm1).epsilon(1e-6));
    REQUIRE(Values(old[0].tensor)[0] != Values(modern[0].tensor)[0]);
  }
  SECTION("Concat-1 without an axis joins along axis 1, in the kernel and in inference") {
    std::unique_ptr<Model> model = Parse(R"(
ir_version 3
opset "" 3
graph g (float[2,1] %a, float[2,2] %b) -> (float %y)
{
  %y = Concat(%a, %b)
}
)");
    InferShapes(*model);
    REQUIRE(ShapeToString(*model->graph->outputs()[0]->shape()) == "[2,3]");
    auto session = Session::Create(*model);
    REQUIRE(session.ok());
    auto out = (*session)->Run({{"a", Floats({2, 1}, {1, 2})}, {"b", Floats({2, 2}, {3, 4, 5, 6})}});
    REQUIRE(out.ok());
    REQUIRE(out->at(0).tensor.dims() == std::vector<int64_t>{2, 3});
    REQUIRE(Values(out->at(0).tensor) == std::vector<double>{1, 3, 4, 2, 5, 6});
  }
  SECTION("Concat-4 still requires the axis") {
    std::unique_ptr<Model> model = Parse(OneNode(4, "(float[2,1] %a, float[2,2] %b) -> (float %y)",
                                                 "%y = Concat(%a, %b)"));
    REQUIRE_FALSE(Session::Create(*model).ok());
  }
}

TEST_CASE("the check reaches subgraphs and leaves other domains alone", "[legacy]") {
  SECTION("a legacy node inside an If branch") {
    RequireRefused(LegacyStatus(R"(
ir_version 3
opset "" 6
graph g (bool[] %c, float[2,3] %a, float[2] %b) -> (float[2,3] %y)
{
  %y = If(%c) {then_branch: graph t () -> (float[2,3] %t1) {
    %t1 = Add(%a, %b) {broadcast: 1, axis: 0} @inner_add
  }, else_branch: graph e () -> (float[2,3] %e1) {
    %e1 = Identity(%a)
  }}
}
)"),
                   {"node 'inner_add' (Add)", "axis=0"});
  }
  SECTION("an op of the same name in another domain") {
    REQUIRE(LegacyStatus(R"(
ir_version 3
opset "" 4
opset "com.example" 1
graph g (float[2,3] %x) -> (float[6] %y)
{
  %y = com.example::Reshape(%x) {shape: [6]}
}
)")
                .ok());
  }
}

TEST_CASE("the loader accepts opsets 1-28 and refuses legacy features on load", "[legacy]") {
  SECTION("an opset-1 model loads and runs") {
    auto model = SaveAndLoad(OneNode(1, "(bool[3] %x) -> (bool[3] %y)", "%y = Not(%x)"), "not");
    INFO(model.status().message());
    REQUIRE(model.ok());
    REQUIRE((*model)->OpsetFor("") == 1);
    auto session = Session::Create(**model);
    REQUIRE(session.ok());
    RtTensor x = RtTensor::Allocate(DataType::kBool, {3});
    x.data<uint8_t>()[0] = 1, x.data<uint8_t>()[1] = 0, x.data<uint8_t>()[2] = 1;
    auto out = (*session)->Run({{"x", x}});
    REQUIRE(out.ok());
    REQUIRE(Values(out->at(0).tensor) == std::vector<double>{0, 1, 0});
  }
  SECTION("a legacy feature is refused by the loader with the node named") {
    auto model = SaveAndLoad(kLegacyAxisAdd, "axis");
    RequireRefused(model.status(), {"node 'bias_add' (Add)", "Add-6", "axis=0"});
  }
  SECTION("opsets outside 1-28 are still refused") {
    auto zero = SaveAndLoad(OneNode(0, "(float[2] %x) -> (float[2] %y)", "%y = Relu(%x)"), "zero");
    RequireRefused(zero.status(), {"opset 0", "1-28"});
    auto newer = SaveAndLoad(OneNode(29, "(float[2] %x) -> (float[2] %y)", "%y = Relu(%x)"), "newer");
    RequireRefused(newer.status(), {"opset 29", "1-28"});
  }
}
