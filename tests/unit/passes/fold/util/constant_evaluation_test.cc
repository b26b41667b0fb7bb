// Evaluating one node with the CPU runtime's kernel (passes/fold/util/constant_evaluation.h):
// RuntimeHasKernel by op and opset; EvaluateNode's values, an omitted output left null, and
// its refusals (no kernel, string tensors, a kernel's own error) with their messages.
#include <catch2/catch.hpp>

#include "pass_test_support.h"
#include "passes/fold/util/constant_evaluation.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::FindNode;
using pass_test::ParseInferred;

namespace {

const char* const kNodes = R"(ir_version 8
opset "" 17
opset "com.example" 1
graph main (float[2] %x, float[2] %w, int64[2] %shape, string[1] %text) -> (float[2] %sum)
{
  %sum = Add(%x, %w) @add
  %kept, %mask = Dropout(%x) @dropout
  %alone, = Dropout(%x) @unmasked
  %r = Reshape(%x, %shape) @reshape
  %g = Gelu(%x) @gelu
  %f = com.example::Foo(%x) @foo
  %t = Identity(%text) @identity
}
)";

template <typename T>
TensorPtr Constant(DataType dtype, std::vector<int64_t> dims, std::vector<T> values) {
  return std::make_shared<Tensor>(Tensor::FromValues<T>(dtype, std::move(dims), values));
}

std::vector<float> Floats(const TensorPtr& tensor) {
  REQUIRE(tensor != nullptr);
  auto values = tensor->values<float>();
  return std::vector<float>(values.begin(), values.end());
}

}  // namespace

TEST_CASE("RuntimeHasKernel: by op, domain and the model's opset", "[passes]") {
  auto model = ParseInferred(kNodes);
  Graph& graph = *model->graph;
  CHECK(RuntimeHasKernel(*FindNode(graph, "add"), *model));
  CHECK(RuntimeHasKernel(*FindNode(graph, "reshape"), *model));
  CHECK_FALSE(RuntimeHasKernel(*FindNode(graph, "foo"), *model));   // no such op
  CHECK_FALSE(RuntimeHasKernel(*FindNode(graph, "gelu"), *model));  // Gelu came with opset 20
  for (OpsetImport& opset : model->opsets) {
    if (opset.domain.empty()) opset.version = 20;
  }
  REQUIRE(model->OpsetFor("") == 20);
  CHECK(RuntimeHasKernel(*FindNode(graph, "gelu"), *model));
}

TEST_CASE("EvaluateNode: the kernel's values, one tensor per output", "[passes]") {
  auto model = ParseInferred(kNodes);
  Graph& graph = *model->graph;
  TensorPtr x = Constant<float>(DataType::kFloat, {2}, {1.0f, 2.0f});
  auto sum = EvaluateNode(*FindNode(graph, "add"), *model, {x, Constant<float>(DataType::kFloat, {2}, {3.0f, 0.5f})});
  REQUIRE(sum.ok());
  REQUIRE(sum.value().size() == 1);
  CHECK(sum.value()[0]->dtype() == DataType::kFloat);
  CHECK(sum.value()[0]->dims() == std::vector<int64_t>{2});
  CHECK(Floats(sum.value()[0]) == std::vector<float>{4.0f, 2.5f});

  // Inference-mode Dropout passes x through; its mask is all true.
  auto dropout = EvaluateNode(*FindNode(graph, "dropout"), *model, {x});
  REQUIRE(dropout.ok());
  REQUIRE(dropout.value().size() == 2);
  CHECK(Floats(dropout.value()[0]) == std::vector<float>{1.0f, 2.0f});
  REQUIRE(dropout.value()[1] != nullptr);
  CHECK(dropout.value()[1]->dtype() == DataType::kBool);
  CHECK(*dropout.value()[1]->AsInt64s() == std::vector<int64_t>{1, 1});

  auto unmasked = EvaluateNode(*FindNode(graph, "unmasked"), *model, {x});
  REQUIRE(unmasked.ok());
  REQUIRE(unmasked.value().size() == 2);
  CHECK(Floats(unmasked.value()[0]) == std::vector<float>{1.0f, 2.0f});
  CHECK(unmasked.value()[1] == nullptr);  // the omitted output
}

TEST_CASE("EvaluateNode: no kernel, strings and a kernel's own error are errors", "[passes]") {
  auto model = ParseInferred(kNodes);
  Graph& graph = *model->graph;
  TensorPtr x = Constant<float>(DataType::kFloat, {2}, {1.0f, 2.0f});

  auto foo = EvaluateNode(*FindNode(graph, "foo"), *model, {x});
  REQUIRE_FALSE(foo.ok());
  CHECK(foo.status().code() == ErrorCode::kUnsupported);
  CHECK(foo.status().message() == "node 'foo' (com.example::Foo): the CPU runtime has no kernel for it");

  auto text = std::make_shared<Tensor>(Tensor::Strings({1}, {"a"}));
  auto identity = EvaluateNode(*FindNode(graph, "identity"), *model, {text});
  REQUIRE_FALSE(identity.ok());
  CHECK(identity.status().code() == ErrorCode::kUnsupported);
  CHECK(identity.status().message() ==
        "node 'identity' (Identity): string tensors are not computed by the CPU runtime");

  auto reshape =
      EvaluateNode(*FindNode(graph, "reshape"), *model, {x, Constant<int64_t>(DataType::kInt64, {2}, {-1, -1})});
  REQUIRE_FALSE(reshape.ok());
  CHECK(reshape.status().code() == ErrorCode::kInvalidModel);
  CHECK(reshape.status().message() == "node 'reshape' (Reshape): the shape has more than one -1");

  auto reshaped =
      EvaluateNode(*FindNode(graph, "reshape"), *model, {x, Constant<int64_t>(DataType::kInt64, {2}, {1, -1})});
  REQUIRE(reshaped.ok());
  CHECK(reshaped.value()[0]->dims() == std::vector<int64_t>{1, 2});
}
