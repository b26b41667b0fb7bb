// fuse-contraction-epilogues: bias, residual and activation chains after Conv/Gemm/MatMul,
// the exporters' GELU and SiLU spellings, and every reason a chain stops early.
#include <catch2/catch.hpp>

#include <algorithm>

#include "pass_harness.h"
#include "passes/util/outline.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "fuse-contraction-epilogues";

// A MatMul [N,4] x [4,3] with a bias Add, then `tail` (reading %h, writing %y); `extra_inputs`
// are more graph inputs (naming %bias makes the bias initializer an overridable default).
std::string MatMulModel(const std::string& tail, int opset = 17, const std::string& extra_inputs = "") {
  return R"(
ir_version 8
opset "" )" + std::to_string(opset) +
         R"(
graph main (float[N,4] %a)" + extra_inputs + R"() -> (float[N,3] %y)
  init float[4,3] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
  init float[3] %bias = [0.25, -0.5, 0.125]
{
  %m = MatMul(%a, %w) @matmul
  %h = Add(%m, %bias) @bias
)" + tail + R"(
}
)";
}

// Runs the pass and checks the main graph's ops afterwards and the numbers.
PassRun ExpectOps(const std::string& text, const std::vector<std::string>& ops, const Options& options = {},
                  const std::map<std::string, int64_t>& symbols = {}) {
  Rewritten rewritten = Rewrite(text, kPass, options);
  CHECK(OpTypes(*rewritten.model->graph) == ops);
  ExpectSameNumbers(*rewritten.original, *rewritten.model, Inlined(symbols));
  return rewritten.run;
}

}  // namespace

TEST_CASE("fuse-contraction-epilogues: Conv + per-channel bias + Relu", "[passes]") {
  PassRun run = ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[N,2,3,3] %x) -> (float[N,3,3,3] %y)
  init float[3,2,1,1] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0]
  init float[3,1,1] %b = [0.1, -0.2, 0.3]
{
  %c = Conv(%x, %w) {kernel_shape: [1, 1]} @conv
  %s = Add(%c, %b) @bias
  %y = Relu(%s) @relu
}
)",
                              kPass,
                              R"(
ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[N,2,3,3] %x) -> (float[N,3,3,3] %y)
  init float[3,2,1,1] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0]
  init float[3,1,1] %b = [0.1, -0.2, 0.3]
{
  %y = ai.fusionopt::FusedConvAddRelu(%x, %w, %b) {fused_nodes: ["conv", "bias", "relu"]} @FusedConvAddRelu
}
function ai.fusionopt::FusedConvAddRelu (%x0, %x1, %x2) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Conv(%x0, %x1) {kernel_shape: [1, 1]}
  %t1 = Add(%t0, %x2)
  %y0 = Relu(%t1)
}
)",
                              {.numbers = Inlined()})
                    .run;
  REQUIRE(run.fusions.size() == 1);
  CHECK(run.fusions[0].kind == "contraction_epilogue");
  CHECK(run.statistics.counters["post_ops_fused"] == 2);
}

TEST_CASE("fuse-contraction-epilogues: ResNet's Conv + residual Add + Relu", "[passes]") {
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[N,2,3,3] %x, float[N,3,3,3] %shortcut) -> (float[N,3,3,3] %y)
  init float[3,2,1,1] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0]
  init float[3] %b = [0.1, -0.2, 0.3]
{
  %c = Conv(%x, %w, %b) {kernel_shape: [1, 1]} @conv
  %s = Add(%shortcut, %c) @residual
  %y = Relu(%s) @relu
}
)",
                kPass,
                R"(
ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[N,2,3,3] %x, float[N,3,3,3] %shortcut) -> (float[N,3,3,3] %y)
  init float[3,2,1,1] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0]
  init float[3] %b = [0.1, -0.2, 0.3]
{
  %y = ai.fusionopt::FusedConvAddRelu(%x, %w, %b, %shortcut) {fused_nodes: ["conv", "residual", "relu"]} @FusedConvAddRelu
}
function ai.fusionopt::FusedConvAddRelu (%x0, %x1, %x2, %x3) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Conv(%x0, %x1, %x2) {kernel_shape: [1, 1]}
  %t1 = Add(%x3, %t0)
  %y0 = Relu(%t1)
}
)",
                {.numbers = Inlined()});
}

