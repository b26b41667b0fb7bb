// Fused contractions with epilogues and fused row kernels (LayerNorm, RMSNorm, Softmax): each
// one kernel, agreeing with the unfused graph and with the body run op by op.
#include <cstdlib>

#include "cpu_fused_test_helpers.h"
#include "cpu_runtime/contraction/epilogue.h"
#include "cpu_runtime/engine/host_cpu.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::fused_test;

namespace {

const std::string kHeader = "ir_version 8\nopset \"\" 20\n";
// Opset 17: ReduceMean's axes as an attribute, as the decomposed norms spell it.
const std::string kNormHeader = "ir_version 8\nopset \"\" 17\n";

}  // namespace

// ---------------------------------------------------------------- contractions

TEST_CASE("MatMul + bias + Relu runs as one kernel with post-ops", "[cpu][fused]") {
  const std::string text = kHeader + "graph main (float[2,5,8] %x) -> (float[2,5,6] %y)\n" +
                           Init("float[8,6]", "w", 48, 11) + Init("float[6]", "bias", 6, 12) + R"({
  %p = MatMul(%x, %w) @matmul
  %q = Add(%bias, %p) @bias
  %y = Relu(%q) @relu
}
)";
  Comparison runs = Compare(text, {"matmul", "bias", "relu"}, {{"x", Random(DataType::kFloat, {2, 5, 8}, 13)}});
  REQUIRE(runs.unfused.stats.kernels_launched == 3);
  REQUIRE(runs.fused.stats.kernels_launched == 1);
}

TEST_CASE("an activation repeated with other parameters runs right: oneDNN's post-ops would not", "[cpu][fused]") {
  // Two Clips of different bounds and two scalings around a Relu on a pointwise Conv over a 4x4
  // image (oneDNN's brgemm 1x1 convolution, whose injectors keep one parameter set per algorithm).
  // The second Clip's bounds [8, 10] cut inside the range (3·[2.5, 3.5]) so each step shows.
  const std::string text = kHeader + "graph main (float[1,16,4,4] %x) -> (float[1,32,4,4] %y)\n" +
                           Init("float[32,16,1,1]", "w", 512, 31) + R"(
  init float[] %lo = [-1.0]
  init float[] %hi = [1.0]
  init float[] %lo2 = [8.0]
  init float[] %hi2 = [10.0]
  init float[] %half = [0.5]
  init float[] %three = [3.0]
{
  %c = Conv(%x, %w) {kernel_shape: [1, 1]} @conv
  %a = Clip(%c, %lo, %hi) @clip
  %b = Mul(%a, %half) @mul
  %d = Add(%b, %three) @add
  %e = Relu(%d) @relu
  %f = Mul(%e, %three) @mul2
  %y = Clip(%f, %lo2, %hi2) @clip2
}
)";
  Comparison runs = Compare(text, {"conv", "clip", "mul", "add", "relu", "mul2", "clip2"},
                            {{"x", Random(DataType::kFloat, {1, 16, 4, 4}, 32)}});
  CHECK(runs.fused.stats.kernels_launched == 1);
}

TEST_CASE("LowerRepeatedEltwise keeps first steps and equal repeats, rewrites other repeats exactly", "[cpu]") {
  using dnnl::algorithm;
  std::vector<PostOp> steps = {{PostOp::Kind::kEltwise, algorithm::eltwise_linear, 2.0f, 1.0f},
                               {PostOp::Kind::kEltwise, algorithm::eltwise_clip, 0.0f, 6.0f},
                               {PostOp::Kind::kEltwise, algorithm::eltwise_linear, 2.0f, 1.0f},
                               {PostOp::Kind::kEltwise, algorithm::eltwise_linear, 0.5f, 0.0f},
                               {PostOp::Kind::kEltwise, algorithm::eltwise_clip, -1.0f, 1.0f}};
  REQUIRE(LowerRepeatedEltwise(steps));
  REQUIRE(steps.size() == 6);
  CHECK(steps[2].kind == PostOp::Kind::kEltwise);  // the same parameters as the first: kept
  CHECK((steps[3].kind == PostOp::Kind::kScalar && steps[3].algorithm == algorithm::binary_mul && steps[3].alpha == 0.5f));
  CHECK((steps[4].algorithm == algorithm::binary_max && steps[4].alpha == -1.0f));
  CHECK((steps[5].algorithm == algorithm::binary_min && steps[5].alpha == 1.0f));
  std::vector<PostOp> slopes = {{PostOp::Kind::kEltwise, algorithm::eltwise_elu, 1.0f},
                                {PostOp::Kind::kEltwise, algorithm::eltwise_elu, 0.5f}};
  CHECK_FALSE(LowerRepeatedEltwise(slopes));
  CHECK(slopes.size() == 2);
}

