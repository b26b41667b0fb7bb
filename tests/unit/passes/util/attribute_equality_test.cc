// Attributes compared by value (passes/util/attribute_equality.h): SortedAttributes orders by
// name, SameAttribute compares name, kind and value (floats bit for bit, tensors by content,
// graphs never), SameAttributes ignores the order attributes were written in.
#include <catch2/catch.hpp>

#include <limits>

#include "pass_test_support.h"
#include "passes/util/attribute_equality.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::FindNode;
using pass_test::ParseInferred;

namespace {

TensorPtr FloatTensor(std::vector<float> values) {
  const int64_t count = static_cast<int64_t>(values.size());
  return std::make_shared<Tensor>(Tensor::FromValues<float>(DataType::kFloat, {count}, values));
}

Attribute TensorAttribute(const char* name, TensorPtr tensor) {
  Attribute attribute;
  attribute.name = name;
  attribute.kind = AttributeKind::kTensor;
  attribute.t = std::move(tensor);
  return attribute;
}

}  // namespace

TEST_CASE("attribute equality: SortedAttributes orders by name, SameAttributes ignores order", "[passes]") {
  auto model = ParseInferred(R"(ir_version 8
opset "" 17
graph main (float[2,3] %x) -> (float[2,3] %a, float[2,3] %b, float[2,3] %c)
{
  %a = Softmax(%x) {axis: 1} @first
  %b = LeakyRelu(%x) {alpha: 0.5} @second
  %c = LeakyRelu(%x) {alpha: 0.25} @third
}
)");
  Graph& graph = *model->graph;
  Node* first = FindNode(graph, "first");
  Node* second = FindNode(graph, "second");
  Node* third = FindNode(graph, "third");
  first->SetAttribute(Attribute::Ints("perm", {1, 0}));
  first->SetAttribute(Attribute::Float("alpha", 2.0f));
  std::vector<const Attribute*> sorted = SortedAttributes(*first);
  REQUIRE(sorted.size() == 3);
  CHECK(sorted[0]->name == "alpha");
  CHECK(sorted[1]->name == "axis");
  CHECK(sorted[2]->name == "perm");

  // The same three attributes written in another order.
  Node* copy = graph.CreateNode("Softmax", "", {graph.FindValue("x")}, {graph.CreateValue("d")}, "copy");
  copy->SetAttribute(Attribute::Float("alpha", 2.0f));
  copy->SetAttribute(Attribute::Ints("perm", {1, 0}));
  copy->SetAttribute(Attribute::Int("axis", 1));
  CHECK(SameAttributes(*first, *copy));
  CHECK_FALSE(SameAttributes(*second, *third));  // alpha 0.5 against 0.25
  CHECK_FALSE(SameAttributes(*first, *second));  // three attributes against one
  CHECK(SameAttributes(*second, *second));
}

TEST_CASE("attribute equality: name, kind and value must all match", "[passes]") {
  CHECK(SameAttribute(Attribute::Int("axis", 1), Attribute::Int("axis", 1)));
  CHECK_FALSE(SameAttribute(Attribute::Int("axis", 1), Attribute::Int("axis", 2)));
  CHECK_FALSE(SameAttribute(Attribute::Int("axis", 1), Attribute::Int("keepdims", 1)));
  CHECK_FALSE(SameAttribute(Attribute::Int("alpha", 1), Attribute::Float("alpha", 1.0f)));  // kinds differ
  CHECK(SameAttribute(Attribute::Ints("perm", {0, 2, 1}), Attribute::Ints("perm", {0, 2, 1})));
  CHECK_FALSE(SameAttribute(Attribute::Ints("perm", {0, 2, 1}), Attribute::Ints("perm", {0, 1, 2})));

  Attribute a_ref = Attribute::Float("alpha", 0.0f);
  a_ref.ref_attr_name = "alpha";
  CHECK_FALSE(SameAttribute(a_ref, Attribute::Float("alpha", 0.0f)));  // a reference is not a value
}

TEST_CASE("attribute equality: floats compare bit for bit", "[passes]") {
  CHECK(SameAttribute(Attribute::Float("alpha", 0.5f), Attribute::Float("alpha", 0.5f)));
  CHECK_FALSE(SameAttribute(Attribute::Float("alpha", 0.0f), Attribute::Float("alpha", -0.0f)));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(SameAttribute(Attribute::Float("alpha", nan), Attribute::Float("alpha", nan)));

  Attribute floats_a;
  floats_a.name = "scales";
  floats_a.kind = AttributeKind::kFloats;
  floats_a.floats = {1.0f, nan};
  Attribute floats_b = floats_a.CopyWithoutGraphs();
  CHECK(SameAttribute(floats_a, floats_b));
  floats_b.floats = {1.0f, 2.0f};
  CHECK_FALSE(SameAttribute(floats_a, floats_b));
  floats_b.floats = {1.0f};
  CHECK_FALSE(SameAttribute(floats_a, floats_b));
}

TEST_CASE("attribute equality: tensors by content, graphs never", "[passes]") {
  // Two tensors with the same content are equal though they are different objects.
  const Attribute one_two = TensorAttribute("value", FloatTensor({1, 2}));
  CHECK(SameAttribute(one_two, TensorAttribute("value", FloatTensor({1, 2}))));
  CHECK_FALSE(SameAttribute(one_two, TensorAttribute("value", FloatTensor({1, 3}))));
  CHECK_FALSE(SameAttribute(one_two, TensorAttribute("value", nullptr)));

  Attribute graph_attribute;
  graph_attribute.name = "body";
  graph_attribute.kind = AttributeKind::kGraph;
  CHECK_FALSE(SameAttribute(graph_attribute, graph_attribute));  // not even with itself
}
