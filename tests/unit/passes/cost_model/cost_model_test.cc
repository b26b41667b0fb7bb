// The roofline + launch-overhead cost model: FLOPs, bytes and time per kernel worked out by
// hand on the h100 profile (67e12 FLOP/s, 3350e9 B/s, 5 µs per launch), groups against
// separate kernels, register pressure, the fusion gate at O3, and the profile lookup.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <sstream>

#include "ir/graph.h"
#include "ir/op_class.h"
#include "pass_test_support.h"
#include "passes/cost_model/cost_model.h"
#include "passes/fusion/vertical/fuse_elementwise.h"
#include "passes/pipeline.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::ParseInferred;

namespace {

constexpr double kPeak = 67e12, kBandwidth = 3350e9, kLaunch = 5e-6;

using pass_test::FindNode;
using pass_test::H100;


std::vector<const Node*> NamedAll(const Graph& graph, const std::vector<std::string>& names) {
  std::vector<const Node*> nodes;
  for (const std::string& name : names) nodes.push_back(FindNode(graph, name));
  return nodes;
}

double Expected(double flops, double bytes, int launches = 1) {
  return std::max(flops / kPeak, bytes / kBandwidth) + launches * kLaunch;
}

void CheckCost(const KernelCost& cost, double flops, double read, double written, int launches = 1) {
  INFO(cost.unknown_reason);
  REQUIRE(cost.known);
  CHECK(cost.flops == Approx(flops));
  CHECK(cost.bytes_read == Approx(read));
  CHECK(cost.bytes_written == Approx(written));
  CHECK(cost.launches == launches);
  CHECK(cost.seconds == Approx(Expected(flops, read + written, launches)));
}

}  // namespace

TEST_CASE("cost model: the published GPU profiles and the unknown-target error", "[cost]") {
  TargetProfile h100 = H100();
  CHECK(h100.peak_flops == kPeak);
  CHECK(h100.bandwidth == kBandwidth);
  CHECK(h100.launch_overhead_s == kLaunch);
  CHECK(h100.register_budget_per_thread == 64);
  CHECK(h100.ridge_intensity() == Approx(20.0).epsilon(0.001));
  CHECK(FindTargetProfile("t4")->bandwidth == 320e9);
  CHECK(FindTargetProfile("t4")->register_budget_per_thread == 128);
  CHECK(FindTargetProfile("a100")->peak_flops == 19.5e12);
  CHECK(FindTargetProfile("h200")->bandwidth == 4800e9);
  CHECK(std::string(kDefaultTarget) == "h100");

  auto unknown = FindTargetProfile("v100");
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().code() == ErrorCode::kUsage);
  CHECK(unknown.status().message() == "unknown target 'v100' (targets: t4, a100, h100, h200, cpu)");
  CHECK(CheckTargetName("cpu").ok());
  CHECK_FALSE(CheckTargetName("H100").ok());
}

TEST_CASE("cost model: --dim settings parse, and bad ones are usage errors", "[cost]") {
  auto dims = ParseDimSettings({"batch=4", "seq=128"});
  REQUIRE(dims.ok());
  CHECK(*dims == SymbolSizes{{"batch", 4}, {"seq", 128}});
  for (const char* bad : {"batch", "batch=0", "=3", "batch=x", "batch=4x", "batch="}) {
    auto parsed = ParseDimSettings({bad});
    INFO(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().code() == ErrorCode::kUsage);
  }
}

