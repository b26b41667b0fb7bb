// The typed body the CUDA generators work on: one input per node input (a value read twice
// included), static shapes, constant arguments folded, and the refusals.
#include <catch2/catch.hpp>

#include "cuda_runtime/codegen/typed_body.h"
#include "text_format/text_format.h"

using namespace fusionopt;

namespace {

Result<std::unique_ptr<Graph>> BodyOfOnlyNode(const std::string& text, std::unique_ptr<Model>& model) {
  auto parsed = ParseModel(text);
  REQUIRE(parsed.ok());
  model = std::move(*parsed);
  return cuda::TypedBodyOf(*model, *model->graph->nodes().front());
}

}  // namespace

TEST_CASE("a node reading one value twice gets one body input per operand", "[cuda][codegen]") {
  std::unique_ptr<Model> model;
  auto body = BodyOfOnlyNode("ir_version 8\nopset \"\" 17\ngraph g (float[2,3] %x) -> (float[2,3] %y)\n{\n"
                             "  %y = Mul(%x, %x)\n}\n", model);
  REQUIRE(body.ok());
  const Graph& graph = **body;
  REQUIRE(graph.inputs().size() == 2);
  REQUIRE(graph.inputs()[0]->name() != graph.inputs()[1]->name());
  const Node& mul = *graph.nodes().front();
  REQUIRE(mul.input(0) == graph.inputs()[0]);
  REQUIRE(mul.input(1) == graph.inputs()[1]);
  REQUIRE(graph.outputs()[0]->shape() == Shape{Dim::Known(2), Dim::Known(3)});
}

TEST_CASE("constant arguments become initializers; the body keeps the input", "[cuda][codegen]") {
  std::unique_ptr<Model> model;
  auto body = BodyOfOnlyNode("ir_version 8\nopset \"\" 17\ngraph g (float[4] %x) -> (float[4] %y)\n"
                             "  init float[4] %b = [1, 2, 3, 4]\n{\n  %y = Add(%x, %b)\n}\n", model);
  REQUIRE(body.ok());
  const Graph& graph = **body;
  REQUIRE(graph.inputs().size() == 2);
  REQUIRE(graph.inputs()[1]->uses().empty());
  const Node& add = *graph.nodes().front();
  REQUIRE(add.input(1)->is_initializer());
  REQUIRE(add.input(1)->initializer()->values<float>()[3] == 4.0f);
}

TEST_CASE("a body without static shapes is refused with the value named", "[cuda][codegen]") {
  std::unique_ptr<Model> model;
  auto body = BodyOfOnlyNode("ir_version 8\nopset \"\" 17\ngraph g (float[N,3] %x) -> (float[N,3] %y)\n{\n"
                             "  %y = Relu(%x)\n}\n", model);
  REQUIRE_FALSE(body.ok());
  REQUIRE_THAT(body.status().message(), Catch::Matchers::Contains("'x'") && Catch::Matchers::Contains("static shape"));
}
