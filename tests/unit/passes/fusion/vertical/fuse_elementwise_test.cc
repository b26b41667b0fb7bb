// fuse-elementwise: maximal groups, broadcasting, intermediates with several readers, the
// iteration-space rule, caps, convexity, and what the engine cannot evaluate.
#include <catch2/catch.hpp>

#include "pass_harness.h"
#include "passes/util/outline.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "fuse-elementwise";

}  // namespace

TEST_CASE("fuse-elementwise: a broadcasting chain becomes one node with scalars compiled in", "[passes]") {
  PassRun run = ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[N,4] %x, float[4] %scale) -> (float[N,4] %y)
  init float[] %bias = [0.5]
{
  %t = Mul(%x, %scale) @mul
  %u = Add(%t, %bias) @add
  %y = Relu(%u) @relu
}
)",
                              kPass,
                              R"(
ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[N,4] %x, float[4] %scale) -> (float[N,4] %y)
  init float[] %bias = [0.5]
{
  %y = ai.fusionopt::FusedElementwise_Mul_Add_Relu(%x, %scale) {fused_nodes: ["mul", "add", "relu"]} @FusedElementwise_Mul_Add_Relu
}
function ai.fusionopt::FusedElementwise_Mul_Add_Relu (%x0, %x1) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Mul(%x0, %x1)
  %c0 = Constant() {value: tensor float[] [0.5]}
  %t1 = Add(%t0, %c0)
  %y0 = Relu(%t1)
}
)",
                              {.numbers = Inlined()})
                    .run;
  CHECK(run.statistics.matches == 1);
  CHECK(run.statistics.counters["ops_fused"] == 3);
  REQUIRE(run.fusions.size() == 1);
  CHECK(run.fusions[0].kind == "elementwise");
  CHECK(run.fusions[0].replaced == std::vector<std::string>{"mul", "add", "relu"});
}

TEST_CASE("fuse-elementwise: an intermediate read only inside the group stays internal", "[passes]") {
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x) -> (float[2,3] %y)
  init float[] %one = [1.0]
{
  %e = Exp(%x) @exp
  %a = Add(%e, %one) @add
  %y = Mul(%e, %a) @mul
}
)",
                kPass,
                R"(
ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[2,3] %x) -> (float[2,3] %y)
  init float[] %one = [1.0]
{
  %y = ai.fusionopt::FusedElementwise_Exp_Add_Mul(%x) {fused_nodes: ["exp", "add", "mul"]} @FusedElementwise_Exp_Add_Mul
}
function ai.fusionopt::FusedElementwise_Exp_Add_Mul (%x0) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Exp(%x0)
  %c0 = Constant() {value: tensor float[] [1.0]}
  %t1 = Add(%t0, %c0)
  %y0 = Mul(%t0, %t1)
}
)",
                {.numbers = Inlined()});
}

TEST_CASE("fuse-elementwise: an intermediate also read outside becomes an extra output", "[passes]") {
  // One write of %t inside the pass that computes it anyway, instead of a kernel of its own.
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x, float[2,3] %z) -> (float[2,3] %y, float[2,1] %s)
  init int64[1] %axes = [1]
{
  %t = Add(%x, %z) @add
  %s = ReduceSum(%t, %axes) {keepdims: 1} @sum
  %y = Relu(%t) @relu
}
)",
                kPass,
                R"(
ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[2,3] %x, float[2,3] %z) -> (float[2,3] %y, float[2,1] %s)
  init int64[1] %axes = [1]
{
  %t, %y = ai.fusionopt::FusedElementwise_Add_Relu(%x, %z) {fused_nodes: ["add", "relu"]} @FusedElementwise_Add_Relu
  %s = ReduceSum(%t, %axes) {keepdims: 1} @sum
}
function ai.fusionopt::FusedElementwise_Add_Relu (%x0, %x1) -> (%y0, %y1) attributes [fused_nodes] opset "" 17 {
  %y0 = Add(%x0, %x1)
  %y1 = Relu(%y0)
}
)",
                {.numbers = Inlined()});
}