TEST_CASE("fuse-contraction-epilogues: MatMul + bias + GELU as PyTorch exports it", "[passes]") {
  // The exporter writes the constants as Constant nodes.
  auto text = MatMulModel(R"(
  %sqrt2 = Constant() {value: tensor float[] [1.4142135]} @c_sqrt2
  %one = Constant() {value: tensor float[] [1.0]} @c_one
  %half = Constant() {value: tensor float[] [0.5]} @c_half
  %d = Div(%h, %sqrt2) @div
  %e = Erf(%d) @erf
  %p = Add(%e, %one) @add_one
  %q = Mul(%h, %p) @mul
  %y = Mul(%q, %half) @mul_half
)");
  auto model = ParseInferred(text);
  PassRun run = RunPass(*model, kPass);
  CHECK(OpTypes(*model->graph) == std::vector<std::string>{"Constant", "Constant", "Constant",
                                                           "ai.fusionopt::FusedMatMulAddGelu"});
  const Node& fused = *model->graph->nodes().back();
  CHECK(PrintBody(*model, fused) == R"(graph (%x0, %x1, %x2) -> (%y0) {
  %t0 = MatMul(%x0, %x1)
  %t1 = Add(%t0, %x2)
  %c0 = Constant() {value: tensor float[] [1.4142135]}
  %t2 = Div(%t1, %c0)
  %t3 = Erf(%t2)
  %c1 = Constant() {value: tensor float[] [1.0]}
  %t4 = Add(%t3, %c1)
  %t5 = Mul(%t1, %t4)
  %c2 = Constant() {value: tensor float[] [0.5]}
  %y0 = Mul(%t5, %c2)
}
)");
  CHECK(passes::FusedNodeNames(fused) ==
        std::vector<std::string>{"matmul", "bias", "div", "erf", "add_one", "mul", "mul_half"});
  ExpectSameNumbers(*ParseInferred(text), *model, Inlined({{"N", 5}}));
}

TEST_CASE("fuse-contraction-epilogues: GELU in every exporter spelling", "[passes]") {
  const std::string constants = R"(
  %half = Constant() {value: tensor float[] [0.5]} @c_half
  %one = Constant() {value: tensor float[] [1.0]} @c_one
)";
  const char* spellings[] = {
      // x / √2 as x · (1/√2), factors multiplied as (0.5 · x) · (1 + erf)
      R"(
  %inv = Constant() {value: tensor float[] [0.70710677]} @c_inv
  %d = Mul(%inv, %h) @scale
  %e = Erf(%d) @erf
  %p = Add(%one, %e) @add_one
  %q = Mul(%half, %h) @mul_half
  %y = Mul(%p, %q) @mul
)",
      // x · ((1 + erf) · 0.5)
      R"(
  %sqrt2 = Constant() {value: tensor float[] [1.4142135]} @c_sqrt2
  %d = Div(%h, %sqrt2) @div
  %e = Erf(%d) @erf
  %p = Add(%e, %one) @add_one
  %q = Mul(%p, %half) @mul_half
  %y = Mul(%h, %q) @mul
)",
      // tanh form as HF's GPT-2 writes it: Pow for the cube, 0.5 · x first
      R"(
  %three = Constant() {value: tensor float[] [3.0]} @c_three
  %k = Constant() {value: tensor float[] [0.044715]} @c_k
  %s = Constant() {value: tensor float[] [0.7978846]} @c_s
  %h2 = Mul(%h, %half) @mul_half
  %c = Pow(%h, %three) @pow
  %kc = Mul(%c, %k) @mul_k
  %in = Add(%h, %kc) @add_in
  %si = Mul(%in, %s) @mul_s
  %t = Tanh(%si) @tanh
  %p = Add(%t, %one) @add_one
  %y = Mul(%h2, %p) @mul
)",
      // tanh form with the cube as Mul(Mul(x, x), x) and (x · a) · 0.5
      R"(
  %k = Constant() {value: tensor float[] [0.044715]} @c_k
  %s = Constant() {value: tensor float[] [0.7978846]} @c_s
  %sq = Mul(%h, %h) @square
  %c = Mul(%sq, %h) @cube
  %kc = Mul(%k, %c) @mul_k
  %in = Add(%kc, %h) @add_in
  %si = Mul(%s, %in) @mul_s
  %t = Tanh(%si) @tanh
  %p = Add(%one, %t) @add_one
  %q = Mul(%h, %p) @mul
  %y = Mul(%q, %half) @mul_half
)",
  };
  for (const char* spelling : spellings) {
    std::string text = MatMulModel(constants + spelling);
    INFO(text);
    auto model = ParseInferred(text);
    RunPass(*model, kPass);
    std::vector<std::string> ops = OpTypes(*model->graph);
    CHECK(ops.back() == "ai.fusionopt::FusedMatMulAddGelu");
    CHECK(std::count(ops.begin(), ops.end(), "Constant") == static_cast<long>(ops.size()) - 1);
    ExpectSameNumbers(*ParseInferred(text), *model, Inlined());
  }
}

