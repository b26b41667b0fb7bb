// eliminate-dead-code: dead chains and unused initializers go in one pass, a custom op and a
// graph input's initializer stay, and a fused function no call reaches goes too.
#include <catch2/catch.hpp>

#include "pass_test_support.h"
#include "passes/pipeline.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::Parse;

TEST_CASE("eliminate-dead-code removes dead chains, unused initializers and uncalled fused functions", "[passes]") {
  auto model = Parse(R"(
ir_version 8
opset "" 17
opset "com.example" 1
graph main (float[4] %a, float[4] %w) -> (float[4] %y)
  init float[4] %unused = [1, 2, 3, 4]
  init float[4] %w = [1, 1, 1, 1]
{
  %t = Exp(%a)
  %dead1 = Neg(%t)
  %dead2 = Abs(%dead1)
  %custom = com.example::Effect(%a)
  %y = Add(%t, %a)
}
)");
  PipelineOptions options;
  options.level = 1;
  options.only = {"eliminate-dead-code"};
  auto report = RunPipeline(*model, options);
  REQUIRE(report.ok());
  // O1 starts and ends with it; with every pass between deselected it runs once.
  REQUIRE(report->passes.size() == 1);
  REQUIRE(report->passes[0].changed);
  REQUIRE(report->passes[0].counters.at("nodes_removed") == 2);
  REQUIRE(report->passes[0].counters.at("initializers_removed") == 1);
  std::vector<std::string> ops;
  for (const auto& node : model->graph->nodes()) ops.push_back(node->op_type());
  REQUIRE(ops == std::vector<std::string>{"Exp", "Effect", "Add"});  // a custom op may have effects
  REQUIRE(model->graph->initializers().size() == 1);                 // %w is also a graph input

  // Running again changes nothing and says so.
  auto again = RunPipeline(*model, options);
  REQUIRE(again.ok());
  REQUIRE_FALSE(again->passes[0].changed);

  // A fused function nobody calls any more goes too.
  auto chain = Parse(pass_test::kOutlineChain);
  pass_test::OutlineNodes(*chain, {"mul", "add", "relu"});
  chain->graph->mutable_outputs() = {chain->graph->inputs()[0]};
  auto cleaned = RunPipeline(*chain, options);
  REQUIRE(cleaned.ok());
  REQUIRE(chain->functions.empty());
  REQUIRE(chain->graph->num_nodes() == 0);
}
