// Which elementwise nodes the CPU elementwise engine evaluates inside a fused body
// (passes/fusion/util/elementwise_support.h): WhyEngineCannotEvaluate's empty answer for the
// ops it computes, and each of its reasons, by op, opset, dtype and operand count.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion/util/elementwise_support.h"

using namespace fusionopt;
using namespace fusionopt::passes;

namespace {

// Nodes built by hand with the operand and result types each case needs (no inference).
struct Nodes {
  Graph graph;
  int count = 0;

  Value* Typed(DataType dtype) {
    Value* value = graph.CreateValue("v" + std::to_string(count++));
    value->type().dtype = dtype;
    value->type().shape = Shape{Dim::Known(4)};
    return value;
  }
  Node* Op(const std::string& op, std::vector<DataType> inputs, DataType result, const std::string& domain = "") {
    std::vector<Value*> operands;
    for (DataType dtype : inputs) operands.push_back(dtype == DataType::kUndefined ? nullptr : Typed(dtype));
    return graph.CreateNode(op, domain, operands, {Typed(result)}, "n" + std::to_string(count++));
  }
};

constexpr DataType kF = DataType::kFloat;

std::string Why(const Node* node, int64_t opset) { return WhyEngineCannotEvaluate(*node, opset).reason(); }

}  // namespace

TEST_CASE("elementwise support: what the engine computes has no reason against it", "[passes]") {
  Nodes n;
  CHECK_FALSE(WhyEngineCannotEvaluate(*n.Op("Add", {kF, kF}, kF), 17));
  CHECK_FALSE(WhyEngineCannotEvaluate(*n.Op("Add", {kF, kF}, kF), 7));
  CHECK_FALSE(WhyEngineCannotEvaluate(*n.Op("Relu", {DataType::kFloat16}, DataType::kFloat16), 17));
  CHECK_FALSE(WhyEngineCannotEvaluate(*n.Op("Where", {DataType::kBool, kF, kF}, kF), 17));
  // Clip's omitted min (an empty slot) is no operand.
  CHECK_FALSE(WhyEngineCannotEvaluate(*n.Op("Clip", {kF, DataType::kUndefined, kF}, kF), 17));
  CHECK_FALSE(WhyEngineCannotEvaluate(*n.Op("Gelu", {kF}, kF), 20));
}

TEST_CASE("elementwise support: other op classes, domains, legacy opsets and ops not yet defined", "[passes]") {
  Nodes n;
  CHECK(Why(n.Op("MatMul", {kF, kF}, kF), 17) == "not an elementwise op");
  CHECK(Why(n.Op("Gelu", {kF}, kF, "com.microsoft"), 17) == "not an elementwise op");
  CHECK(Why(n.Op("Add", {kF, kF}, kF), 6) == "opset before 7");
  CHECK(Why(n.Op("Gelu", {kF}, kF), 17) == "no CPU kernel for Gelu at opset 17");
  CHECK(Why(n.Op("Mish", {kF}, kF), 17) == "no CPU kernel for Mish at opset 17");
}

TEST_CASE("elementwise support: dtypes, operand counts and CastLike", "[passes]") {
  Nodes n;
  CHECK(Why(n.Op("Add", {DataType::kString, DataType::kString}, DataType::kString), 17) ==
        "dtype the engine does not compute");
  Node* cast = n.Op("Cast", {kF}, DataType::kString);  // the result's type counts too
  cast->SetAttribute(Attribute::Int("to", static_cast<int64_t>(DataType::kString)));
  CHECK(Why(cast, 17) == "dtype the engine does not compute");
  CHECK(Why(n.Op("Add", {kF, kF, kF}, kF), 17) == "the engine has no expression for this Add");
  CHECK(Why(n.Op("CastLike", {kF, DataType::kDouble}, DataType::kDouble), 17) ==
        "CastLike (its second input gives only a type)");
}

TEST_CASE("elementwise support: an op the engine does not define for its operand type", "[passes]") {
  Nodes n;
  CHECK(Why(n.Op("Not", {kF}, kF), 17) == "the engine does not compute Not on float");
  CHECK(Why(n.Op("Sqrt", {DataType::kInt64}, DataType::kInt64), 17) == "the engine does not compute Sqrt on int64");
  CHECK_FALSE(WhyEngineCannotEvaluate(*n.Op("Not", {DataType::kBool}, DataType::kBool), 17));
  // Where names its value operand's type, not the (non-bool) condition's.
  CHECK(Why(n.Op("Where", {DataType::kInt64, kF, kF}, kF), 17) == "the engine does not compute Where on float");
}