TEST_CASE("fuse-contraction-epilogues: each activation oneDNN applies as a post-op", "[passes]") {
  struct Case {
    std::string tail;
    std::string function;
    int opset = 17;
  };
  const std::vector<Case> cases = {
      {"  %y = Relu(%h) @act\n", "FusedMatMulAddRelu"},
      {"  %y = LeakyRelu(%h) {alpha: 0.1} @act\n", "FusedMatMulAddLeakyRelu"},
      {"  %y = Sigmoid(%h) @act\n", "FusedMatMulAddSigmoid"},
      {"  %y = HardSigmoid(%h) {alpha: 0.25, beta: 0.4} @act\n", "FusedMatMulAddHardSigmoid"},
      {"  %y = HardSwish(%h) @act\n", "FusedMatMulAddHardSwish"},
      {"  %y = Tanh(%h) @act\n", "FusedMatMulAddTanh"},
      {"  %y = Gelu(%h) {approximate: \"tanh\"} @act\n", "FusedMatMulAddGelu", 20},
      {"  %lo = Constant() {value: tensor float[] [0.0]} @c_lo\n"
       "  %hi = Constant() {value: tensor float[] [0.5]} @c_hi\n"
       "  %y = Clip(%h, %lo, %hi) @act\n",
       "FusedMatMulAddClip"},
      {"  %y = Clip(%h) {min: 0.0, max: 0.5} @act\n", "FusedMatMulAddClip", 10},
      {"  %s = Sigmoid(%h) @sigmoid\n  %y = Mul(%s, %h) @mul\n", "FusedMatMulAddSilu"},
      // QuickGELU as CLIP's exports write it, and with the scale divided.
      {"  %k = Constant() {value: tensor float[] [1.702]} @c_k\n"
       "  %g = Mul(%k, %h) @scale\n  %s = Sigmoid(%g) @sigmoid\n  %y = Mul(%h, %s) @mul\n",
       "FusedMatMulAddQuickGelu"},
      {"  %k = Constant() {value: tensor float[] [0.5]} @c_k\n"
       "  %g = Div(%h, %k) @scale\n  %s = Sigmoid(%g) @sigmoid\n  %y = Mul(%s, %h) @mul\n",
       "FusedMatMulAddQuickGelu"},
  };
  for (const Case& c : cases) {
    std::string text = MatMulModel(c.tail, c.opset);
    INFO(text);
    auto model = ParseInferred(text);
    RunPass(*model, kPass);
    std::vector<std::string> ops = OpTypes(*model->graph);
    CHECK(ops.back() == "ai.fusionopt::" + c.function);
    CHECK(std::count(ops.begin(), ops.end(), "Constant") == static_cast<long>(ops.size()) - 1);
    ExpectSameNumbers(*ParseInferred(text), *model, Inlined());
  }
}

