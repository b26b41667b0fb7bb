// ir/function_body.h's copies: CopyGraph and CopyModel give a model that can be re-inferred or
// rewritten on the side (the ORT lowering's trial sizes) while the original stays as it was.
#include <catch2/catch.hpp>

#include "attention_test_models.h"
#include "ir/function_body.h"
#include "pass_test_support.h"

namespace fusionopt {
namespace {

TEST_CASE("CopyModel copies the main graph and every function; rewriting the copy leaves the original", "[ir]") {
  auto model = pass_test::ParseOptimized(attention_test::Bert(), 3);
  REQUIRE(model->functions.size() == 1);
  const size_t nodes = model->graph->num_nodes();
  const size_t body_nodes = model->functions[0]->body->num_nodes();

  std::unique_ptr<Model> copy = CopyModel(*model);
  CHECK(copy->ir_version == model->ir_version);
  CHECK(copy->OpsetFor("") == model->OpsetFor(""));
  REQUIRE(copy->functions.size() == 1);
  const Function& function = *copy->functions[0];
  CHECK(function.domain == model->functions[0]->domain);
  CHECK(function.name == model->functions[0]->name);
  CHECK(function.body != model->functions[0]->body);
  CHECK(function.body->num_nodes() == body_nodes);
  CHECK(copy->FindFunction(function.domain, function.name) == &function);

  Value* q = copy->graph->FindValue("q");
  REQUIRE(q != nullptr);
  CHECK(q != model->graph->FindValue("q"));
  (*q->type().shape)[0] = Dim::Known(3);
  copy->graph->CreateNode("Identity", "", {q}, {nullptr}, "extra");
  Graph& body = *copy->functions[0]->body;
  body.CreateNode("Identity", "", {body.inputs().front()}, {nullptr}, "extra");
  CHECK(ShapeToString(*model->graph->FindValue("q")->shape()) == "[B,S,8]");
  CHECK(model->graph->num_nodes() == nodes);
  CHECK(model->functions[0]->body->num_nodes() == body_nodes);
}

TEST_CASE("CopyModel of a model without functions copies the graph alone", "[ir]") {
  auto model = pass_test::ParseInferred(attention_test::Vit());
  std::unique_ptr<Model> copy = CopyModel(*model);
  CHECK(copy->functions.empty());
  CHECK(copy->graph->num_nodes() == model->graph->num_nodes());
  CHECK(copy->graph.get() != model->graph.get());
}

}  // namespace
}  // namespace fusionopt
