// VerifyModel names the broken invariant: a node reading a value before it is defined, a fused
// node whose function the model lacks.
#include <catch2/catch.hpp>

#include "pass_test_support.h"
#include "ir/verifier.h"

using namespace fusionopt;
using pass_test::FindNode;
using pass_test::Parse;

TEST_CASE("the verifier names the broken invariant", "[passes]") {
  auto model = Parse(pass_test::kOutlineChain);
  REQUIRE(VerifyModel(*model).ok());
  // Out of topological order.
  auto reordered = Parse(R"(
ir_version 8
opset "" 17
graph main (float[4] %a) -> (float[4] %y)
{
  %t = Exp(%a) @first
  %y = Neg(%t) @second
}
)");
  Node* first = FindNode(*reordered->graph, "first");
  Node* second = FindNode(*reordered->graph, "second");
  // Swap roles: make 'first' read the value 'second' produces.
  first->ReplaceInput(0, second->output(0));
  second->ReplaceInput(0, reordered->graph->inputs()[0]);
  Status status = VerifyModel(*reordered);
  REQUIRE(status.code() == ErrorCode::kInternal);
  REQUIRE_THAT(status.message(), Catch::Contains("node 'first'") && Catch::Contains("before it is defined"));

  // A fused node whose function is missing.
  auto chain = Parse(pass_test::kOutlineChain);
  pass_test::OutlineNodes(*chain, {"mul", "add", "relu"});
  chain->functions.clear();
  REQUIRE_THAT(VerifyModel(*chain).message(), Catch::Contains("calls function FusedTest, which the model lacks"));
}