TEST_CASE("fuse-contraction-epilogues: a swish whose scale is no scalar stays outside the chain", "[passes]") {
  // x·sigmoid(k·x) with k per channel is no oneDNN swish (its alpha is one number): the chain
  // ends at the bias, whose value the two Muls read.
  ExpectOps(MatMulModel("  %k = Constant() {value: tensor float[3] [1.702, 1.0, 2.0]} @c_k\n"
                        "  %g = Mul(%h, %k) @scale\n  %s = Sigmoid(%g) @sigmoid\n  %y = Mul(%h, %s) @mul\n"),
            {"ai.fusionopt::FusedMatMulAdd", "Constant", "Mul", "Sigmoid", "Mul"});
  // The outer Mul reads the scaled value: a SiLU of k·x, and k·x is a per-channel Mul post-op.
  ExpectOps(MatMulModel("  %k = Constant() {value: tensor float[] [1.702]} @c_k\n"
                        "  %g = Mul(%h, %k) @scale\n  %s = Sigmoid(%g) @sigmoid\n  %y = Mul(%g, %s) @mul\n"),
            {"Constant", "ai.fusionopt::FusedMatMulAddMulSilu"});
}

TEST_CASE("fuse-contraction-epilogues: post-ops in any order, Gemm, per-channel Mul", "[passes]") {
  // Activation before the residual, as some blocks write it.
  ExpectOps(R"(
ir_version 8
opset "" 17
graph main (float[N,2,3,3] %x, float[N,3,3,3] %r) -> (float[N,3,3,3] %y)
  init float[3,2,1,1] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0]
  init float[1,3,1,1] %scale = [2.0, 0.5, -1.0]
{
  %c = Conv(%x, %w) {kernel_shape: [1, 1]} @conv
  %a = Relu(%c) @relu
  %m = Mul(%a, %scale) @scale
  %y = Add(%m, %r) @residual
}
)",
            {"ai.fusionopt::FusedConvReluMulAdd"});
  // Old exporters' residual Sum (the light ResNet-50 from Caffe2, opset 9).
  ExpectOps(R"(
ir_version 4
opset "" 9
graph main (float[1,2,3,3] %x, float[1,3,3,3] %r) -> (float[1,3,3,3] %y)
  init float[3,2,1,1] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0]
{
  %c = Conv(%x, %w) {kernel_shape: [1, 1]} @conv
  %s = Sum(%c, %r) @residual
  %y = Relu(%s) @relu
}
)",
            {"ai.fusionopt::FusedConvSumRelu"});
  ExpectOps(R"(
ir_version 8
opset "" 17
graph main (float[2,4] %a) -> (float[2,3] %y)
  init float[3,4] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
  init float[3] %c = [0.25, -0.5, 0.125]
  init float[] %six = [6.0]
  init float[] %zero = [0.0]
{
  %g = Gemm(%a, %w, %c) {transB: 1} @gemm
  %y = Clip(%g, %zero, %six) @relu6
}
)",
            {"ai.fusionopt::FusedGemmClip"});
}

TEST_CASE("fuse-contraction-epilogues: a value with several readers ends the chain before them", "[passes]") {
  // The contraction's own output.
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2,4] %a) -> (float[2,3] %y, float[2,3] %z)
  init float[4,3] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
{
  %m = MatMul(%a, %w) @matmul
  %y = Relu(%m) @relu
  %z = Sigmoid(%m) @sigmoid
}
)",
                  kPass, "value has several readers");
  // An intermediate: the bias Add joins, the Relu after it does not.
  PassRun run = ExpectOps(MatMulModel(R"(
  %y = Relu(%h) @relu
  %z = Neg(%h) @neg
)", 17), {"ai.fusionopt::FusedMatMulAdd", "Relu", "Neg"});
  CHECK(RejectionCount(run.statistics, "value has several readers") == 1);
  // A graph output inside the pattern.
  const std::string exposed = R"(
ir_version 8
opset "" 17
graph main (float[2,4] %a) -> (float[2,3] %y, float[2,3] %h)
  init float[4,3] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
  init float[3] %bias = [0.25, -0.5, 0.125]
{
  %m = MatMul(%a, %w) @matmul
  %h = Add(%m, %bias) @bias
  %y = Relu(%h) @relu
}
)";
  run = ExpectOps(exposed, {"ai.fusionopt::FusedMatMulAdd", "Relu"});
  CHECK(RejectionCount(run.statistics, "value is a graph output") == 1);
  // A SiLU whose Sigmoid is also read elsewhere is no SiLU to take.
  run = ExpectOps(R"(
ir_version 8
opset "" 17
graph main (float[2,4] %a) -> (float[2,3] %y, float[2,3] %s)
  init float[4,3] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
{
  %m = MatMul(%a, %w) @matmul
  %s = Sigmoid(%m) @sigmoid
  %y = Mul(%m, %s) @mul
}
)",
                  {"MatMul", "Sigmoid", "Mul"});
  CHECK(RejectionCount(run.statistics, "value has several readers") == 1);
}

