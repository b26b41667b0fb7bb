// InlineCall (passes/util/inline_call.h): a fused call becomes its body's ops again, in place,
// with the original nodes' names and the call's output names, computing the same numbers.
#include <catch2/catch.hpp>

#include "ir/verifier.h"
#include "pass_test_support.h"
#include "passes/util/inline_call.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::OpTypes;
using pass_test::Parse;

TEST_CASE("InlineCall puts an outlined group back under its original names", "[passes]") {
  auto model = Parse(pass_test::kOutlineChain);
  auto before = pass_test::RunOnCpu(*model);
  const pass_test::Outlined outlined = pass_test::OutlineNodes(*model, {"mul", "add", "relu"});
  REQUIRE(outlined.fused != nullptr);
  const Function* function = model->FindFunction(outlined.fused->domain(), outlined.fused->op_type());
  REQUIRE(function != nullptr);
  InlinedCall inlined = InlineCall(*model->graph, *outlined.fused, *function);
  REQUIRE(inlined.done());
  std::vector<std::string> names;
  for (const Node* member : inlined.members) names.push_back(member->name());
  CHECK(names == std::vector<std::string>{"mul", "add", "relu"});
  // The scalar %b the outliner copied into the body comes back as a Constant node of its own.
  REQUIRE(inlined.constants.size() == 1);
  CHECK(OpTypes(*model->graph) == std::vector<std::string>{"Mul", "Constant", "Add", "Relu"});
  CHECK(VerifyModel(*model).ok());
  pass_test::RequireClose(pass_test::RunOnCpu(*model), before, 0, 0);  // the same numbers
}
