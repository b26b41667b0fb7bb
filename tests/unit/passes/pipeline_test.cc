// The pass machinery: pipeline selection and options, the report, and the op classes and
// launch-free nodes the launch estimates count.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "ir/constant_value.h"
#include "ir/graph.h"
#include "ir/op_class.h"
#include "shape_inference/shape_inference.h"
#include "text_format/text_format.h"
#include "pass_test_support.h"
#include "passes/pipeline.h"
#include "passes/registry.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::Parse;

namespace {

using pass_test::FindNode;

Node* FindNodeByOp(const Graph& graph, const std::string& op_type) {
  for (const auto& node : graph.nodes()) {
    if (node->op_type() == op_type) return node.get();
  }
  FAIL("no " << op_type << " node");
  return nullptr;
}

}  // namespace

TEST_CASE("pipeline options are checked against the registry", "[passes]") {
  PipelineOptions options;
  options.only = {"no-such-pass"};
  REQUIRE(ValidatePipelineOptions(options).code() == ErrorCode::kUsage);
  REQUIRE_THAT(ValidatePipelineOptions(options).message(), Catch::Contains("'no-such-pass'"));
  options.only.clear();
  options.pass_options.Set("eliminate-dead-code", "no-such-option", "1");
  REQUIRE_THAT(ValidatePipelineOptions(options).message(), Catch::Contains("has no option 'no-such-option'"));
  PipelineOptions dumping;
  dumping.dump_after = "all";
  REQUIRE_THAT(ValidatePipelineOptions(dumping).message(), Catch::Contains("--dump-after needs --dump-dir"));

  REQUIRE(PipelineFor(0).empty());
  for (int level = 1; level <= 3; ++level) {
    for (const auto& name : PipelineFor(level)) {
      INFO(name);
      REQUIRE(FindPass(name) != nullptr);
      REQUIRE(FindPass(name)->level <= level);
    }
  }
}

TEST_CASE("the report lists passes and fusions as JSON", "[passes]") {
  PipelineReport report;
  PassStatistics statistics;
  statistics.pass = "fuse-elementwise";
  statistics.changed = true;
  statistics.matches = 2;
  statistics.rejections["multi-consumer intermediate"] = Rejection{3, {"n1", "n2"}};
  report.passes.push_back(statistics);
  report.fusions.push_back(FusionRecord{"fuse-elementwise", "F_1", "F", "elementwise", {"a", "b"}});
  auto json = nlohmann::json::parse(ReportToJson(report));
  REQUIRE(json["passes"][0]["pass"] == "fuse-elementwise");
  REQUIRE(json["passes"][0]["rejections"]["multi-consumer intermediate"]["count"] == 3);
  REQUIRE(json["fusions"][0]["replaced"] == nlohmann::json({"a", "b"}));
}

TEST_CASE("op classes drive launch estimates", "[passes]") {
  auto model = Parse(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x) -> (float[6] %y, int64[2] %s)
{
  %s = Shape(%x)
  %r = Reshape(%x, %s)
  %e = Exp(%r)
  %y = Flatten(%e) {axis: 0}
}
)");
  REQUIRE(ClassifyOp(*FindNodeByOp(*model->graph, "Exp")) == OpClass::kElementwise);
  REQUIRE(EstimateKernelLaunches(*model) == 1);
}

TEST_CASE("nodes computed from constants or on the host launch nothing", "[passes]") {
  auto model = Parse(R"(
ir_version 8
opset "" 17
graph main (float[N,3] %x, float[3] %overridable) -> (float[N,3] %y, int64[2] %shape2)
  init int64[1] %dims = [3]
  init int64[] %zero = [0]
  init int64[1] %one = [1]
  init float[3] %overridable = [1.0, 2.0, 3.0]
{
  %weight = ConstantOfShape(%dims) {value: tensor float[1] [0.5]} @load_time
  %shape = Shape(%x) @shape
  %batch = Gather(%shape, %zero) @host_gather
  %batch1 = Unsqueeze(%batch, %zero) @view
  %shape2 = Concat(%batch1, %one) {axis: 0} @host_concat
  %scaled = Mul(%x, %weight) @device_mul
  %y = Add(%scaled, %overridable) @device_add
}
)");
  InferShapes(*model);
  LaunchFreeNodes free = FindLaunchFreeNodes(*model->graph, InitializerRule::kFeedsOverride);
  REQUIRE(free.load_time.count(FindNode(*model->graph, "load_time")));
  REQUIRE(free.host.count(FindNode(*model->graph, "host_gather")));
  REQUIRE(free.host.count(FindNode(*model->graph, "host_concat")));
  REQUIRE_FALSE(free.contains(FindNode(*model->graph, "device_mul")));
  REQUIRE_FALSE(free.contains(FindNode(*model->graph, "device_add")));  // %overridable may be fed
  REQUIRE(EstimateKernelLaunches(*model) == 2);
}

TEST_CASE("every registered pass states its rewrite as before -> after in a few lines", "[passes]") {
  for (const PassInfo& info : AllPasses()) {
    INFO(info.name);
    // R"rewrite(\n ... \n)rewrite": one newline more than the rewrite has lines.
    const auto lines = std::count(info.rewrite.begin(), info.rewrite.end(), '\n') - 1;
    CHECK((!info.rewrite.empty() && info.rewrite.front() == '\n'));
    CHECK(lines >= 2);
    CHECK(lines <= 11);
    CHECK(info.rewrite.find("\u2192") != std::string::npos);  // →
  }
}