TEST_CASE("fuse-contraction-epilogues: operands a post-op cannot take", "[passes]") {
  // A bias that is a graph input is no constant; nor is an initializer that is also a graph
  // input, which a caller may override.
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2,4] %a, float[3] %bias) -> (float[2,3] %y)
  init float[4,3] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
{
  %m = MatMul(%a, %w) @matmul
  %y = Add(%m, %bias) @bias
}
)",
                  kPass, "bias is not a constant");
  ExpectUnchanged(MatMulModel("  %y = Relu(%h) @relu\n", 17, ", float[3] %bias"), kPass, "bias is not a constant");
  // Conv [N,4,4,4] with a [1,4,1] constant: it broadcasts over H, not over the channels.
  const std::string conv = R"(
ir_version 8
opset "" 17
graph main (float[N,2,4,4] %x) -> (float[N,4,4,4] %y)
  init float[4,2,1,1] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, -1.0]
  init float[BIAS_SHAPE] %b = [0.1, -0.2, 0.3, 0.4]
{
  %c = Conv(%x, %w) {kernel_shape: [1, 1]} @conv
  %y = Add(%c, %b) @bias
}
)";
  for (const char* shape : {"1,4,1", "4"}) {
    std::string text = conv;
    text.replace(text.find("BIAS_SHAPE"), 10, shape);
    INFO(text);
    ExpectUnchanged(text, kPass, "constant operand is neither scalar, per-channel nor full-shape");
  }
  // A non-constant operand of another shape (an SE block's [N,C,1,1] gate).
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[N,2,4,4] %x, float[N,4,1,1] %gate) -> (float[N,4,4,4] %y)
  init float[4,2,1,1] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, -1.0]
{
  %c = Conv(%x, %w) {kernel_shape: [1, 1]} @conv
  %y = Mul(%c, %gate) @gate
}
)",
                  kPass, "operand is neither a constant nor of the output's shape");
  // A one-element constant of higher rank than the output broadcasts it to another shape.
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2,4] %a) -> (float[1,2,3] %y)
  init float[4,3] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
  init float[1,1,1] %bias = [0.25]
{
  %m = MatMul(%a, %w) @matmul
  %y = Add(%m, %bias) @bias
}
)",
                  kPass, "post-op changes the output's shape");
  // Clip bounds that are graph inputs.
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2,4] %a, float[] %lo) -> (float[2,3] %y)
  init float[4,3] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
{
  %m = MatMul(%a, %w) @matmul
  %y = Clip(%m, %lo) @clip
}
)",
                  kPass, "Clip bounds are not constant scalars");
}

TEST_CASE("fuse-contraction-epilogues: symbolic dims must provably match", "[passes]") {
  const std::string residual = R"(
ir_version 8
opset "" 17
graph main (float[N,4] %a, float[RESIDUAL,3] %r) -> (float[OUT,3] %y)
  init float[4,3] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
{
  %m = MatMul(%a, %w) @matmul
  %y = Add(%m, %r) @residual
}
)";
  std::string other = residual;
  other.replace(other.find("RESIDUAL"), 8, "M");
  other.replace(other.find("OUT"), 3, "?");
  ExpectUnchanged(other, kPass, "operand is neither a constant nor of the output's shape");
  std::string same = residual;
  same.replace(same.find("RESIDUAL"), 8, "N");
  same.replace(same.find("OUT"), 3, "N");
  ExpectOps(same, {"ai.fusionopt::FusedMatMulAdd"}, {}, {{"N", 4}});
}

