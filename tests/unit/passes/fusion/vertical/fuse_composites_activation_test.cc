// fuse-composites, Softmax with scale and mask, GELU and SiLU: the rewritten graph with its
// function bodies, the bodies recognised, the same numbers; composites in subgraphs; lone
// standard ops and look-alikes left alone.
#include "fuse_composites_test_helpers.h"

using namespace fusionopt;
using namespace fusionopt::fuse_composites_test;

TEST_CASE("fuse-composites: attention softmax with scale and additive mask, Where mask, scale only", "[passes]") {
  ExpectFusedComposite(Header() + R"(graph main (float[N,2,4,4] %qk, float[N,1,1,4] %mask) -> (float[N,2,4,4] %p)
{
  %c = Constant() {value: tensor float[] [4.0]} @scale_constant
  %s = Div(%qk, %c) @scale
  %z = Add(%s, %mask) @add_mask
  %p = Softmax(%z) {axis: -1} @softmax
}
)",
                       Header() + R"(opset "ai.fusionopt" 1
graph main (float[N,2,4,4] %qk, float[N,1,1,4] %mask) -> (float[N,2,4,4] %p)
{
  %p = ai.fusionopt::FusedSoftmax(%qk, %mask) {fused_nodes: ["scale", "add_mask", "softmax"]} @FusedSoftmax
}

function ai.fusionopt::FusedSoftmax (%x0, %x1) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %c0 = Constant() {value: tensor float[] [4.0]}
  %t0 = Div(%x0, %c0)
  %t1 = Add(%t0, %x1)
  %y0 = Softmax(%t1) {axis: -1}
}
)");
  ExpectFusedComposite(Header() + R"(graph main (float[N,2,4,4] %qk, bool[1,1,4,4] %keep) -> (float[N,2,4,4] %p)
  init float[] %root = [5.656854]
{
  %s = Div(%qk, %root) @scale
  %fill = Constant() {value: tensor float[] [-3.4028235e+38]} @fill
  %z = Where(%keep, %s, %fill) @where
  %p = Softmax(%z) {axis: -1} @softmax
}
)",
                       Header() + R"(opset "ai.fusionopt" 1
graph main (float[N,2,4,4] %qk, bool[1,1,4,4] %keep) -> (float[N,2,4,4] %p)
{
  %p = ai.fusionopt::FusedSoftmax(%qk, %keep) {fused_nodes: ["scale", "where", "softmax"]} @FusedSoftmax
}

function ai.fusionopt::FusedSoftmax (%x0, %x1) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %c0 = Constant() {value: tensor float[] [5.656854]}
  %t0 = Div(%x0, %c0)
  %c1 = Constant() {value: tensor float[] [-3.4028235e+38]}
  %t1 = Where(%x1, %t0, %c1)
  %y0 = Softmax(%t1) {axis: -1}
}
)");
  // Opset 11: Softmax flattens at `axis`, which is the last axis here, so rows are rows.
  ExpectFusedComposite(Header(11) + R"(graph main (float[2,4,6] %x) -> (float[2,4,6] %p)
  init float[] %k = [0.125]
{
  %s = Mul(%k, %x) @scale
  %p = Softmax(%s) {axis: 2} @softmax
}
)",
                       Header(11) + R"(opset "ai.fusionopt" 1
graph main (float[2,4,6] %x) -> (float[2,4,6] %p)
{
  %p = ai.fusionopt::FusedSoftmax(%x) {fused_nodes: ["scale", "softmax"]} @FusedSoftmax
}

function ai.fusionopt::FusedSoftmax (%x0) -> (%y0) attributes [fused_nodes] opset "" 11 {
  %c0 = Constant() {value: tensor float[] [0.125]}
  %t0 = Mul(%c0, %x0)
  %y0 = Softmax(%t0) {axis: 2}
}
)");
}

TEST_CASE("fuse-composites: an unscaled mask added first trades places with the scores", "[passes]") {
  Fused fused =
      ExpectFusedComposite(Header() + R"(graph main (float[N,1,1,4] %mask, float[N,2,4,4] %qk) -> (float[N,2,4,4] %p)
{
  %z = Add(%mask, %qk) @add_mask
  %p = Softmax(%z) {axis: -1} @softmax
}
)",
                           Header() + R"(opset "ai.fusionopt" 1
graph main (float[N,1,1,4] %mask, float[N,2,4,4] %qk) -> (float[N,2,4,4] %p)
{
  %p = ai.fusionopt::FusedSoftmax(%mask, %qk) {fused_nodes: ["add_mask", "softmax"]} @FusedSoftmax
}

function ai.fusionopt::FusedSoftmax (%x0, %x1) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Add(%x0, %x1)
  %y0 = Softmax(%t0) {axis: -1}
}
)");
  CHECK(fused.Counter("softmax") == 1);
}

