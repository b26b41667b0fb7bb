// ConstantValueOf and its typed reads: the one answer to "what constant does this value hold",
// under the initializer rule each caller names (a graph input's initializer is a default a feed
// may replace from IR version 4 on).
#include <catch2/catch.hpp>

#include "ir/constant_value.h"

using namespace fusionopt;

namespace {

template <typename T>
TensorPtr TensorOf(DataType dtype, std::vector<int64_t> dims, std::vector<T> values) {
  return std::make_shared<Tensor>(Tensor::FromValues<T>(dtype, std::move(dims), values));
}

struct Constants {
  Graph graph;
  Value* fixed = graph.CreateValue("fixed");          // an initializer only
  Value* default_ = graph.CreateValue("default");     // an initializer that is also a graph input
  Value* computed = graph.CreateValue("computed");    // a graph input only
  Value* from_node = graph.CreateValue("from_node");  // a Constant node's value_ints
  Constants() {
    graph.SetInitializer(fixed, TensorOf<int64_t>(DataType::kInt64, {2}, {4, 8}));
    graph.SetInitializer(default_, TensorOf<int64_t>(DataType::kInt64, {2}, {2, 16}));
    graph.AddInput(default_);
    graph.AddInput(computed);
    Node* constant = graph.CreateNode("Constant", "", {}, {from_node}, "constant");
    Attribute ints;
    ints.name = "value_ints";
    ints.kind = AttributeKind::kInts;
    ints.ints = {3, -1};
    constant->mutable_attributes().push_back(std::move(ints));
  }
};

using Ints = std::optional<std::vector<int64_t>>;

// Makes initializers (never graph inputs) of one graph.
struct Initializers {
  Graph graph;
  Value* operator()(const char* name, TensorPtr tensor) {
    Value* value = graph.CreateValue(name);
    graph.SetInitializer(value, std::move(tensor));
    return value;
  }
};

}  // namespace

TEST_CASE("InitializerRuleOf: feeds override initializers from IR version 4, and when it is unknown", "[ir]") {
  CHECK(InitializerRuleOf(3) == InitializerRule::kAllConstant);
  CHECK(InitializerRuleOf(1) == InitializerRule::kAllConstant);
  CHECK(InitializerRuleOf(4) == InitializerRule::kFeedsOverride);
  CHECK(InitializerRuleOf(10) == InitializerRule::kFeedsOverride);
  CHECK(InitializerRuleOf(0) == InitializerRule::kFeedsOverride);
}

TEST_CASE("ConstantValueOf reads an overridable initializer only where the rule makes it constant", "[ir]") {
  Constants c;
  for (InitializerRule rule : {InitializerRule::kFeedsOverride, InitializerRule::kAllConstant}) {
    CHECK(ConstantInts(c.fixed, rule) == Ints(std::vector<int64_t>{4, 8}));
    CHECK(ConstantInts(c.from_node, rule) == Ints(std::vector<int64_t>{3, -1}));
    CHECK(ConstantValueOf(*c.computed, rule) == nullptr);
    CHECK_FALSE(ConstantInts(nullptr, rule).has_value());
  }
  CHECK(ConstantValueOf(*c.default_, InitializerRule::kFeedsOverride) == nullptr);
  CHECK(ConstantInts(c.default_, InitializerRule::kAllConstant) == Ints(std::vector<int64_t>{2, 16}));
}

TEST_CASE("ConstantInts takes integer tensors of rank 0 or 1 only", "[ir]") {
  Initializers initializer;
  const InitializerRule rule = InitializerRule::kAllConstant;
  CHECK(ConstantInts(initializer("i32", TensorOf<int32_t>(DataType::kInt32, {2}, {7, -2})), rule) ==
        Ints(std::vector<int64_t>{7, -2}));
  CHECK(ConstantInts(initializer("scalar", TensorOf<int64_t>(DataType::kInt64, {}, {5})), rule) ==
        Ints(std::vector<int64_t>{5}));
  CHECK_FALSE(ConstantInts(initializer("matrix", TensorOf<int64_t>(DataType::kInt64, {1, 2}, {1, 2})), rule));
  CHECK_FALSE(ConstantInts(initializer("float", TensorOf<float>(DataType::kFloat, {1}, {1.0f})), rule));
  CHECK_FALSE(ConstantInts(initializer("bool", TensorOf<uint8_t>(DataType::kBool, {1}, {1})), rule));
}

TEST_CASE("ConstantFloats and ConstantScalar read floating and one-element constants", "[ir]") {
  Initializers initializer;
  const InitializerRule rule = InitializerRule::kAllConstant;
  Value* scales = initializer("scales", TensorOf<float>(DataType::kFloat, {2}, {1.0f, 2.5f}));
  CHECK(ConstantFloats(scales, rule) == std::optional<std::vector<double>>(std::vector<double>{1.0, 2.5}));
  CHECK_FALSE(ConstantFloats(initializer("ints", TensorOf<int64_t>(DataType::kInt64, {1}, {1})), rule));
  CHECK_FALSE(ConstantScalar(scales, rule).has_value());  // two elements
  CHECK(ConstantScalar(initializer("half", TensorOf<float>(DataType::kFloat, {1, 1}, {0.5f})), rule) ==
        std::optional<double>(0.5));
  CHECK(ConstantScalar(initializer("three", TensorOf<int32_t>(DataType::kInt32, {}, {3})), rule) ==
        std::optional<double>(3.0));
}