TEST_CASE("fuse-elementwise: a graph output inside the group is one of its outputs", "[passes]") {
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x, float[3] %s) -> (float[2,3] %t, float[2,3] %y)
{
  %t = Mul(%x, %s) @mul
  %y = Sigmoid(%t) @sigmoid
}
)",
                kPass,
                R"(
ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[2,3] %x, float[3] %s) -> (float[2,3] %t, float[2,3] %y)
{
  %t, %y = ai.fusionopt::FusedElementwise_Mul_Sigmoid(%x, %s) {fused_nodes: ["mul", "sigmoid"]} @FusedElementwise_Mul_Sigmoid
}
function ai.fusionopt::FusedElementwise_Mul_Sigmoid (%x0, %x1) -> (%y0, %y1) attributes [fused_nodes] opset "" 17 {
  %y0 = Mul(%x0, %x1)
  %y1 = Sigmoid(%y0)
}
)",
                {.numbers = Inlined()});
}

TEST_CASE("fuse-elementwise: a smaller member read only inside is recomputed per element", "[passes]") {
  // %t is [1,4]; the group iterates over [N,4] and computes %t at every row.
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[N,4] %x, float[1,4] %a, float[1,4] %b) -> (float[N,4] %y)
{
  %t = Add(%a, %b) @add
  %y = Mul(%t, %x) @mul
}
)",
                kPass,
                R"(
ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[N,4] %x, float[1,4] %a, float[1,4] %b) -> (float[N,4] %y)
{
  %y = ai.fusionopt::FusedElementwise_Add_Mul(%a, %b, %x) {fused_nodes: ["add", "mul"]} @FusedElementwise_Add_Mul
}
function ai.fusionopt::FusedElementwise_Add_Mul (%x0, %x1, %x2) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Add(%x0, %x1)
  %y0 = Mul(%t0, %x2)
}
)",
                {.numbers = Inlined({{"N", 5}})});
}

TEST_CASE("fuse-elementwise: a smaller value read outside cuts the group", "[passes]") {
  // The engine stores every output at the group's index space: a [1,4] output cannot be.
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[N,4] %x, float[1,4] %a, float[1,4] %b) -> (float[N,4] %y, float[1,4] %t)
{
  %t = Add(%a, %b) @add
  %y = Mul(%t, %x) @mul
}
)",
                  kPass, "outputs do not provably share one shape");
}

TEST_CASE("fuse-elementwise: a small value read by two large groups is computed once", "[passes]") {
  // Like BERT's additive mask [B,1,1,S], added to every layer's [B,H,S,S] scores.
  auto original = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[N,4] %x, float[N,4] %z, float[1,4] %a, float[1,4] %b) -> (float[N,4] %p, float[N,4] %q)
{
  %d = Sub(%a, %b) @sub
  %m = Neg(%d) @neg
  %u = Mul(%m, %x) @mul1
  %p = Relu(%u) @relu1
  %v = Mul(%m, %z) @mul2
  %q = Relu(%v) @relu2
}
)");
  auto model = ParseInferred(Print(*original));
  PassRun run = RunPass(*model, kPass);
  CHECK(OpTypes(*model->graph) == std::vector<std::string>{"ai.fusionopt::FusedElementwise_Sub_Neg",
                                                           "ai.fusionopt::FusedElementwise_Mul_Relu",
                                                           "ai.fusionopt::FusedElementwise_Mul_Relu"});
  CHECK(model->functions.size() == 2);  // the two Mul+Relu groups share a body
  CHECK(RejectionCount(run.statistics, "outputs do not provably share one shape") >= 2);
  ExpectSameNumbers(*original, *model, Inlined({{"N", 3}}));
}