TEST_CASE("fuse-composites: GELU erf and tanh forms; identical GELUs share one function", "[passes]") {
  auto bert_gelu = [](const std::string& x, const std::string& y, const std::string& tag) {
    return "  %" + tag + "_root = Constant() {value: tensor float[] [1.4142135]} @" + tag + "_root\n" +
           "  %" + tag + "_div = Div(%" + x + ", %" + tag + "_root) @" + tag + "_div\n" +
           "  %" + tag + "_erf = Erf(%" + tag + "_div) @" + tag + "_erf\n" +
           "  %" + tag + "_one = Constant() {value: tensor float[] [1.0]} @" + tag + "_one\n" +
           "  %" + tag + "_add = Add(%" + tag + "_erf, %" + tag + "_one) @" + tag + "_add\n" +
           "  %" + tag + "_mul = Mul(%" + x + ", %" + tag + "_add) @" + tag + "_mul\n" +
           "  %" + tag + "_half = Constant() {value: tensor float[] [0.5]} @" + tag + "_half\n" +
           "  %" + y + " = Mul(%" + tag + "_mul, %" + tag + "_half) @" + tag + "_mul_1\n";
  };
  Fused fused = ExpectFusedComposite(
      Header() + "graph main (float[N,8] %x, float[N,8] %z) -> (float[N,8] %y, float[N,8] %w)\n{\n" +
          bert_gelu("x", "y", "g1") + bert_gelu("z", "w", "g2") + "}\n",
      Header() + R"(opset "ai.fusionopt" 1
graph main (float[N,8] %x, float[N,8] %z) -> (float[N,8] %y, float[N,8] %w)
{
  %y = ai.fusionopt::FusedGelu(%x) {fused_nodes: ["g1_div", "g1_erf", "g1_add", "g1_mul", "g1_mul_1"]} @FusedGelu
  %w = ai.fusionopt::FusedGelu(%z) {fused_nodes: ["g2_div", "g2_erf", "g2_add", "g2_mul", "g2_mul_1"]} @FusedGelu_1
}

function ai.fusionopt::FusedGelu (%x0) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %c0 = Constant() {value: tensor float[] [1.4142135]}
  %t0 = Div(%x0, %c0)
  %t1 = Erf(%t0)
  %c1 = Constant() {value: tensor float[] [1.0]}
  %t2 = Add(%t1, %c1)
  %t3 = Mul(%x0, %t2)
  %c2 = Constant() {value: tensor float[] [0.5]}
  %y0 = Mul(%t3, %c2)
}
)");
  CHECK(fused.model->functions.size() == 1);
  CHECK(fused.Counter("gelu") == 2);

  ExpectFusedComposite(Header() + R"(graph main (float[N,8] %x) -> (float[N,8] %y)
{
  %half = Constant() {value: tensor float[] [0.5]} @half
  %hx = Mul(%x, %half) @mul
  %three = Constant() {value: tensor float[] [3.0]} @three
  %cube = Pow(%x, %three) @pow
  %k = Constant() {value: tensor float[] [0.044715]} @k
  %kc = Mul(%cube, %k) @mul_1
  %inner = Add(%x, %kc) @add
  %s = Constant() {value: tensor float[] [0.7978846]} @s
  %arg = Mul(%inner, %s) @mul_2
  %t = Tanh(%arg) @tanh
  %one = Constant() {value: tensor float[] [1.0]} @one
  %bracket = Add(%t, %one) @add_1
  %y = Mul(%hx, %bracket) @mul_3
}
)",
                       Header() + R"(opset "ai.fusionopt" 1
graph main (float[N,8] %x) -> (float[N,8] %y)
{
  %y = ai.fusionopt::FusedGelu(%x) {fused_nodes: ["mul", "pow", "mul_1", "add", "mul_2", "tanh", "add_1", "mul_3"]} @FusedGelu
}