TEST_CASE("MatMul + bias + GELU in its erf form and as the Gelu op run with one post-op each", "[cpu][fused]") {
  const std::string weights = Init("float[8,6]", "w", 48, 21) + Init("float[6]", "bias", 6, 22);
  const std::string decomposed = kHeader + "graph main (float[4,8] %x) -> (float[4,6] %y)\n" + weights + R"(
  init float[] %sqrt2 = [1.4142135381698608]
  init float[] %one = [1.0]
  init float[] %half = [0.5]
{
  %p = MatMul(%x, %w) @matmul
  %h = Add(%p, %bias) @bias
  %d = Div(%h, %sqrt2) @div
  %e = Erf(%d) @erf
  %f = Add(%e, %one) @add1
  %g = Mul(%h, %f) @mul
  %y = Mul(%g, %half) @half
}
)";
  std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {4, 8}, 23)}};
  Comparison runs = Compare(decomposed, {"matmul", "bias", "div", "erf", "add1", "mul", "half"}, feeds);
  REQUIRE(runs.fused.stats.kernels_launched == 1);

  const std::string op = kHeader + "graph main (float[4,8] %x) -> (float[4,6] %y)\n" + weights + R"({
  %p = MatMul(%x, %w) @matmul
  %h = Add(%p, %bias) @bias
  %y = Gelu(%h) {approximate: "tanh"} @gelu
}
)";
  REQUIRE(Compare(op, {"matmul", "bias", "gelu"}, feeds).fused.stats.kernels_launched == 1);
}

TEST_CASE("every activation with a post-op runs fused after a MatMul and a Conv", "[cpu][fused]") {
  const std::vector<std::string> activations = {
      "Relu(%q)", "LeakyRelu(%q) {alpha: 0.2}", "Elu(%q) {alpha: 0.7}", "Sigmoid(%q)", "Tanh(%q)", "HardSwish(%q)",
      "HardSigmoid(%q) {alpha: 0.3, beta: 0.4}", "Clip(%q, %lo, %hi)", "Clip(%q, , %hi)", "Gelu(%q)",
      "Gelu(%q) {approximate: \"tanh\"}"};
  const std::string bounds = "  init float[] %lo = [-0.5]\n  init float[] %hi = [0.75]\n";
  for (const std::string& activation : activations) {
    INFO(activation);
    const std::string matmul = kHeader + "graph main (float[3,8] %x) -> (float[3,6] %y)\n" +
                               Init("float[8,6]", "w", 48, 14) + Init("float[6]", "b", 6, 15) + bounds +
                               "{\n  %p = MatMul(%x, %w) @matmul\n  %q = Add(%p, %b) @bias\n  %y = " + activation +
                               " @act\n}\n";
    Comparison runs = Compare(matmul, {"matmul", "bias", "act"}, {{"x", Random(DataType::kFloat, {3, 8}, 16)}});
    REQUIRE(runs.fused.stats.kernels_launched == 1);

    const std::string conv = kHeader + "graph main (float[1,2,5,5] %x) -> (float[1,3,5,5] %y)\n" +
                             Init("float[3,2,3,3]", "w", 54, 17) + Init("float[3]", "b", 3, 18) + bounds +
                             "{\n  %q = Conv(%x, %w, %b) {pads: [1, 1, 1, 1]} @conv\n  %y = " + activation +
                             " @act\n}\n";
    runs = Compare(conv, {"conv", "act"}, {{"x", Random(DataType::kFloat, {1, 2, 5, 5}, 19)}});
    REQUIRE(runs.fused.stats.kernels_launched == 1);
  }
}