TEST_CASE("fuse-elementwise: symbolic and unknown dims, proven or refused", "[passes]") {
  // %t and %y are both written; N, M and K broadcast to dims nobody knows, so nothing proves
  // that %t has %y's shape.
  const std::string multi_output = R"(
ir_version 8
opset "" 17
graph main (float[N,4] %x, float[M,4] %z, float[K,4] %w) -> (float[?,4] %y, float[?,4] %t)
{
  %t = Add(%x, %z) @add
  %y = Mul(%t, %w) @mul
}
)";
  ExpectUnchanged(multi_output, kPass, "outputs do not provably share one shape");
  // With one symbol everywhere the shapes are equal at run time.
  std::string same = multi_output;
  for (const char* symbol : {"M,4", "K,4", "?,4", "?,4"}) same.replace(same.find(symbol), 3, "N,4");
  auto original = ParseInferred(same);
  auto model = ParseInferred(same);
  RunPass(*model, kPass);
  CHECK(OpTypes(*model->graph) == std::vector<std::string>{"ai.fusionopt::FusedElementwise_Add_Mul"});
  ExpectSameNumbers(*original, *model, Inlined({{"N", 2}}));
  // One written value needs no proof: each op's output contains its inputs' broadcast, so the
  // group's index space is its output's, whatever the dims — unknown rank included.
  for (const char* text : {R"(
ir_version 8
opset "" 17
graph main (float[N,4] %x, float[M,4] %z) -> (float[?,4] %y)
{
  %t = Add(%x, %z) @add
  %y = Relu(%t) @relu
}
)",
                           R"(
ir_version 8
opset "" 17
graph main (float %x, float %z) -> (float %y, float %t)
{
  %t = Add(%x, %z) @add
  %y = Relu(%t) @relu
}
)"}) {
    INFO(text);
    auto before = ParseInferred(text);
    auto after = ParseInferred(text);
    RunPass(*after, kPass);
    CHECK(OpTypes(*after->graph) == std::vector<std::string>{"ai.fusionopt::FusedElementwise_Add_Relu"});
  }
  auto broadcast = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[N,4] %x, float[1,4] %z) -> (float[N,4] %y)
{
  %t = Add(%x, %z) @add
  %y = Relu(%t) @relu
}
)");
  auto fused = ParseInferred(Print(*broadcast));
  RunPass(*fused, kPass);
  ExpectSameNumbers(*broadcast, *fused, Inlined({{"N", 1}}));
}

TEST_CASE("fuse-elementwise: two producer groups merge through the op that joins them", "[passes]") {
  auto original = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x, float[3] %z) -> (float[2,3] %y)
{
  %e = Exp(%x) @exp
  %s = Sigmoid(%z) @sigmoid
  %y = Add(%e, %s) @add
}
)");
  auto model = ParseInferred(Print(*original));
  RunPass(*model, kPass);
  REQUIRE(model->graph->num_nodes() == 1);
  const Node& fused = *model->graph->nodes().front();
  CHECK(passes::FusedNodeNames(fused) == std::vector<std::string>{"exp", "sigmoid", "add"});
  ExpectSameNumbers(*original, *model, Inlined());
}

TEST_CASE("fuse-elementwise: caps bound ops, inputs and outputs", "[passes]") {
  const std::string chain = R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x) -> (float[2,3] %y)
{
  %a = Neg(%x) @a
  %b = Abs(%a) @b
  %c = Exp(%b) @c
  %d = Neg(%c) @d
  %y = Relu(%d) @e
}
)";
  auto original = ParseInferred(chain);
  auto model = ParseInferred(chain);
  PassRun run = RunPass(*model, kPass, {{"max-ops", "2"}});
  CHECK(OpTypes(*model->graph) == std::vector<std::string>{"ai.fusionopt::FusedElementwise_Neg_Abs",
                                                           "ai.fusionopt::FusedElementwise_Exp_Neg", "Relu"});
  CHECK(RejectionCount(run.statistics, "group would exceed max-ops") == 2);
  CHECK(run.statistics.counters["single_ops_left"] == 1);
  ExpectSameNumbers(*original, *model, Inlined());

  const std::string sums = R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x1, float[2,3] %x2, float[2,3] %x3, float[2,3] %x4) -> (float[2,3] %y)
{
  %s1 = Add(%x1, %x2) @s1
  %s2 = Add(%s1, %x3) @s2
  %y = Add(%s2, %x4) @s3
}
)";
  auto summed = ParseInferred(sums);
  run = RunPass(*summed, kPass, {{"max-inputs", "3"}});
  CHECK(OpTypes(*summed->graph) == std::vector<std::string>{"ai.fusionopt::FusedElementwise_Add_Add", "Add"});
  CHECK(RejectionCount(run.statistics, "group would exceed max-inputs") == 1);

  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x, float[2,3] %z) -> (float[2,3] %y, float[2,3] %t)
{
  %t = Add(%x, %z) @add
  %y = Relu(%t) @relu
}
)",
                  kPass, "group would exceed max-outputs", {{"max-outputs", "1"}});
}