function ai.fusionopt::FusedGelu (%x0) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %c0 = Constant() {value: tensor float[] [0.5]}
  %t0 = Mul(%x0, %c0)
  %c1 = Constant() {value: tensor float[] [3.0]}
  %t1 = Pow(%x0, %c1)
  %c2 = Constant() {value: tensor float[] [0.044715]}
  %t2 = Mul(%t1, %c2)
  %t3 = Add(%x0, %t2)
  %c3 = Constant() {value: tensor float[] [0.7978846]}
  %t4 = Mul(%t3, %c3)
  %t5 = Tanh(%t4)
  %c4 = Constant() {value: tensor float[] [1.0]}
  %t6 = Add(%t5, %c4)
  %y0 = Mul(%t0, %t6)
}
)");
}

namespace {

// BLOOM's bloom_gelu_forward, x·0.5·(1 + tanh(0.79788456·x·(1 + 0.044715·x·x))), as the
// dynamo exporter writes it; `k` is the cubic coefficient.
std::string BloomGelu(const std::string& k = "0.044715") {
  return Header() + R"(graph main (float[N,8] %x) -> (float[N,8] %y)
{
  %half = Constant() {value: tensor float[] [0.5]} @half
  %hx = Mul(%x, %half) @mul_106
  %s = Constant() {value: tensor float[] [0.7978846]} @s
  %sx = Mul(%x, %s) @mul_107
  %k = Constant() {value: tensor float[] [)" + k + R"(]} @k
  %kx = Mul(%x, %k) @mul_108
  %kxx = Mul(%kx, %x) @mul_109
  %one = Constant() {value: tensor float[] [1.0]} @one
  %inner = Add(%kxx, %one) @add_4
  %arg = Mul(%sx, %inner) @mul_110
  %t = Tanh(%arg) @tanh
  %bracket = Add(%t, %one) @add_5
  %y = Mul(%hx, %bracket) @mul_111
}
)";
}

}  // namespace

TEST_CASE("fuse-composites: tanh GELU with its argument factored as c·x·(1 + k·x·x) (BLOOM)", "[passes]") {
  Fused fused = ExpectFusedComposite(BloomGelu(), Header() + R"(opset "ai.fusionopt" 1
graph main (float[N,8] %x) -> (float[N,8] %y)
{
  %y = ai.fusionopt::FusedGelu(%x) {fused_nodes: ["mul_106", "mul_107", "mul_108", "mul_109", "add_4", "mul_110", "tanh", "add_5", "mul_111"]} @FusedGelu
}

function ai.fusionopt::FusedGelu (%x0) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %c0 = Constant() {value: tensor float[] [0.5]}
  %t0 = Mul(%x0, %c0)
  %c1 = Constant() {value: tensor float[] [0.7978846]}
  %t1 = Mul(%x0, %c1)
  %c2 = Constant() {value: tensor float[] [0.044715]}
  %t2 = Mul(%x0, %c2)
  %t3 = Mul(%t2, %x0)
  %c3 = Constant() {value: tensor float[] [1.0]}
  %t4 = Add(%t3, %c3)
  %t5 = Mul(%t1, %t4)
  %t6 = Tanh(%t5)
  %t7 = Add(%t6, %c3)
  %y0 = Mul(%t0, %t7)
}
)");
  CHECK(fused.Counter("gelu") == 1);
  ExpectUnchanged(BloomGelu("0.5"), kPass, "gelu: the cubic coefficient is not 0.044715");
}

TEST_CASE("fuse-composites: SiLU in either operand order", "[passes]") {
  Fused fused =
      ExpectFusedComposite(Header() + R"(graph main (float[N,8] %x, float[N,8] %z) -> (float[N,8] %y, float[N,8] %w)
{
  %s = Sigmoid(%x) @sigmoid
  %y = Mul(%x, %s) @mul
  %t = Sigmoid(%z) @sigmoid_1
  %w = Mul(%t, %z) @mul_1
}
)",
                           Header() + R"(opset "ai.fusionopt" 1
graph main (float[N,8] %x, float[N,8] %z) -> (float[N,8] %y, float[N,8] %w)
{
  %y = ai.fusionopt::FusedSilu(%x) {fused_nodes: ["sigmoid", "mul"]} @FusedSilu
  %w = ai.fusionopt::FusedSilu_1(%z) {fused_nodes: ["sigmoid_1", "mul_1"]} @FusedSilu_1
}

function ai.fusionopt::FusedSilu (%x0) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Sigmoid(%x0)
  %y0 = Mul(%x0, %t0)
}