TEST_CASE("SiLU after a Conv, a MatMul and a Gemm runs as one kernel wherever the swish step runs", "[cpu][fused]") {
  // ctest runs this file again under FUSIONOPT_CPU_SWISH=engine and =post-op, so both places
  // for the step are checked against the unfused graph on every host.
  const std::string conv = kHeader + "graph main (float[2,3,9,9] %x) -> (float[2,4,9,9] %y)\n" +
                           Init("float[4,3,3,3]", "w", 108, 61) + Init("float[4]", "b", 4, 62) + R"({
  %c = Conv(%x, %w, %b) {kernel_shape: [3, 3], pads: [1, 1, 1, 1]} @conv
  %s = Sigmoid(%c) @sigmoid
  %y = Mul(%c, %s) @swish
}
)";
  Comparison runs = Compare(conv, {"conv", "sigmoid", "swish"}, {{"x", Random(DataType::kFloat, {2, 3, 9, 9}, 63, -3.0f, 3.0f)}});
  REQUIRE(runs.unfused.stats.kernels_launched == 3);
  REQUIRE(runs.fused.stats.kernels_launched == 1);

  const std::string matmul = kHeader + "graph main (float[3,5,8] %x) -> (float[3,5,6] %y)\n" +
                             Init("float[8,6]", "w", 48, 64) + Init("float[6]", "b", 6, 65) + R"({
  %p = MatMul(%x, %w) @matmul
  %q = Add(%p, %b) @bias
  %s = Sigmoid(%q) @sigmoid
  %y = Mul(%s, %q) @swish
}
)";
  REQUIRE(Compare(matmul, {"matmul", "bias", "sigmoid", "swish"}, {{"x", Random(DataType::kFloat, {3, 5, 8}, 66)}})
              .fused.stats.kernels_launched == 1);

  const std::string gemm = kHeader + "graph main (float[3,8] %x) -> (float[3,5] %y)\n" +
                           Init("float[5,8]", "w", 40, 67) + Init("float[5]", "c", 5, 68) + R"({
  %p = Gemm(%x, %w, %c) {transB: 1} @gemm
  %s = Sigmoid(%p) @sigmoid
  %y = Mul(%p, %s) @swish
}
)";
  REQUIRE(Compare(gemm, {"gemm", "sigmoid", "swish"}, {{"x", Random(DataType::kFloat, {3, 8}, 69)}})
              .fused.stats.kernels_launched == 1);
}

TEST_CASE("the swish step runs in the engine on AVX-512 hosts unless FUSIONOPT_CPU_SWISH says otherwise", "[cpu]") {
  const char* requested = std::getenv("FUSIONOPT_CPU_SWISH");
  const std::string setting = requested == nullptr ? "" : requested;
  if (setting == "engine") {
    CHECK(SwishInEngine());
  } else if (setting == "post-op") {
    CHECK_FALSE(SwishInEngine());
  } else {
    CHECK(SwishInEngine() == ThisHost().onednn_avx512);
  }
}

TEST_CASE("Gemm + Relu and MatMul + residual + Tanh run as one kernel", "[cpu][fused]") {
  const std::string gemm = kHeader + "graph main (float[3,8] %x) -> (float[3,5] %y)\n" +
                           Init("float[5,8]", "w", 40, 31) + Init("float[5]", "c", 5, 32) + R"({
  %p = Gemm(%x, %w, %c) {transB: 1, alpha: 0.5} @gemm
  %y = Relu(%p) @relu
}
)";
  REQUIRE(Compare(gemm, {"gemm", "relu"}, {{"x", Random(DataType::kFloat, {3, 8}, 33)}}).fused.stats.kernels_launched ==
          1);

  const std::string residual = kHeader + "graph main (float[2,3,8] %x, float[2,3,4] %r) -> (float[2,3,4] %y)\n" +
                               Init("float[8,4]", "w", 32, 34) + R"({
  %p = MatMul(%x, %w) @matmul
  %q = Add(%p, %r) @residual
  %y = Tanh(%q) @tanh
}
)";
  std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {2, 3, 8}, 35)},
                                    {"r", Random(DataType::kFloat, {2, 3, 4}, 36)}};
  REQUIRE(Compare(residual, {"matmul", "residual", "tanh"}, feeds).fused.stats.kernels_launched == 1);
}