TEST_CASE("cost model: MatMul, Gemm, Conv and elementwise FLOPs and bytes by hand", "[cost]") {
  auto model = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[B,3] %a, float[3,4] %b, float[1,4,8,8] %x, float[6,2,3,3] %w, float[6] %bias, float[4] %gbias, float[10,10] %e) -> (float[B,4] %m, float[B,4] %g, float[1,6,8,8] %c, float[10,10] %t, float[10,10] %s)
{
  %m = MatMul(%a, %b) @matmul
  %g = Gemm(%a, %b, %gbias) @gemm
  %c = Conv(%x, %w, %bias) {group: 2, pads: [1, 1, 1, 1]} @conv
  %t = Tanh(%e) @tanh
  %s = Add(%e, %t) @add
}
)");
  CostModel costs(*model, H100(), {{"B", 5}});
  const Graph& graph = *model->graph;
  // [5,3]·[3,4]: 2·5·4·3 FLOPs; reads 15 + 12 floats, writes 20.
  CheckCost(costs.NodeCost(*FindNode(graph, "matmul")), 120, 27 * 4, 20 * 4);
  // Gemm adds the bias per output element and reads it.
  CheckCost(costs.NodeCost(*FindNode(graph, "gemm")), 120 + 20, 31 * 4, 20 * 4);
  // 384 outputs, each over Cin/group · 3·3 = 18 products: 2·384·18 + 384 for the bias.
  CheckCost(costs.NodeCost(*FindNode(graph, "conv")), 2 * 384 * 18 + 384, (256 + 108 + 6) * 4, 384 * 4);
  // Tanh weighs 8 per element, Add 1; a value read twice by one node is read once.
  CheckCost(costs.NodeCost(*FindNode(graph, "tanh")), 800, 400, 400);
  CheckCost(costs.NodeCost(*FindNode(graph, "add")), 100, 800, 400);

  // The symbol's size comes from the map, 1 when unlisted.
  CostModel unit(*model, H100());
  CheckCost(unit.NodeCost(*FindNode(graph, "matmul")), 24, 15 * 4, 4 * 4);
}

TEST_CASE("cost model: a dim the exporter named as a product is sized from its factors", "[cost]") {
  // torch.onnx's dynamo exporter names a flattened [batch, sequence] dim "sequence*batch".
  const SymbolSizes sizes = {{"batch", 2}, {"sequence", 128}, {"sequence*batch", 7}};
  CHECK(SizeOfSymbol(sizes, "batch") == 2);
  CHECK(SizeOfSymbol(sizes, "sequence*batch") == 7);  // its own entry first
  CHECK(SizeOfSymbol({{"batch", 2}, {"sequence", 128}}, "sequence*batch") == 256);
  CHECK(SizeOfSymbol({{"s0", 3}}, "2*s0") == 6);
  CHECK(SizeOfSymbol({{"s0", 3}}, "s0 * s0") == 9);
  CHECK(SizeOfSymbol({{"s0", 3}}, "s0*unsized") == 1);  // an unsized factor: unknown, as 1
  CHECK(SizeOfSymbol({{"s0", 3}}, "s0+1") == 1);       // only products are evaluated
  CHECK(SizeOfSymbol({}, "batch") == 1);

  auto model = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[B,3] %a, float[3,4] %b) -> (float[B,4] %m)
{
  %m = MatMul(%a, %b) @matmul
}
)");
  for (Value* value : {model->graph->FindValue("a"), model->graph->FindValue("m")}) {
    (*value->type().shape)[0] = Dim::Symbol("sequence*batch");
  }
  CostModel costs(*model, H100(), {{"batch", 2}, {"sequence", 5}});
  // [10,3]·[3,4]: 2·10·4·3 FLOPs; reads 30 + 12 floats, writes 40.
  CheckCost(costs.NodeCost(*FindNode(*model->graph, "matmul")), 240, 42 * 4, 40 * 4);
}

TEST_CASE("cost model: views and host shape arithmetic launch nothing and cost nothing", "[cost]") {
  auto model = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[N,4] %x) -> (float[N,2,2] %y)
  init int64[] %index = [0]
  init int64[1] %axes = [0]
  init int64[2] %tail = [2, 2]
{
  %s = Shape(%x) @shape
  %n = Gather(%s, %index) {axis: 0} @gather
  %u = Unsqueeze(%n, %axes) @unsqueeze
  %target = Concat(%u, %tail) {axis: 0} @concat
  %y = Reshape(%x, %target) @reshape
}
)");
  CostModel costs(*model, H100());
  for (const char* name : {"shape", "gather", "unsqueeze", "concat", "reshape"}) {
    KernelCost cost = costs.NodeCost(*FindNode(*model->graph, name));
    INFO(name);
    CHECK(cost.known);
    CHECK(cost.launches == 0);
    CHECK(cost.seconds == 0);
  }
  ModelCost whole = costs.CostOfModel();
  CHECK(whole.kernels.empty());
  CHECK(whole.launch_free_nodes == 5);
  CHECK(whole.total.seconds == 0);
}

