// Constant floating-point operands (passes/util/constant_operand.h): ReadConstantOperand reads
// initializers, Constant nodes and ConstantOfShape splats of a floating-point dtype, refuses
// integers, computed values and feed-overridable defaults; NumElements, NumBytes and Values.
#include <catch2/catch.hpp>

#include "pass_test_support.h"
#include "passes/util/constant_operand.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::FindNode;
using pass_test::ParseInferred;

namespace {

const char* const kOperands = R"(ir_version 8
opset "" 17
graph main (float[2,3] %x, int64[2] %runtime_dims) -> (float[2,3] %y)
  init float[3] %w = [1.0, -2.5, 4.0]
  init float16[2,2] %h = [1.0, 2.0, 3.0, 0.5]
  init int64[2] %dims = [2, 3]
{
  %c = Constant() {value: tensor double[2] [7.0, 8.0]} @constant
  %splat = ConstantOfShape(%dims) {value: tensor float[1] [0.5]} @splat
  %zeros = ConstantOfShape(%dims) @zeros
  %ints = ConstantOfShape(%dims) {value: tensor int64[1] [3]} @ints
  %open = ConstantOfShape(%runtime_dims) {value: tensor float[1] [1.0]} @open
  %y = Add(%x, %splat) @add
}
)";

}  // namespace

TEST_CASE("ReadConstantOperand: initializers and Constant nodes hold a tensor", "[passes]") {
  auto model = ParseInferred(kOperands);
  Graph& graph = *model->graph;
  auto w = ReadConstantOperand(graph.FindValue("w"), *model);
  REQUIRE(w.has_value());
  CHECK(w->value == graph.FindValue("w"));
  CHECK(w->dtype == DataType::kFloat);
  CHECK(w->dims == std::vector<int64_t>{3});
  CHECK(w->tensor != nullptr);
  CHECK(w->splat == nullptr);
  CHECK(w->NumElements() == 3);
  CHECK(w->NumBytes() == 12);
  CHECK(w->Values() == std::vector<double>{1.0, -2.5, 4.0});

  auto h = ReadConstantOperand(graph.FindValue("h"), *model);
  REQUIRE(h.has_value());
  CHECK(h->dtype == DataType::kFloat16);
  CHECK(h->NumElements() == 4);
  CHECK(h->NumBytes() == 8);  // two bytes an element
  CHECK(h->Values() == std::vector<double>{1.0, 2.0, 3.0, 0.5});

  auto c = ReadConstantOperand(graph.FindValue("c"), *model);
  REQUIRE(c.has_value());
  CHECK(c->dtype == DataType::kDouble);
  CHECK(c->NumBytes() == 16);
  CHECK(c->Values() == std::vector<double>{7.0, 8.0});
}

TEST_CASE("ReadConstantOperand: a ConstantOfShape over a constant shape is a splat", "[passes]") {
  auto model = ParseInferred(kOperands);
  Graph& graph = *model->graph;
  auto splat = ReadConstantOperand(graph.FindValue("splat"), *model);
  REQUIRE(splat.has_value());
  CHECK(splat->splat == FindNode(graph, "splat"));
  CHECK(splat->tensor == nullptr);
  CHECK(splat->dtype == DataType::kFloat);
  CHECK(splat->dims == std::vector<int64_t>{2, 3});
  CHECK(splat->splat_value == 0.5);
  CHECK(splat->NumElements() == 6);
  CHECK(splat->NumBytes() == 24);
  CHECK(splat->Values() == std::vector<double>(6, 0.5));

  // No `value` attribute: the spec's default, float zeros.
  auto zeros = ReadConstantOperand(graph.FindValue("zeros"), *model);
  REQUIRE(zeros.has_value());
  CHECK(zeros->dtype == DataType::kFloat);
  CHECK(zeros->Values() == std::vector<double>(6, 0.0));
}

TEST_CASE("ReadConstantOperand: integers, computed values and open shapes are not operands", "[passes]") {
  auto model = ParseInferred(kOperands);
  Graph& graph = *model->graph;
  CHECK_FALSE(ReadConstantOperand(nullptr, *model).has_value());
  CHECK_FALSE(ReadConstantOperand(graph.FindValue("dims"), *model).has_value());   // int64 initializer
  CHECK_FALSE(ReadConstantOperand(graph.FindValue("ints"), *model).has_value());   // int64 splat
  CHECK_FALSE(ReadConstantOperand(graph.FindValue("open"), *model).has_value());   // shape from a feed
  CHECK_FALSE(ReadConstantOperand(graph.FindValue("x"), *model).has_value());      // graph input
  CHECK_FALSE(ReadConstantOperand(graph.FindValue("y"), *model).has_value());      // computed
}

TEST_CASE("ReadConstantOperand: an initializer that is also an input is constant only before IR 4", "[passes]") {
  const std::string text = R"(
opset "" 17
graph main (float[2] %x, float[2] %d) -> (float[2] %y)
  init float[2] %d = [1.0, 2.0]
{
  %y = Add(%x, %d) @add
}
)";
  auto ir8 = ParseInferred("ir_version 8" + text);
  CHECK_FALSE(ReadConstantOperand(ir8->graph->FindValue("d"), *ir8).has_value());
  auto ir3 = ParseInferred("ir_version 3" + text);
  auto d = ReadConstantOperand(ir3->graph->FindValue("d"), *ir3);
  REQUIRE(d.has_value());
  CHECK(d->Values() == std::vector<double>{1.0, 2.0});
}