TEST_CASE("Conv + bias + Relu and Conv + residual + Relu run as one kernel", "[cpu][fused]") {
  const std::string conv = kHeader + "graph main (float[2,3,9,9] %x, float[2,4,9,9] %r) -> (float[2,4,9,9] %y, "
                                     "float[2,4,9,9] %z)\n" +
                           Init("float[4,3,3,3]", "w", 108, 41) + Init("float[4,1,1]", "bias", 4, 42) +
                           Init("float[4]", "b", 4, 43) + R"({
  %c = Conv(%x, %w) {kernel_shape: [3, 3], pads: [1, 1, 1, 1]} @conv
  %d = Add(%c, %bias) @bias
  %y = Relu(%d) @relu
  %e = Conv(%x, %w, %b) {kernel_shape: [3, 3], pads: [1, 1, 1, 1]} @conv2
  %f = Add(%r, %e) @residual
  %z = Clip(%f, %zero, %six) @relu6
}
)";
  const std::string text =
      std::string(conv).insert(conv.find("{\n"), "  init float[] %zero = [0.0]\n  init float[] %six = [6.0]\n");
  std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {2, 3, 9, 9}, 44)},
                                    {"r", Random(DataType::kFloat, {2, 4, 9, 9}, 45)}};
  Comparison first = Compare(text, {"conv", "bias", "relu"}, feeds);
  REQUIRE(first.unfused.stats.kernels_launched == 6);
  REQUIRE(first.fused.stats.kernels_launched == 4);
  Comparison second = Compare(text, {"conv2", "residual", "relu6"}, feeds);
  REQUIRE(second.fused.stats.kernels_launched == 4);

  // A two-input Sum is the residual Add of light ResNet-50; a three-input one is no post-op.
  std::string with_sum = text;
  with_sum.replace(with_sum.find("Add(%r, %e)"), 11, "Sum(%r, %e)");
  Comparison summed = Compare(with_sum, {"conv2", "residual", "relu6"}, feeds);
  REQUIRE(summed.fused.stats.kernels_launched == 4);
  std::string three = text;
  three.replace(three.find("Add(%r, %e)"), 11, "Sum(%r, %e, %r)");
  REQUIRE(Compare(three, {"conv2", "residual", "relu6"}, feeds).fused.stats.kernels_launched == 5);
}

TEST_CASE("an epilogue post-ops cannot express runs as the contraction and one program", "[cpu][fused]") {
  // A per-column scale by a tensor is no post-op here: two kernels, still one pass each.
  const std::string text = kHeader + "graph main (float[4,8] %x, float[6] %s) -> (float[4,6] %y)\n" +
                           Init("float[8,6]", "w", 48, 51) + R"({
  %p = MatMul(%x, %w) @matmul
  %q = Mul(%p, %s) @scale
  %y = Sigmoid(%q) @sigmoid
}
)";
  std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {4, 8}, 52)},
                                    {"s", Random(DataType::kFloat, {6}, 53)}};
  Comparison runs = Compare(text, {"matmul", "scale", "sigmoid"}, feeds);
  REQUIRE(runs.unfused.stats.kernels_launched == 3);
  REQUIRE(runs.fused.stats.kernels_launched == 2);

  // An epilogue whose intermediate is read outside: two outputs, no post-op chain.
  const std::string two = kHeader + "graph main (float[4,8] %x) -> (float[4,6] %q, float[4,6] %y)\n" +
                          Init("float[8,6]", "w", 48, 54) + Init("float[6]", "b", 6, 55) + R"({
  %p = MatMul(%x, %w) @matmul
  %q = Add(%p, %b) @bias
  %y = Relu(%q) @relu
}
)";
  REQUIRE(Compare(two, {"matmul", "bias", "relu"}, {feeds[0]}).fused.stats.kernels_launched == 2);
}