function ai.fusionopt::FusedSilu_1 (%x0) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Sigmoid(%x0)
  %y0 = Mul(%t0, %x0)
}
)");
  CHECK(fused.Counter("silu") == 2);
}

TEST_CASE("fuse-composites: QuickGELU, x·sigmoid(1.702·x), in either operand order", "[passes]") {
  Fused fused =
      ExpectFusedComposite(Header() + R"(graph main (float[N,8] %x, float[N,8] %z) -> (float[N,8] %y, float[N,8] %w)
  init float[] %k = [1.702]
{
  %a = Mul(%k, %x) @scale
  %s = Sigmoid(%a) @sigmoid
  %y = Mul(%x, %s) @mul
  %b = Mul(%z, %k) @scale_1
  %t = Sigmoid(%b) @sigmoid_1
  %w = Mul(%t, %z) @mul_1
}
)",
                           Header() + R"(opset "ai.fusionopt" 1
graph main (float[N,8] %x, float[N,8] %z) -> (float[N,8] %y, float[N,8] %w)
{
  %y = ai.fusionopt::FusedQuickGelu(%x) {fused_nodes: ["scale", "sigmoid", "mul"]} @FusedQuickGelu
  %w = ai.fusionopt::FusedQuickGelu_1(%z) {fused_nodes: ["scale_1", "sigmoid_1", "mul_1"]} @FusedQuickGelu_1
}

function ai.fusionopt::FusedQuickGelu (%x0) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %c0 = Constant() {value: tensor float[] [1.702]}
  %t0 = Mul(%c0, %x0)
  %t1 = Sigmoid(%t0)
  %y0 = Mul(%x0, %t1)
}

function ai.fusionopt::FusedQuickGelu_1 (%x0) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %c0 = Constant() {value: tensor float[] [1.702]}
  %t0 = Mul(%x0, %c0)
  %t1 = Sigmoid(%t0)
  %y0 = Mul(%t1, %x0)
}
)");
  CHECK(fused.Counter("silu") == 2);
}

TEST_CASE("fuse-composites: composites inside an If branch are fused in place", "[passes]") {
  ExpectFusedComposite(Header() + R"(graph main (bool[] %c, float[4] %x) -> (float[4] %y)
{
  %y = If(%c) {then_branch: graph then_body () -> (float[4] %a) {
    %s = Sigmoid(%x) @sigmoid
    %a = Mul(%s, %x) @mul
  }, else_branch: graph else_body () -> (float[4] %b) {
    %b = Neg(%x) @neg
  }} @if
}
)",
                       Header() + R"(opset "ai.fusionopt" 1
graph main (bool[] %c, float[4] %x) -> (float[4] %y)
{
  %y = If(%c) {then_branch: graph then_body () -> (float[4] %a) {
    %a = ai.fusionopt::FusedSilu(%x) {fused_nodes: ["sigmoid", "mul"]} @FusedSilu
  }, else_branch: graph else_body () -> (float[4] %b) {
    %b = Neg(%x) @neg
  }} @if
}

function ai.fusionopt::FusedSilu (%x0) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Sigmoid(%x0)
  %y0 = Mul(%t0, %x0)
}
)");
}

TEST_CASE("fuse-composites: lone standard ops and look-alikes are not fused", "[passes]") {
  auto model = ParseInferred(Header(20) + R"(graph main (float[2,8] %x, float[2,8] %z) -> (float[2,8] %a, float[2,8] %b, float[2,8] %c)
{
  %a = Gelu(%x) @gelu
  %b = Softmax(%x) {axis: -1} @softmax
  %s = Sigmoid(%z) @sigmoid
  %c = Mul(%x, %s) @gate
}
)");
  std::string before = Print(*model);
  PassRun run = RunPass(*model, kPass);
  CHECK_FALSE(run.statistics.changed);
  CHECK(Print(*model) == before);
  CHECK(run.statistics.rejections.empty());  // x · sigmoid(z) is a gate, not a near miss
  CHECK(run.statistics.counters.at("standalone_gelu_ops") == 1);
  CHECK(run.statistics.counters.at("standalone_softmax_ops") == 1);
}