TEST_CASE("fuse-elementwise: never a group that a path leaves and re-enters", "[passes]") {
  // Exp -> ReduceSum -> Mul and Exp -> Mul: fusing Exp with Mul would feed the node itself.
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x) -> (float[2,3] %y)
  init int64[1] %axes = [1]
{
  %t = Exp(%x) @exp
  %r = ReduceSum(%t, %axes) {keepdims: 1} @sum
  %y = Mul(%t, %r) @mul
}
)",
                  kPass, "group would not be convex");
}

TEST_CASE("fuse-elementwise: dtypes the engine computes, Cast inside a group", "[passes]") {
  const char* programs[] = {
      R"(
ir_version 8
opset "" 17
graph main (float16[2,3] %x) -> (float16[2,3] %y)
{
  %f = Cast(%x) {to: 1} @widen
  %e = Exp(%f) @exp
  %y = Cast(%e) {to: 10} @narrow
}
)",
      R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x, float[2,3] %z) -> (float[2,3] %y)
{
  %c = Greater(%x, %z) @greater
  %n = Neg(%x) @neg
  %y = Where(%c, %x, %n) @where
}
)",
      R"(
ir_version 8
opset "" 17
graph main (int32[2,3] %a, int32[2,3] %b) -> (int32[2,3] %y)
  init int32[] %seven = [7]
{
  %p = Mul(%a, %b) @mul
  %s = Add(%p, %seven) @add
  %y = Mod(%s, %seven) @mod
}
)",
      R"(
ir_version 8
opset "" 17
graph main (double[2,3] %x, bfloat16[3] %h) -> (double[2,3] %y, bfloat16[3] %g)
{
  %t = Tanh(%x) @tanh
  %y = Mul(%t, %x) @mul
  %r = Relu(%h) @relu
  %g = Add(%r, %h) @add
}
)",
      R"(
ir_version 8
opset "" 17
graph main (bool[2,3] %p, bool[2,3] %q) -> (bool[2,3] %y)
{
  %a = And(%p, %q) @and
  %y = Not(%a) @not
}
)",
  };
  for (const char* program : programs) {
    INFO(program);
    auto original = ParseInferred(program);
    auto model = ParseInferred(program);
    PassRun run = RunPass(*model, kPass);
    CHECK(run.statistics.changed);
    for (const auto& node : model->graph->nodes()) CHECK(node->domain() == "ai.fusionopt");
    ExpectSameNumbers(*original, *model, Inlined());
  }
}

TEST_CASE("fuse-elementwise: ops the engine cannot evaluate stay out", "[passes]") {
  PassRun run = ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x, double[1] %like) -> (double[2,3] %y)
{
  %a = Abs(%x) @abs
  %c = CastLike(%a, %like) @castlike
  %y = Neg(%c) @neg
}
)",
                                kPass, "CastLike (its second input gives only a type)");
  CHECK(run.statistics.counters["single_ops_left"] == 2);
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (int64[2,3] %x) -> (int64[2,3] %y)
{
  %a = Sqrt(%x) @sqrt
  %y = Neg(%a) @neg
}
)",
                  kPass, "the engine does not compute Sqrt on int64");
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (string[2] %x) -> (bool[2] %y)
{
  %e = Equal(%x, %x) @equal
  %y = Not(%e) @not
}
)",
                  kPass, "dtype the engine does not compute");
}