TEST_CASE("a float16 contraction epilogue runs fused within float16 precision", "[cpu][fused]") {
  const std::string text = kHeader + "graph main (float16[4,8] %x) -> (float16[4,6] %y)\n" +
                           Init("float16[8,6]", "w", 48, 61) + Init("float16[6]", "b", 6, 62) + R"({
  %p = MatMul(%x, %w) @matmul
  %q = Add(%p, %b) @bias
  %y = Relu(%q) @relu
}
)";
  Comparison runs =
      Compare(text, {"matmul", "bias", "relu"}, {{"x", Random(DataType::kFloat16, {4, 8}, 63)}}, 2e-3, 2e-3);
  REQUIRE(runs.fused.stats.kernels_launched == 1);
}

// ---------------------------------------------------------------- row kernels

namespace {

// Residual add, then LayerNorm in the exporters' decomposed form; the sum is also an output.
std::string LayerNormText(const std::string& type) {
  return kNormHeader + "graph main (" + type + "[2,5,16] %a, " + type + "[2,5,16] %r) -> (" + type + "[2,5,16] %y, " +
         type + "[2,5,16] %x)\n" + Init(type + "[16]", "gamma", 16, 71) + Init(type + "[16]", "beta", 16, 72) +
         "  init " + type + "[] %eps = [1e-05]\n  init " + type + R"([] %two = [2.0]
{
  %x = Add(%a, %r) @residual
  %m = ReduceMean(%x) {axes: [-1]} @mean
  %d = Sub(%x, %m) @sub
  %p = Pow(%d, %two) @pow
  %v = ReduceMean(%p) {axes: [-1]} @var
  %ve = Add(%v, %eps) @addeps
  %s = Sqrt(%ve) @sqrt
  %n = Div(%d, %s) @div
  %g = Mul(%n, %gamma) @scale
  %y = Add(%g, %beta) @shift
}
)";
}

const std::vector<std::string> kLayerNorm = {"residual", "mean", "sub", "pow", "var", "addeps",
                                             "sqrt", "div", "scale", "shift"};

}  // namespace

TEST_CASE("residual add + decomposed LayerNorm runs as one row kernel writing both results", "[cpu][fused]") {
  // Rows far from zero mean: the statistics must not cancel.
  std::vector<NamedTensor> feeds = {{"a", Random(DataType::kFloat, {2, 5, 16}, 73, 90.0f, 110.0f)},
                                    {"r", Random(DataType::kFloat, {2, 5, 16}, 74)}};
  Comparison runs = Compare(LayerNormText("float"), kLayerNorm, feeds);
  REQUIRE(runs.unfused.stats.kernels_launched == 10);
  REQUIRE(runs.fused.stats.kernels_launched == 1);
  REQUIRE(runs.fused.outputs[1].name == "x");
}

TEST_CASE("a float16 LayerNorm runs as one row kernel within float16 precision", "[cpu][fused]") {
  std::vector<NamedTensor> feeds = {{"a", Random(DataType::kFloat16, {2, 5, 16}, 75)},
                                    {"r", Random(DataType::kFloat16, {2, 5, 16}, 76)}};
  Comparison runs = Compare(LayerNormText("float16"), kLayerNorm, feeds, 1e-2, 1e-2);
  REQUIRE(runs.fused.stats.kernels_launched == 1);
}