TEST_CASE("cost model: unknown dims make a cost unknown rather than invented", "[cost]") {
  auto model = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[?,4] %x, float[N,4] %z) -> (float[?,4] %y, float[N,4] %w)
{
  %y = Relu(%x) @relu
  %w = Relu(%z) @known
}
)");
  CostModel costs(*model, H100());
  KernelCost cost = costs.NodeCost(*FindNode(*model->graph, "relu"));
  CHECK_FALSE(cost.known);
  CHECK(cost.unknown_reason == "value 'y' has an unknown dim");
  ModelCost whole = costs.CostOfModel();
  CHECK(whole.kernels.size() == 2);
  CHECK(whole.unknown_kernels == 1);
  CHECK(whole.total.launches == 1);
  CHECK(whole.total.seconds == Approx(Expected(4, 32)));
}

TEST_CASE("cost model: memory- and compute-bound on h100", "[cost]") {
  auto model = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[1024,1024] %a, float[1024,1024] %b) -> (float[1024,1024] %m, float[1024,1024] %s)
{
  %m = MatMul(%a, %b) @matmul
  %s = Add(%a, %b) @add
}
)");
  CostModel costs(*model, H100());
  KernelCost matmul = costs.NodeCost(*FindNode(*model->graph, "matmul"));
  KernelCost add = costs.NodeCost(*FindNode(*model->graph, "add"));
  // 2·2^30 FLOPs over 12 MiB: about 171 FLOP/B, past the ridge at 20.
  CHECK(matmul.intensity() == Approx(2.0 * 1024 * 1024 * 1024 / (3.0 * 4 * 1024 * 1024)));
  CHECK(costs.BoundOf(matmul) == Bound::kCompute);
  CHECK(matmul.seconds == Approx(2.0 * 1024 * 1024 * 1024 / kPeak + kLaunch));
  CHECK(add.intensity() == Approx(1.0 / 12));
  CHECK(costs.BoundOf(add) == Bound::kMemory);
  CHECK(add.seconds == Approx(12.0 * 1024 * 1024 / kBandwidth + kLaunch));
}

TEST_CASE("cost model: a group reads a shared input once and keeps intermediates on chip", "[cost]") {
  auto model = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[64,64] %x, float[64,64] %y) -> (float[64,64] %b)
{
  %a = Add(%x, %y) @add
  %b = Mul(%x, %a) @mul
}
)");
  CostModel costs(*model, H100());
  auto members = NamedAll(*model->graph, {"mul", "add"});
  constexpr double kTensor = 64 * 64 * 4;
  // Fused: x and y once (x feeds both members), b written; a never leaves the chip.
  CheckCost(costs.GroupCost(members), 2 * 64 * 64, 2 * kTensor, kTensor);
  // Separate: Add reads x, y and writes a; Mul reads x, a and writes b; two launches.
  CheckCost(costs.SeparateCost(members), 2 * 64 * 64, 4 * kTensor, 2 * kTensor, 2);
  // Mul(x, a) then: x, y loaded (2) + a (1) at Add; at Mul, x and a live + b = 3. Base 16.
  CHECK(costs.EstimateRegisters(members) == 16 + 3);
}

TEST_CASE("cost model: with no launch overhead an elementwise fusion still pays through bytes", "[cost]") {
  auto model = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[1024,1024] %x, float[1024,1024] %s, float[1024,1024] %b) -> (float[1024,1024] %y)
{
  %t = Mul(%x, %s) @mul
  %u = Add(%t, %b) @add
  %y = Relu(%u) @relu
}
)");
  TargetProfile free_launches = H100();
  free_launches.launch_overhead_s = 0;
  CostModel costs(*model, free_launches);
  auto members = NamedAll(*model->graph, {"mul", "add", "relu"});
  constexpr double kTensor = 1024.0 * 1024 * 4;
  KernelCost fused = costs.GroupCost(members);
  KernelCost separate = costs.SeparateCost(members);
  // 4 tensors cross the fused kernel's boundary; separately 3 + 3 + 2 = 8 are moved.
  CHECK(fused.bytes() == Approx(4 * kTensor));
  CHECK(separate.bytes() == Approx(8 * kTensor));
  CHECK(fused.seconds == Approx(4 * kTensor / kBandwidth));
  CHECK(separate.seconds == Approx(8 * kTensor / kBandwidth));
  CHECK(fused.seconds < separate.seconds);
}

