// OutlineGroup (passes/util/outline.h), the primitive every fusion pass uses: a group becomes one
// ai.fusionopt node calling a canonical function, identical groups share it, and groups that
// are not convex, pure and read outside are refused with the reason.
#include <catch2/catch.hpp>

#include "pass_test_support.h"
#include "ir/verifier.h"
#include "passes/util/outline.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::FindNode;
using pass_test::Parse;

TEST_CASE("outlining replaces a group by one ai.fusionopt node calling a canonical function", "[passes]") {
  auto model = Parse(pass_test::kOutlineChain);
  pass_test::Outlined outcome = pass_test::OutlineNodes(*model, {"mul", "add", "relu"});
  REQUIRE(outcome.changed);
  REQUIRE(VerifyModel(*model).ok());
  REQUIRE(model->graph->num_nodes() == 1);
  const Node& fused = *model->graph->nodes().front();
  REQUIRE(fused.domain() == "ai.fusionopt");
  REQUIRE(fused.op_type() == "FusedTest");
  REQUIRE(FusedNodeNames(fused) == std::vector<std::string>{"mul", "add", "relu"});
  // The scalar %b is inlined; %x and %s are arguments; %u (read as a graph output) and %y
  // are results, the same values as before.
  REQUIRE(fused.inputs().size() == 2);
  REQUIRE(fused.input(0)->name() == "x");
  REQUIRE(fused.input(1)->name() == "s");
  REQUIRE(fused.outputs().size() == 2);
  REQUIRE(fused.output(0)->name() == "u");
  REQUIRE(fused.output(1)->name() == "y");
  REQUIRE(model->OpsetFor("ai.fusionopt") == 1);
  REQUIRE(model->ir_version == 8);  // functions need IR 8

  const Function* function = model->FindFunction("ai.fusionopt", "FusedTest");
  REQUIRE(function != nullptr);
  REQUIRE(function->attribute_names == std::vector<std::string>{"fused_nodes"});
  REQUIRE(function->OpsetFor("") == 17);
  REQUIRE(PrintGraph(*function->body) == R"(graph (%x0, %x1) -> (%y0, %y1) {
  %t0 = Mul(%x0, %x1)
  %c0 = Constant() {value: tensor float[] [0.5]}
  %y0 = Add(%t0, %c0)
  %y1 = Relu(%y0)
}
)");
  REQUIRE(outcome.fusions.size() == 1);
  REQUIRE(outcome.fusions[0].replaced == std::vector<std::string>{"mul", "add", "relu"});
  REQUIRE(outcome.statistics.matches == 1);
}

TEST_CASE("identical groups share one function; different bodies get their own", "[passes]") {
  auto model = Parse(R"(
ir_version 8
opset "" 17
graph main (float[4] %a, float[4] %b) -> (float[4] %y1, float[4] %y2, float[4] %y3)
{
  %t1 = Add(%a, %b) @add1
  %y1 = Relu(%t1) @relu1
  %t2 = Add(%b, %a) @add2
  %y2 = Relu(%t2) @relu2
  %t3 = Add(%a, %b) @add3
  %y3 = Sigmoid(%t3) @sigmoid3
}
)");
  REQUIRE(pass_test::OutlineNodes(*model, {"add1", "relu1"}).changed);
  REQUIRE(pass_test::OutlineNodes(*model, {"add2", "relu2"}).changed);
  REQUIRE(pass_test::OutlineNodes(*model, {"add3", "sigmoid3"}).changed);
  REQUIRE(model->functions.size() == 2);
  REQUIRE(model->functions[0]->name == "FusedTest");
  REQUIRE(model->functions[1]->name == "FusedTest_1");
  std::vector<std::string> calls;
  for (const auto& node : model->graph->nodes()) calls.push_back(node->op_type() + ":" + node->name());
  REQUIRE(calls == std::vector<std::string>{"FusedTest:FusedTest", "FusedTest:FusedTest_1", "FusedTest_1:FusedTest_2"});
  REQUIRE(VerifyModel(*model).ok());
}

TEST_CASE("outlining refuses groups that are not convex, impure or dead", "[passes]") {
  auto model = Parse(R"(
ir_version 8
opset "" 17
graph main (float[4] %a) -> (float[4] %y, float[4] %r)
{
  %t = Exp(%a) @exp
  %side = Transpose(%t) @outside
  %y = Add(%t, %side) @add
  %r = RandomUniformLike(%a) @random
  %dead = Neg(%a) @neg
}
)");
  pass_test::Outlined cut = pass_test::OutlineNodes(*model, {"exp", "add"});
  REQUIRE_FALSE(cut.changed);
  REQUIRE(cut.why_not == "a path leaves the group and re-enters it");
  REQUIRE(pass_test::OutlineNodes(*model, {"random"}).why_not == "member is not a pure op");
  REQUIRE(pass_test::OutlineNodes(*model, {"neg"}).why_not == "nothing outside the group reads it");
  REQUIRE(pass_test::OutlineNodes(*model, {"exp", "exp"}).why_not == "a node is listed twice");
  // The convex superset is fine.
  REQUIRE(pass_test::OutlineNodes(*model, {"exp", "outside", "add"}).changed);
  REQUIRE(VerifyModel(*model).ok());
}