TEST_CASE("LayerNormalization and decomposed RMSNorm run as one row kernel", "[cpu][fused]") {
  const std::string op = kHeader + "graph main (float[3,4,32] %x) -> (float[3,4,32] %y)\n" +
                         Init("float[32]", "gamma", 32, 81) + Init("float[32]", "beta", 32, 82) + R"({
  %y = LayerNormalization(%x, %gamma, %beta) {axis: -1, epsilon: 1e-05} @ln
}
)";
  std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {3, 4, 32}, 83)}};
  REQUIRE(Compare(op, {"ln"}, feeds).fused.stats.kernels_launched == 1);

  const std::string rms = kNormHeader + "graph main (float[3,4,32] %x) -> (float[3,4,32] %y)\n" +
                          Init("float[32]", "gamma", 32, 84) + R"(  init float[] %eps = [1e-06]
  init float[] %two = [2.0]
{
  %p = Pow(%x, %two) @pow
  %v = ReduceMean(%p) {axes: [-1]} @mean
  %ve = Add(%v, %eps) @addeps
  %s = Sqrt(%ve) @sqrt
  %n = Div(%x, %s) @div
  %y = Mul(%n, %gamma) @scale
}
)";
  Comparison runs = Compare(rms, {"pow", "mean", "addeps", "sqrt", "div", "scale"}, feeds);
  REQUIRE(runs.unfused.stats.kernels_launched == 6);
  REQUIRE(runs.fused.stats.kernels_launched == 1);
}

TEST_CASE("a LayerNorm over another axis than the last runs op by op", "[cpu][fused]") {
  const std::string text = kHeader + "graph main (float[3,32,4] %x) -> (float[3,32,4] %y)\n" +
                           Init("float[32,1]", "gamma", 32, 85) + Init("float[32,1]", "beta", 32, 86) + R"({
  %y = LayerNormalization(%x, %gamma, %beta) {axis: 1, epsilon: 1e-05} @ln
}
)";
  Comparison runs = Compare(text, {"ln"}, {{"x", Random(DataType::kFloat, {3, 32, 4}, 87)}});
  REQUIRE(runs.fused.stats.kernels_launched == 1);  // the body's one op, not a row kernel
  REQUIRE(runs.fused.stats.nodes_executed == 2);     // the call and its body's node
}

TEST_CASE("Softmax with scale and an additive or Where mask runs as one row kernel", "[cpu][fused]") {
  const std::string additive = kHeader + R"(graph main (float[2,3,4,7] %x, float[2,1,1,7] %mask) -> (float[2,3,4,7] %y)
  init float[] %scale = [0.125]
{
  %s = Mul(%x, %scale) @scale
  %z = Add(%s, %mask) @mask
  %y = Softmax(%z) {axis: -1} @softmax
}
)";
  std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {2, 3, 4, 7}, 91, -8.0f, 8.0f)},
                                    {"mask", Random(DataType::kFloat, {2, 1, 1, 7}, 92, -10.0f, 0.0f)}};
  Comparison runs = Compare(additive, {"scale", "mask", "softmax"}, feeds);
  REQUIRE(runs.fused.stats.kernels_launched == 1);

  const std::string where = kHeader + R"(graph main (float[2,3,4,7] %x, bool[2,1,4,7] %keep) -> (float[2,3,4,7] %y)
  init float[] %scale = [8.0]
  init float[] %fill = [-10000.0]
{
  %s = Div(%x, %scale) @scale
  %z = Where(%keep, %s, %fill) @mask
  %y = Softmax(%z) {axis: -1} @softmax
}
)";
  feeds[1] = {"keep", Random(DataType::kBool, {2, 1, 4, 7}, 93, 0.0f, 1.0f)};
  REQUIRE(Compare(where, {"scale", "mask", "softmax"}, feeds).fused.stats.kernels_launched == 1);
}

TEST_CASE("fused kernels run rows in parallel on large inputs without changing results", "[cpu][fused]") {
  const std::string text = kHeader + "graph main (float[128,768] %x) -> (float[128,768] %y)\n" +
                           Init("float[768]", "gamma", 768, 94) + Init("float[768]", "beta", 768, 95) + R"({
  %y = LayerNormalization(%x, %gamma, %beta) {axis: -1, epsilon: 1e-05} @ln
}
)";
  Comparison runs = Compare(text, {"ln"}, {{"x", Random(DataType::kFloat, {128, 768}, 96)}});
  REQUIRE(runs.fused.stats.kernels_launched == 1);
}