TEST_CASE("cost model: past the register budget the fused kernel's roofline time is scaled", "[cost]") {
  // 60 Relus whose results all wait for a chain of Adds: 59 results live, plus the input and
  // the result of the last Relu at its step: 61, plus 16 for indexing.
  constexpr int kWidth = 60;
  std::ostringstream text;
  text << "ir_version 8\nopset \"\" 17\ngraph main (";
  for (int i = 0; i < kWidth; ++i) text << (i ? ", " : "") << "float[4096] %x" << i;
  text << ") -> (float[4096] %s" << kWidth - 1 << ")\n{\n";
  std::vector<std::string> names;
  for (int i = 0; i < kWidth; ++i) {
    text << "  %r" << i << " = Relu(%x" << i << ") @relu" << i << "\n";
    names.push_back("relu" + std::to_string(i));
  }
  text << "  %s1 = Add(%r0, %r1) @add1\n";
  names.push_back("add1");
  for (int i = 2; i < kWidth; ++i) {
    text << "  %s" << i << " = Add(%s" << i - 1 << ", %r" << i << ") @add" << i << "\n";
    names.push_back("add" + std::to_string(i));
  }
  text << "}\n";
  auto model = ParseInferred(text.str());
  CostModel costs(*model, H100());
  auto members = NamedAll(*model->graph, names);
  CHECK(costs.EstimateRegisters(members) == 16 + 61);
  KernelCost fused = costs.GroupCost(members);
  CHECK(fused.registers == 77);
  CHECK(fused.register_penalty == Approx(77.0 / 64));
  double bytes = (kWidth + 1) * 4096.0 * 4;
  CHECK(fused.seconds == Approx(bytes / kBandwidth * 77.0 / 64 + kLaunch));
  // Below the budget: no penalty (two Relus and their Add).
  auto small = NamedAll(*model->graph, {"relu0", "relu1", "add1"});
  CHECK(costs.GroupCost(small).register_penalty == 1);
}

TEST_CASE("cost model: a fused call costs its body's FLOPs over its own inputs and outputs", "[cost]") {
  auto model = ParseInferred(R"(
ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[N,8] %x, float[N,8] %s) -> (float[N,8] %y)
{
  %y = ai.fusionopt::FusedElementwise_Mul_Add_Tanh(%x, %s) {fused_nodes: ["mul", "add", "tanh"]} @fused
}
function ai.fusionopt::FusedElementwise_Mul_Add_Tanh (%x0, %x1) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Mul(%x0, %x1)
  %c0 = Constant() {value: tensor float[] [0.5]}
  %t1 = Add(%t0, %c0)
  %y0 = Tanh(%t1)
}
)");
  CostModel costs(*model, H100(), {{"N", 10}});
  const Node& call = *FindNode(*model->graph, "fused");
  constexpr double kTensor = 80 * 4;
  // (1 + 1 + 8) FLOPs per element; x and s in, y out; t0 and t1 stay on chip.
  CheckCost(costs.NodeCost(call), 10 * 80, 2 * kTensor, kTensor);
  // The body as separate kernels: three launches, t0 and t1 through memory (the scalar
  // constant is a Constant node, launch-free).
  CheckCost(costs.UnfusedCallCost(call), 10 * 80, 4 * kTensor + 4, 3 * kTensor, 3);
  ModelCost whole = costs.CostOfModel();
  REQUIRE(whole.kernels.size() == 1);
  CHECK(whole.kernels[0].fused_call);
  CHECK(whole.fused_calls == 1);
  CHECK(whole.original_total.launches == 3);
  CHECK(whole.original_total.seconds > whole.total.seconds);
}

