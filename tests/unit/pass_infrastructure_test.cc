// The pass machinery: pipeline selection and options, the IR verifier, dead-code elimination
// and outlining (the primitive every fusion pass uses).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "ir/constant_value.h"
#include "ir/graph.h"
#include "ir/op_class.h"
#include "shape_inference/shape_inference.h"
#include "text_format/text_format.h"
#include "ir/verifier.h"
#include "pass_test_support.h"
#include "passes/outline.h"
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

// A pass that runs the outliner on the nodes named in its option (test-only).
class OutlineNamed : public Pass {
 public:
  explicit OutlineNamed(std::vector<std::string> names) : names_(std::move(names)) {}
  std::string_view name() const override { return "outline-named"; }
  std::string_view summary() const override { return "test"; }
  Result<bool> Run(Model& model, PassContext& context) override {
    std::vector<Node*> nodes;
    for (const auto& name : names_) nodes.push_back(FindNode(*model.graph, name));
    why_not = WhyNotOutlinable(nodes);
    if (!why_not.empty()) return false;
    fused = OutlineGroup(*model.graph, FusionGroup{nodes, "elementwise", "FusedTest"}, context);
    return true;
  }
  std::string why_not;
  Node* fused = nullptr;

 private:
  std::vector<std::string> names_;
};

struct Outcome : pass_test::PassRun {
  bool changed = false;
  std::string why_not;
  Node* fused = nullptr;
};

Outcome Outline(Model& model, std::vector<std::string> names) {
  OutlineNamed pass(std::move(names));
  Outcome outcome;
  static_cast<pass_test::PassRun&>(outcome) = pass_test::RunPassObject(model, pass);
  outcome.changed = outcome.statistics.changed;
  outcome.why_not = pass.why_not;
  outcome.fused = pass.fused;
  return outcome;
}

constexpr const char* kChain = R"(
ir_version 7
opset "" 17
graph main (float[2,3] %x, float[3] %s) -> (float[2,3] %y, float[2,3] %u)
  init float[] %b = [0.5]
{
  %t = Mul(%x, %s) @mul
  %u = Add(%t, %b) @add
  %y = Relu(%u) @relu
}
)";

}  // namespace

TEST_CASE("outlining replaces a group by one ai.fusionopt node calling a canonical function", "[passes]") {
  auto model = Parse(kChain);
  Outcome outcome = Outline(*model, {"mul", "add", "relu"});
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
  REQUIRE(Outline(*model, {"add1", "relu1"}).changed);
  REQUIRE(Outline(*model, {"add2", "relu2"}).changed);
  REQUIRE(Outline(*model, {"add3", "sigmoid3"}).changed);
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
  Outcome cut = Outline(*model, {"exp", "add"});
  REQUIRE_FALSE(cut.changed);
  REQUIRE(cut.why_not == "a path leaves the group and re-enters it");
  REQUIRE(Outline(*model, {"random"}).why_not == "member is not a pure op");
  REQUIRE(Outline(*model, {"neg"}).why_not == "nothing outside the group reads it");
  REQUIRE(Outline(*model, {"exp", "exp"}).why_not == "a node is listed twice");
  // The convex superset is fine.
  REQUIRE(Outline(*model, {"exp", "outside", "add"}).changed);
  REQUIRE(VerifyModel(*model).ok());
}

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
  auto chain = Parse(kChain);
  Outline(*chain, {"mul", "add", "relu"});
  chain->graph->mutable_outputs() = {chain->graph->inputs()[0]};
  auto cleaned = RunPipeline(*chain, options);
  REQUIRE(cleaned.ok());
  REQUIRE(chain->functions.empty());
  REQUIRE(chain->graph->num_nodes() == 0);
}

TEST_CASE("the verifier names the broken invariant", "[passes]") {
  auto model = Parse(kChain);
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
  auto chain = Parse(kChain);
  Outline(*chain, {"mul", "add", "relu"});
  chain->functions.clear();
  REQUIRE_THAT(VerifyModel(*chain).message(), Catch::Contains("calls function FusedTest, which the model lacks"));
}

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