TEST_CASE("fuse-elementwise: legacy opsets are left alone", "[passes]") {
  ExpectUnchanged(R"(
ir_version 3
opset "" 6
graph main (float[2,3] %x, float[2,3] %z) -> (float[2,3] %y)
{
  %t = Add(%x, %z) @add
  %y = Relu(%t) @relu
}
)",
                  kPass, "opset before 7");
}

TEST_CASE("fuse-elementwise: a lone op is not fused", "[passes]") {
  PassRun run = ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x) -> (float[2,3] %y)
  init int64[1] %axes = [1]
{
  %t = Relu(%x) @relu
  %y = ReduceSum(%t, %axes) {keepdims: 0} @sum
}
)",
                                kPass, "");
  CHECK(run.statistics.counters["single_ops_left"] == 1);
  CHECK(run.statistics.rejections.empty());
}

TEST_CASE("fuse-elementwise: groups inside subgraphs, identical bodies shared, long names", "[passes]") {
  auto original = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (bool[] %cond, float[2,3] %x) -> (float[2,3] %y)
{
  %y = If(%cond) {then_branch: graph then_body () -> (float[2,3] %t2) {
    %t1 = Neg(%x) @then_neg
    %t2 = Relu(%t1) @then_relu
  }, else_branch: graph else_body () -> (float[2,3] %e6) {
    %e1 = Neg(%x) @else_neg
    %e2 = Abs(%e1) @else_abs
    %e3 = Exp(%e2) @else_exp
    %e4 = Neg(%e3) @else_neg2
    %e5 = Abs(%e4) @else_abs2
    %e6 = Sigmoid(%e5) @else_sigmoid
  }} @if
}
)");
  auto model = ParseInferred(Print(*original));
  PassRun run = RunPass(*model, kPass);
  CHECK(run.statistics.matches == 2);
  const Node& branch = *model->graph->nodes().front();
  std::vector<Graph*> subgraphs = branch.Subgraphs();
  REQUIRE(subgraphs.size() == 2);
  CHECK(OpTypes(*subgraphs[0]) == std::vector<std::string>{"ai.fusionopt::FusedElementwise_Neg_Relu"});
  CHECK(OpTypes(*subgraphs[1]) ==
        std::vector<std::string>{"ai.fusionopt::FusedElementwise_Neg_Abs_Exp_Neg_2more"});
  ExpectSameNumbers(*original, *model, Inlined());

  const std::string twins = R"(
ir_version 8
opset "" 17
graph main (float[2,3] %a, float[2,3] %b) -> (float[2,3] %y, float[2,3] %z)
{
  %s = Sigmoid(%a) @sigmoid1
  %y = Mul(%a, %s) @mul1
  %t = Sigmoid(%b) @sigmoid2
  %z = Mul(%b, %t) @mul2
}
)";
  auto shared = ParseInferred(twins);
  RunPass(*shared, kPass);
  CHECK(OpTypes(*shared->graph) == std::vector<std::string>{"ai.fusionopt::FusedElementwise_Sigmoid_Mul",
                                                            "ai.fusionopt::FusedElementwise_Sigmoid_Mul"});
  CHECK(shared->functions.size() == 1);
  ExpectSameNumbers(*ParseInferred(twins), *shared, Inlined());
}