TEST_CASE("fuse-contraction-epilogues: opsets, dtypes and the post-op cap", "[passes]") {
  ExpectUnchanged(R"(
ir_version 3
opset "" 6
graph main (float[2,4] %a) -> (float[2,3] %y)
  init float[4,3] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
{
  %m = MatMul(%a, %w) @matmul
  %y = Relu(%m) @relu
}
)",
                  kPass, "opset before 7");
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (double[2,4] %a) -> (double[2,3] %y)
  init double[4,3] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
{
  %m = MatMul(%a, %w) @matmul
  %y = Relu(%m) @relu
}
)",
                  kPass, "dtype not float, float16 or bfloat16");
  PassRun run = ExpectOps(MatMulModel("  %y = Relu(%h) @relu\n"), {"ai.fusionopt::FusedMatMulAdd", "Relu"},
                          {{"max-post-ops", "1"}});
  CHECK(RejectionCount(run.statistics, "epilogue would exceed max-post-ops") == 1);
  // Constants that are not GELU's (√2 to three digits) are no GELU: only the bias joins.
  run = ExpectOps(MatMulModel(R"(
  %sqrt2 = Constant() {value: tensor float[] [1.414]} @c_sqrt2
  %one = Constant() {value: tensor float[] [1.0]} @c_one
  %half = Constant() {value: tensor float[] [0.5]} @c_half
  %d = Div(%h, %sqrt2) @div
  %e = Erf(%d) @erf
  %p = Add(%e, %one) @add_one
  %q = Mul(%h, %p) @mul
  %y = Mul(%q, %half) @mul_half
)"),
                  {"ai.fusionopt::FusedMatMulAdd", "Constant", "Constant", "Constant", "Div", "Erf", "Add", "Mul",
                   "Mul"});
  CHECK(RejectionCount(run.statistics, "value has several readers") == 1);
}

TEST_CASE("fuse-contraction-epilogues: two contractions meeting at one Add, Sum arity, subgraphs", "[passes]") {
  // ResNet's projection shortcut: the first contraction in graph order takes the Add and Relu,
  // the shortcut's Conv ends before them and is read by the fused node.
  PassRun run = ExpectOps(R"(
ir_version 8
opset "" 17
graph main (float[N,2,3,3] %x) -> (float[N,3,3,3] %y)
  init float[3,2,1,1] %w1 = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0]
  init float[3,2,1,1] %w2 = [-1.0, 0.25, 0.5, 0.75, 1.5, -0.125]
{
  %main = Conv(%x, %w1) {kernel_shape: [1, 1]} @conv_main
  %short = Conv(%x, %w2) {kernel_shape: [1, 1]} @conv_shortcut
  %s = Add(%main, %short) @residual
  %y = Relu(%s) @relu
}
)",
                          {"Conv", "ai.fusionopt::FusedConvAddRelu"});
  CHECK(RejectionCount(run.statistics, "post-op already in another contraction's chain") == 1);
  ExpectUnchanged(R"(
ir_version 4
opset "" 9
graph main (float[1,2,3,3] %x, float[1,3,3,3] %r, float[1,3,3,3] %q) -> (float[1,3,3,3] %y)
  init float[3,2,1,1] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0]
{
  %c = Conv(%x, %w) {kernel_shape: [1, 1]} @conv
  %y = Sum(%c, %r, %q) @sum3
}
)",
                  kPass, "Sum of other than two inputs");
  auto original = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (bool[] %cond, float[2,4] %a) -> (float[2,3] %y)
  init float[4,3] %w = [0.5, -0.25, 0.75, 0.125, -0.5, 1.0, 0.25, 0.375, -0.75, 1.25, -0.125, 0.625]
{
  %y = If(%cond) {then_branch: graph then_body () -> (float[2,3] %t) {
    %m = MatMul(%a, %w) @then_matmul
    %t = Relu(%m) @then_relu
  }, else_branch: graph else_body () -> (float[2,3] %e) {
    %e = MatMul(%a, %w) @else_matmul
  }} @if
}
)");
  auto model = ParseInferred(Print(*original));
  RunPass(*model, kPass);
  std::vector<Graph*> branches = model->graph->nodes().front()->Subgraphs();
  REQUIRE(branches.size() == 2);
  CHECK(OpTypes(*branches[0]) == std::vector<std::string>{"ai.fusionopt::FusedMatMulRelu"});
  CHECK(OpTypes(*branches[1]) == std::vector<std::string>{"MatMul"});
  ExpectSameNumbers(*original, *model, Inlined());
}