TEST_CASE("cost model: O2 records predictions, O3 applies a fusion that pays", "[cost]") {
  const char* text = R"(
ir_version 8
opset "" 17
graph main (float[N,256] %x, float[256] %scale) -> (float[N,256] %y)
  init float[] %bias = [0.5]
{
  %t = Mul(%x, %scale) @mul
  %u = Add(%t, %bias) @add
  %y = Relu(%u) @relu
}
)";
  for (int level : {2, 3}) {
    auto model = ParseInferred(text);
    auto original = ParseInferred(text);
    PipelineOptions options;
    options.level = level;
    options.only = {"fuse-elementwise"};
    options.dims = {{"N", 32}};
    auto report = RunPipeline(*model, options);
    INFO("level " << level << ": " << report.status().message());
    REQUIRE(report.ok());
    CHECK(report->target == "h100");
    REQUIRE(report->fusions.size() == 1);
    const FusionRecord& fusion = report->fusions[0];
    CostModel costs(*original, H100(), {{"N", 32}});
    auto members = NamedAll(*original->graph, {"mul", "add", "relu"});
    CHECK(fusion.predicted_separate_s == Approx(costs.SeparateCost(members).seconds));
    CHECK(fusion.predicted_fused_s == Approx(costs.GroupCost(members).seconds));
    CHECK(fusion.predicted_fused_s < fusion.predicted_separate_s);
    // The fused node, costed through its body, is what the pass predicted.
    CostModel after(*model, H100(), {{"N", 32}});
    CHECK(after.NodeCost(*FindNode(*model->graph, fusion.node)).seconds == Approx(fusion.predicted_fused_s));
    CHECK(report->passes[0].cost_rejections.empty());
  }
}

TEST_CASE("cost model: O3 refuses to fuse host shape arithmetic into a launched kernel", "[cost]") {
  // Add and Sub on a shape element run on the host (op_class.h): separately they cost nothing,
  // fused they would be a kernel launch. O2 fuses them; O3 does not.
  const char* text = R"(
ir_version 8
opset "" 17
graph main (float[N,4] %x) -> (float[N,4] %y)
  init int64[] %index = [0]
  init int64[] %one = [1]
  init int64[1] %axes = [0]
  init int64[1] %four = [4]
{
  %s = Shape(%x) @shape
  %n = Gather(%s, %index) {axis: 0} @gather
  %a = Add(%n, %one) @add
  %m = Sub(%a, %one) @sub
  %u = Unsqueeze(%m, %axes) @unsqueeze
  %target = Concat(%u, %four) {axis: 0} @concat
  %y = Reshape(%x, %target) @reshape
}
)";
  auto run = [&](int level, std::unique_ptr<Model>& model) {
    model = ParseInferred(text);
    PipelineOptions options;
    options.level = level;
    options.only = {"fuse-elementwise"};
    auto report = RunPipeline(*model, options);
    INFO(report.status().message());
    REQUIRE(report.ok());
    return std::move(report).value();
  };
  std::unique_ptr<Model> o2, o3;
  PipelineReport at_o2 = run(2, o2);
  REQUIRE(at_o2.fusions.size() == 1);
  CHECK(at_o2.fusions[0].predicted_separate_s == 0);
  CHECK(at_o2.fusions[0].predicted_fused_s == Approx(kLaunch));

  PipelineReport at_o3 = run(3, o3);
  CHECK(at_o3.fusions.empty());
  CHECK_FALSE(at_o3.passes[0].changed);
  REQUIRE(at_o3.passes[0].rejections.count(kCostModelRejection));
  CHECK(at_o3.passes[0].rejections.at(kCostModelRejection).examples == std::vector<std::string>{"add"});
  REQUIRE(at_o3.passes[0].cost_rejections.size() == 1);
  CHECK(at_o3.passes[0].cost_rejections[0].reason == "cost model: fused 5.00 us >= separate 0.00 us");
  CHECK(at_o3.passes[0].cost_rejections[0].members == std::vector<std::string>{"add", "sub"});
  CHECK(at_o3.passes[0].cost_rejections[0].predicted_fused_s == Approx(kLaunch));
  CHECK(pass_test::Print(*o3) == pass_test::Canonical(text));
}