TEST_CASE("fuse-elementwise: a quantized Add between DequantizeLinear and QuantizeLinear is one kernel", "[passes][quantized]") {
  const std::string header = R"(
ir_version 10
opset "" 21
graph g (uint8[2,8] %a, uint8[2,8] %b) -> (uint8[2,8] %y)
  init float[] %s = [0.05]
  init uint8[] %z = [128]
  init float[] %ys = [0.1]
  init uint8[] %yz = [3]
  init float[8] %channel_scales = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
  init uint8[8] %channel_zeros = [1, 2, 3, 4, 5, 6, 7, 8]
{
)";
  const std::string per_tensor = header + R"(  %x = DequantizeLinear(%a, %s, %z)
  %w = DequantizeLinear(%b, %s, %z)
  %sum = Add(%x, %w)
  %r = Relu(%sum)
  %y = QuantizeLinear(%r, %ys, %yz)
})";
  Rewritten rewritten = ExpectRewriteOps(per_tensor, "fuse-elementwise", {"ai.fusionopt::FusedElementwise_DequantizeLinear_DequantizeLinear_Add_Relu_1more"},
                                         {.numbers = Inlined()});
  // Run as one kernel, it computes the ops' bits.
  ExpectSameNumbers(*rewritten.original, *rewritten.model, SameNumbers{.bit_for_bit = true});
  // A per-axis scale needs the views the single op makes: that DequantizeLinear stays its own kernel.
  const std::string per_axis = header + R"(  %x = DequantizeLinear(%a, %channel_scales, %channel_zeros) {axis: 1}
  %w = DequantizeLinear(%b, %s, %z)
  %sum = Add(%x, %w)
  %r = Relu(%sum)
  %y = QuantizeLinear(%r, %ys, %yz)
})";
  Rewritten partial = Rewrite(per_axis, "fuse-elementwise");
  CHECK(OpTypes(*partial.model->graph).front() == "DequantizeLinear");
  CHECK(OpTypes(*partial.model->graph).size() == 2);
  ExpectSameNumbers(*partial.original, *partial.model, SameNumbers{.bit_for_bit = true});
}

TEST_CASE("fuse-elementwise: a group hands on the 8-bit value, each reader's group dequantizes it itself",
          "[passes][quantized]") {
  // The first group quantizes Tanh(x) and dequantizes it for the Add of the second group, which
  // cannot join it (the MatMulInteger between them reads the 8-bit value). The second group
  // gets its own DequantizeLinear: the first writes only the uint8 tensor.
  auto model_text = [](const std::string& outputs) {
    return R"(
ir_version 10
opset "" 21
graph g (uint8[2,8] %a) -> ()" + outputs + R"()
  init float[] %s = [0.05]
  init float[] %s1 = [0.01]
  init float[] %s2 = [0.2]
  init uint8[] %z = [128]
  init uint8[8,8] %w = )" + std::string("[") + [] {
      std::string values;
      for (int i = 0; i < 64; ++i) values += (i ? ", " : "") + std::to_string(i * 7 % 256);
      return values;
    }() + R"(]
{
  %x = DequantizeLinear(%a, %s, %z) @dq_a
  %t = Tanh(%x) @tanh
  %q1 = QuantizeLinear(%t, %s1, %z) @q1
  %d = DequantizeLinear(%q1, %s1, %z) @dq_q1
  %m = MatMulInteger(%q1, %w) @mmi
  %mf = Cast(%m) {to: 1} @cast
  %e = Sigmoid(%mf) @sigmoid
  %r = Add(%d, %e) @add
  %q2 = QuantizeLinear(%r, %s2, %z) @q2
}
)";
  };
  Rewritten moved = ExpectRewriteOps(model_text("uint8[2,8] %q2"), kPass,
                                     {"ai.fusionopt::FusedElementwise_DequantizeLinear_Tanh_QuantizeLinear", "MatMulInteger",
                                      "ai.fusionopt::FusedElementwise_Cast_Sigmoid_DequantizeLinear_Add_1more"},
                                     {.numbers = Inlined()});
  CHECK(moved.Counter("dequantizations_moved_to_readers") == 1);
  ExpectSameNumbers(*moved.original, *moved.model, SameNumbers{.bit_for_bit = true});
  // The first group's one output is the uint8 value.
  const Node& first = *moved.model->graph->nodes().front();
  REQUIRE(first.outputs().size() == 1);
  CHECK(first.output(0)->name() == "q1");

  // The dequantized value is a graph output too: the first group writes it, and the Add reads it.
  Rewritten kept = Rewrite(model_text("uint8[2,8] %q2, float[2,8] %d"), kPass);
  CHECK(kept.Counter("dequantizations_moved_to_readers") == 0);
  ExpectSameNumbers(*kept.original, *kept.model, SameNumbers{.bit_for_bit = true});
}