TEST_CASE("cost model: a fusion whose recomputation outweighs the launches it saves is refused at O3", "[cost]") {
  // Two Tanhs over [1,4] feed a Mul over [1000,4]: fused, the Tanhs run once per element of
  // the Mul's index space. On a target with slow arithmetic and cheap launches that loses.
  const char* text = R"(
ir_version 8
opset "" 17
graph main (float[1,4] %x, float[1000,4] %z) -> (float[1000,4] %y)
{
  %t1 = Tanh(%x) @tanh1
  %t2 = Tanh(%t1) @tanh2
  %y = Mul(%t2, %z) @mul
}
)";
  TargetProfile slow{"slow-arithmetic", "test", 1e9, 1e12, 1e-6, 64, false};
  for (bool gate : {false, true}) {
    auto model = ParseInferred(text);
    CostModel costs(*model, slow);
    auto members = NamedAll(*model->graph, {"tanh1", "tanh2", "mul"});
    // Fused: (8 + 8 + 1)·4000 FLOPs at 1e9/s = 68 µs, plus one launch.
    KernelCost fused = costs.GroupCost(members);
    CHECK(fused.flops == Approx(17 * 4000));
    CHECK(fused.seconds == Approx(68e-6 + 1e-6));
    // Separate: the Tanhs over 4 elements each, the Mul over 4000: three launches.
    KernelCost separate = costs.SeparateCost(members);
    CHECK(separate.flops == Approx(8 * 4 + 8 * 4 + 4000));
    CHECK(separate.seconds == Approx(64e-9 + 4e-6 + 3e-6));

    FuseElementwise pass;
    PassOptions options;
    PassStatistics statistics;
    std::vector<FusionRecord> fusions;
    PassContext context(*model, pass, options, statistics, fusions);
    context.UseCostModel(costs, gate);
    auto changed = pass.Run(*model, context);
    REQUIRE(changed.ok());
    INFO("gated: " << gate);
    CHECK(*changed == !gate);
    CHECK(fusions.size() == (gate ? 0u : 1u));
    CHECK(statistics.rejections.count(kCostModelRejection) == (gate ? 1u : 0u));
    if (gate) {
      REQUIRE(statistics.cost_rejections.size() == 1);
      CHECK(statistics.cost_rejections[0].reason == "cost model: fused 69.00 us >= separate 7.06 us");
      CHECK(statistics.cost_rejections[0].predicted_fused_s == Approx(69e-6));
    }
  }
}

TEST_CASE("cost model: an unknown target stops the pipeline before any pass runs", "[cost]") {
  const char* text = R"(
ir_version 8
opset "" 17
graph main (float[4] %x) -> (float[4] %y)
{
  %t = Relu(%x) @relu
  %y = Neg(%t) @neg
}
)";
  auto model = ParseInferred(text);
  PipelineOptions options;
  options.level = 3;
  options.target = "v100";
  auto report = RunPipeline(*model, options);
  REQUIRE_FALSE(report.ok());
  CHECK(report.status().code() == ErrorCode::kUsage);
  CHECK(report.status().message().find("unknown target 'v100'") != std::string::npos);
  CHECK(ValidatePipelineOptions(options).code() == ErrorCode::kUsage);
  CHECK(pass_test::Print(*model) == pass_test::Canonical(text));
}

TEST_CASE("cost model: --dim must name a symbol of the model", "[cost]") {
  auto model = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[batch,4] %x) -> (float[batch,4] %y)
{
  %y = Relu(%x) @relu
}
)");
  CHECK(SymbolsOf(*model) == std::set<std::string>{"batch"});
  CHECK(CheckDimSymbols(*model, {{"batch", 8}}).ok());
  Status typo = CheckDimSymbols(*model, {{"bacth", 8}});
  CHECK(typo.code() == ErrorCode::kUsage);
  CHECK(typo.message() == "--dim bacth: the model has no symbolic dim 'bacth' (its symbols: batch)");
}

TEST_CASE("cost model: a group it cannot cost is fused as before, without predictions", "[cost]") {
  auto model = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[?,4] %x) -> (float[?,4] %y)
{
  %t = Relu(%x) @relu
  %y = Neg(%t) @neg
}
)");
  FuseElementwise pass;
  PassOptions options;
  PassStatistics statistics;
  std::vector<FusionRecord> fusions;
  PassContext context(*model, pass, options, statistics, fusions);
  CostModel costs(*model, H100());
  context.UseCostModel(costs, /*gate_fusions=*/true);
  std::vector<Node*> members;
  for (const auto& node : model->graph->nodes()) members.push_back(node.get());
  FusionVerdict verdict = context.JudgeFusion(members);
  CHECK(verdict.apply());
  CHECK_FALSE(verdict.predicted);
  CHECK(std::isnan(verdict.predicted_fused_s));
  CHECK_FALSE(verdict.refused);
  auto changed = pass.Run(*model, context);
  REQUIRE(changed.ok());
  CHECK(*changed);
  REQUIRE(fusions.size() == 1);
  CHECK(std::isnan(fusions[0].predicted_separate_s));
  CHECK(statistics.rejections.empty());
}
