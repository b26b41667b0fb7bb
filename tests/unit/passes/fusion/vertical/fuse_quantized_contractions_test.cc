// fuse-quantized-contractions: QDQ units around Conv, MatMul and Gemm become one node that the
// CPU runtime runs as one integer kernel, within a quantization step of the ops run one by one;
// and every reason a unit is refused.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "cpu_fused_test_helpers.h"
#include "scoped_env.h"
#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "fuse-quantized-contractions";

// uint8 activations [1,2,3,3] (zero point 128), a 3x2 1x1 convolution with per-channel int8
// weights and an int32 bias, then `tail` from %c (writing %y, quantized).
std::string ConvModel(const std::string& tail, const std::string& weight_axis = "0",
                      const std::string& extra_inits = "") {
  return R"(
ir_version 10
opset "" 21
graph main (uint8[1,2,3,3] %xq) -> (uint8[1,3,3,3] %y)
  init float[] %xs = [0.05]
  init uint8[] %xz = [128]
  init int8[3,2,1,1] %wq = [12, -100, 127, 45, -128, 3]
  init float[3] %ws = [0.01, 0.02, 0.005]
  init int8[3] %wz = [0, 0, 0]
  init int32[3] %bq = [1000, -2000, 30]
  init float[3] %bs = [0.0005, 0.001, 0.00025]
  init int32[3] %bz = [0, 0, 0]
  init float[] %ys = [0.1]
  init uint8[] %yz = [20]
)" + extra_inits + R"({
  %x = DequantizeLinear(%xq, %xs, %xz) @dq_x
  %w = DequantizeLinear(%wq, %ws, %wz) {axis: )" + weight_axis + R"(} @dq_w
  %b = DequantizeLinear(%bq, %bs, %bz) {axis: 0} @dq_b
  %c = Conv(%x, %w, %b) {kernel_shape: [1, 1]} @conv
)" + tail + R"(
})";
}

// ResNet's shortcut in QDQ form: DQ → Conv → [Q → DQ → Add(DQ(%rq)) →] Relu → Q; with
// `float_ends`, float in and out as ResNet's first and last convolutions are quantized:
// Q → DQ → ... → Q → DQ.
std::string QdqConvModel(bool residual, bool float_ends) {
  const std::string input = float_ends ? "float[1,2,3,3] %f" : "uint8[1,2,3,3] %xq";
  const std::string output = float_ends ? "float[1,3,3,3] %out" : "uint8[1,3,3,3] %y";
  return R"(
ir_version 10
opset "" 21
graph main ()" + input + (residual ? ", uint8[1,3,3,3] %rq" : "") + ") -> (" + output + R"()
  init float[] %xs = [0.05]
  init uint8[] %xz = [128]
  init int8[3,2,1,1] %wq = [12, -100, 127, 45, -128, 3]
  init float[3] %ws = [0.01, 0.02, 0.005]
  init int8[3] %wz = [0, 0, 0]
  init float[] %ms = [0.07]
  init uint8[] %mz = [100]
  init float[] %rs = [0.03]
  init uint8[] %rz = [90]
  init float[] %ys = [0.1]
  init uint8[] %yz = [0]
{
)" + (float_ends ? "  %xq = QuantizeLinear(%f, %xs, %xz) @q_x\n" : "") + R"(  %x = DequantizeLinear(%xq, %xs, %xz) @dq_x
  %w = DequantizeLinear(%wq, %ws, %wz) {axis: 0} @dq_w
  %c = Conv(%x, %w) {kernel_shape: [1, 1]} @conv
)" + (residual ? R"(  %mq = QuantizeLinear(%c, %ms, %mz) @q_mid
  %m = DequantizeLinear(%mq, %ms, %mz) @dq_mid
  %r = DequantizeLinear(%rq, %rs, %rz) @dq_r
  %s = Add(%m, %r) @residual
  %a = Relu(%s) @relu
)"
                 : "  %a = Relu(%c) @relu\n") +
         "  %y = QuantizeLinear(%a, %ys, %yz) @q\n" + (float_ends ? "  %out = DequantizeLinear(%y, %ys, %yz) @dq_out\n" : "") +
         "}";
}

using fused_test::Bytes;

// The rewritten model's fused node runs as one integer kernel and agrees with its body run op by
// op within one step of the output's quantization.
void ExpectOneKernelWithinAStep(const Model& model, const std::string& input, const std::vector<int64_t>& dims) {
  const std::vector<cpu::NamedTensor> feeds = {{input, Bytes(dims, 7)}};
  fused_test::Outcome fused = fused_test::Run(model, feeds, true);
  fused_test::Outcome op_by_op = fused_test::Run(model, feeds, false);
  CHECK(fused.stats.kernels_launched == 1);
  CHECK(op_by_op.stats.kernels_launched > 1);
  const cpu::RtTensor& a = fused.outputs[0].tensor;
  const cpu::RtTensor& b = op_by_op.outputs[0].tensor;
  REQUIRE(a.dims() == b.dims());
  int differing = 0;
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    const int difference = std::abs(int(a.data<uint8_t>()[i]) - int(b.data<uint8_t>()[i]));
    CHECK(difference <= 1);
    differing += difference != 0;
  }
  CHECK(differing * 10 <= a.NumElements());
}

}  // namespace

TEST_CASE("fuse-quantized-contractions: DQ + Conv + int32 bias + Relu + Q is one integer kernel", "[passes][quantized]") {
  const std::string text = ConvModel(R"(
  %r = Relu(%c) @relu
  %y = QuantizeLinear(%r, %ys, %yz) @q)");
  Rewritten rewritten = ExpectRewriteOps(text, kPass, {"ai.fusionopt::FusedQConvRelu"}, {.numbers = Inlined()});
  REQUIRE(rewritten.run.fusions.size() == 1);
  CHECK(rewritten.run.fusions[0].kind == "quantized_contraction");
  ExpectOneKernelWithinAStep(*rewritten.model, "xq", {1, 2, 3, 3});
  // Scales and zero points are arguments, so units that differ only in them share a function.
  CHECK(rewritten.model->functions.size() == 1);
  CHECK(rewritten.model->graph->nodes().front()->inputs().size() > 3);
}

TEST_CASE("fuse-quantized-contractions: zero points omitted (uint8 by default) still make one kernel",
          "[passes][quantized]") {
  // ONNX's DequantizeLinear and QuantizeLinear default the zero point to a uint8 0; the body's
  // formals carry no types, so the kernel must know the unit's 8-bit types without them.
  std::string text = ConvModel(R"(
  %r = Relu(%c) @relu
  %y = QuantizeLinear(%r, %ys) @q)");
  const std::string input = "%x = DequantizeLinear(%xq, %xs, %xz)";
  text.replace(text.find(input), input.size(), "%x = DequantizeLinear(%xq, %xs)");
  Rewritten rewritten = ExpectRewriteOps(text, kPass, {"ai.fusionopt::FusedQConvRelu"}, {.numbers = Inlined()});
  ExpectOneKernelWithinAStep(*rewritten.model, "xq", {1, 2, 3, 3});
}

TEST_CASE("fuse-quantized-contractions: a round trip Q → DQ and an activation inside the unit", "[passes][quantized]") {
  const std::string text = ConvModel(R"(
  %mq = QuantizeLinear(%c, %ms, %mz) @q_mid
  %m = DequantizeLinear(%mq, %ms, %mz) @dq_mid
  %s = Sigmoid(%m) @sigmoid
  %y = QuantizeLinear(%s, %ys, %yz) @q)",
                                     "0", "  init float[] %ms = [0.07]\n  init uint8[] %mz = [100]\n");
  Rewritten rewritten = ExpectRewriteOps(text, kPass, {"ai.fusionopt::FusedQConvSigmoid"}, {.numbers = Inlined()});
  ExpectOneKernelWithinAStep(*rewritten.model, "xq", {1, 2, 3, 3});
}

TEST_CASE("fuse-quantized-contractions: MatMul with its bias Add, and Gemm with transB", "[passes][quantized]") {
  const std::string common = R"(
ir_version 10
opset "" 21
graph main (uint8[4,3] %aq) -> (int8[4,2] %y)
  init float[] %as = [0.02]
  init uint8[] %az = [100]
  init float[] %ws = [0.03]
  init int8[] %wz = [0]
  init float[2] %bias = [0.5, -1.5]
  init float[] %ys = [0.05]
  init int8[] %yz = [-3]
)";
  Rewritten matmul = ExpectRewriteOps(common + R"(  init int8[3,2] %wq = [10, -20, 30, 127, -128, 5]
{
  %a = DequantizeLinear(%aq, %as, %az) @dq_a
  %w = DequantizeLinear(%wq, %ws, %wz) @dq_w
  %p = MatMul(%a, %w) @matmul
  %h = Add(%p, %bias) @bias
  %y = QuantizeLinear(%h, %ys, %yz) @q
})",
                                      kPass, {"ai.fusionopt::FusedQMatMulAdd"}, {.numbers = Inlined()});
  const std::vector<cpu::NamedTensor> feeds = {{"aq", Bytes({4, 3}, 3)}};
  CHECK(fused_test::Run(*matmul.model, feeds, true).stats.kernels_launched == 1);
  Rewritten gemm = ExpectRewriteOps(common + R"(  init int8[2,3] %wq = [10, 30, -128, -20, 127, 5]
{
  %a = DequantizeLinear(%aq, %as, %az) @dq_a
  %w = DequantizeLinear(%wq, %ws, %wz) @dq_w
  %h = Gemm(%a, %w, %bias) {transB: 1} @gemm
  %y = QuantizeLinear(%h, %ys, %yz) @q
})",
                                    kPass, {"ai.fusionopt::FusedQGemm"}, {.numbers = Inlined()});
  // The same weights transposed: the same numbers.
  const auto a = fused_test::Run(*matmul.model, feeds, true).outputs;
  const auto b = fused_test::Run(*gemm.model, feeds, true).outputs;
  fused_test::RequireIdentical(a, b);
}

TEST_CASE("fuse-quantized-contractions: a dequantized input read by two convolutions", "[passes][quantized]") {
  const std::string text = ConvModel(R"(
  %y1 = QuantizeLinear(%c, %ys, %yz) @q1
  %w2 = DequantizeLinear(%w2q, %w2s) @dq_w2
  %c2 = Conv(%x, %w2) {kernel_shape: [1, 1]} @conv2
  %y2 = QuantizeLinear(%c2, %ys, %yz) @q2
  %y = Add(%y1, %y2) @sum)",
                                     "0", R"(  init int8[3,2,1,1] %w2q = [1, 2, 3, 4, 5, 6]
  init float[] %w2s = [0.01]
)");
  // The second convolution reads the shared %x through its own copy of the dequantization.
  Rewritten rewritten = Rewrite(text, kPass);
  // (The second has no bias: a body, and a function, of its own.)
  CHECK(OpTypes(*rewritten.model->graph) ==
        std::vector<std::string>{"ai.fusionopt::FusedQConv", "ai.fusionopt::FusedQConv_1", "Add"});
  ExpectSameNumbers(*rewritten.original, *rewritten.model, Inlined());
}

TEST_CASE("fuse-quantized-contractions: refusals name the reason", "[passes][quantized]") {
  // Weights computed at run time.
  ExpectUnchanged(R"(
ir_version 10
opset "" 21
graph main (uint8[1,2,3,3] %xq, int8[3,2,1,1] %wq) -> (uint8[1,3,3,3] %y)
  init float[] %s = [0.05]
  init uint8[] %z = [128]
  init int8[] %wz = [0]
{
  %x = DequantizeLinear(%xq, %s, %z)
  %w = DequantizeLinear(%wq, %s, %wz)
  %c = Conv(%x, %w) {kernel_shape: [1, 1]} @conv
  %y = QuantizeLinear(%c, %s, %z)
})",
                  kPass, "quantized contraction: the weights are not a constant");
  // Weights quantized along the input channels.
  ExpectUnchanged(ConvModel("  %y = QuantizeLinear(%c, %ys, %yz) @q", "1"), kPass,
                  "quantized contraction: the weights are quantized along an axis other than the output channels");
  // The product is read beside its QuantizeLinear.
  std::string shared = ConvModel(R"(
  %q = QuantizeLinear(%c, %ys, %yz) @q
  %y = Add(%q, %q) @twice
  %float = Relu(%c) @float_reader)");
  ExpectUnchanged(shared, kPass, "quantized contraction: the product has other readers before its QuantizeLinear");
  // An op between the product and the QuantizeLinear that no kernel takes as a post-op.
  ExpectUnchanged(ConvModel(R"(
  %e = Exp(%c) @exp
  %y = QuantizeLinear(%e, %ys, %yz) @q)"),
                  kPass, "quantized contraction: the product reaches Exp before a QuantizeLinear");
  // The output scale a feed may replace.
  ExpectUnchanged(R"(
ir_version 10
opset "" 21
graph main (uint8[1,2,3,3] %xq, float[] %ys) -> (uint8[1,3,3,3] %y)
  init float[] %s = [0.05]
  init uint8[] %z = [128]
  init int8[3,2,1,1] %wq = [12, -100, 127, 45, -128, 3]
  init int8[] %wz = [0]
{
  %x = DequantizeLinear(%xq, %s, %z)
  %w = DequantizeLinear(%wq, %s, %wz)
  %c = Conv(%x, %w) {kernel_shape: [1, 1]} @conv
  %y = QuantizeLinear(%c, %ys, %z)
})",
                  kPass, "quantized contraction: the output's quantization: the scale is not a constant");
}

TEST_CASE("fuse-quantized-contractions: a residual Add after the round trip joins the unit", "[passes][quantized]") {
  // ResNet's shortcut in QDQ form: Conv → Q → DQ → Add(DQ(shortcut)) → Relu → Q.
  const std::string text = QdqConvModel(true, false);
  Rewritten rewritten = ExpectRewriteOps(text, kPass, {"ai.fusionopt::FusedQConvRelu"}, {.numbers = Inlined()});
  const std::vector<cpu::NamedTensor> feeds = {{"xq", Bytes({1, 2, 3, 3}, 7)}, {"rq", Bytes({1, 3, 3, 3}, 11)}};
  for (const char* path : {"onednn", "float32"}) {
    const test_support::ScopedEnv env("FUSIONOPT_CPU_INT8", path);
    fused_test::Outcome fused = fused_test::Run(*rewritten.model, feeds, true);
    fused_test::Outcome op_by_op = fused_test::Run(*rewritten.model, feeds, false);
    CHECK(fused.stats.kernels_launched == 1);
    const cpu::RtTensor& a = fused.outputs[0].tensor;
    const cpu::RtTensor& b = op_by_op.outputs[0].tensor;
    for (int64_t i = 0; i < a.NumElements(); ++i) CHECK(std::abs(int(a.data<uint8_t>()[i]) - int(b.data<uint8_t>()[i])) <= 1);
  }
  // A residual that broadcasts (one value per channel) is no sum of the output: the unit ends
  // at the round trip's QuantizeLinear, and the Add stays outside.
  std::string broadcast = text;
  broadcast.replace(broadcast.find("uint8[1,3,3,3] %rq"), 18, "uint8[1,3,1,1] %rq");
  ExpectRewriteOps(broadcast, kPass,
                   {"ai.fusionopt::FusedQConv", "DequantizeLinear", "DequantizeLinear", "Add", "Relu", "QuantizeLinear"},
                   {.numbers = Inlined()});
}


TEST_CASE("fuse-quantized-contractions: the QuantizeLinear before and the DequantizeLinear after join the unit",
          "[passes][quantized]") {
  for (bool residual : {false, true}) {
    INFO("residual " << residual);
    Rewritten rewritten = ExpectRewriteOps(QdqConvModel(residual, true), kPass, {"ai.fusionopt::FusedQConvRelu"},
                                           {.numbers = Inlined()});
    REQUIRE(rewritten.run.fusions.size() == 1);
    const auto& replaced = rewritten.run.fusions[0].replaced;
    CHECK(std::count(replaced.begin(), replaced.end(), "q_x") == 1);
    CHECK(std::count(replaced.begin(), replaced.end(), "dq_out") == 1);
    std::vector<cpu::NamedTensor> feeds = {{"f", fused_test::Random(DataType::kFloat, {1, 2, 3, 3}, 5, -6.0f, 6.0f)}};
    if (residual) feeds.push_back({"rq", Bytes({1, 3, 3, 3}, 11)});
    for (const char* path : {"onednn", "float32"}) {
      const test_support::ScopedEnv env("FUSIONOPT_CPU_INT8", path);
      const fused_test::Outcome fused = fused_test::Run(*rewritten.model, feeds, true);
      const fused_test::Outcome op_by_op = fused_test::Run(*rewritten.model, feeds, false);
      CHECK(fused.stats.kernels_launched == 1);
      // Float on the output's grid: within one step (0.1) of the op-by-op values.
      const cpu::RtTensor& a = fused.outputs[0].tensor;
      const cpu::RtTensor& b = op_by_op.outputs[0].tensor;
      REQUIRE(a.dtype() == DataType::kFloat);
      for (int64_t i = 0; i < a.NumElements(); ++i) CHECK(std::abs(a.data<float>()[i] - b.data<float>()[i]) <= 0.1001f);
    }
  }
}

TEST_CASE("fuse-quantized-contractions: float ends other kernels would take stay outside", "[passes][quantized]") {
  // The output's DequantizeLinear read by an Add: the elementwise program takes it and reads 8 bits.
  std::string elementwise = QdqConvModel(false, true);
  const std::string last = "  %out = DequantizeLinear(%y, %ys, %yz) @dq_out\n";
  elementwise.replace(elementwise.find(last), last.size(),
                      "  %d = DequantizeLinear(%y, %ys, %yz) @dq_out\n  %out = Add(%d, %d) @twice\n");
  ExpectRewriteOps(elementwise, kPass, {"ai.fusionopt::FusedQConvRelu", "DequantizeLinear", "Add"},
                   {.numbers = Inlined()});
  // A QuantizeLinear read twice is no unit's own.
  std::string shared = QdqConvModel(false, true);
  const std::string output = "-> (float[1,3,3,3] %out)";
  shared.replace(shared.find(output), output.size(), "-> (float[1,3,3,3] %out, uint8[1,2,3,3] %xq)");
  ExpectRewriteOps(shared, kPass, {"QuantizeLinear", "ai.fusionopt::FusedQConvRelu"}, {.numbers = Inlined()});
  // The input's QuantizeLinear after an elementwise op (SiLU's Mul): the op's program takes it
  // and hands on 8 bits.
  std::string after_elementwise = QdqConvModel(false, true);
  const std::string quantize = "  %xq = QuantizeLinear(%f, %xs, %xz) @q_x\n";
  after_elementwise.replace(after_elementwise.find(quantize), quantize.size(),
                            "  %g = Sigmoid(%f) @sigmoid\n  %h = Mul(%f, %g) @silu\n"
                            "  %xq = QuantizeLinear(%h, %xs, %xz) @q_x\n");
  ExpectRewriteOps(after_elementwise, kPass, {"Sigmoid", "Mul", "QuantizeLinear", "ai.fusionopt::FusedQConvRelu"},
                   {.numbers = Inlined()});
  // float16 ends: the kernels quantize and write float32 only.
  std::string half = QdqConvModel(false, true);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"float[1,2,3,3] %f", "float16[1,2,3,3] %f"},
           {"float[1,3,3,3] %out", "float16[1,3,3,3] %out"},
           {"init float[] %xs = [0.05]", "init float16[] %xs = [0.05]"},
           {"init float[] %ys = [0.1]", "init float16[] %ys = [0.1]"},
           {"init float[3] %ws", "init float16[3] %ws"}}) {
    REQUIRE(half.find(from) != std::string::npos);
    half.replace(half.find(from), from.size(), to);
  }
  ExpectRewriteOps(half, kPass, {"QuantizeLinear", "ai.fusionopt::FusedQConvRelu", "DequantizeLinear"},
                   {.numbers = Inlined()});
}

TEST_CASE("fuse-quantized-contractions: two units meeting at one residual Add: the first takes it",
          "[passes][quantized]") {
  // ResNet's projection block: Add(DQ(Q(conv2)), DQ(Q(downsample))) → Relu → Q.
  const std::string text = R"(
ir_version 10
opset "" 21
graph main (uint8[1,2,3,3] %xq) -> (uint8[1,3,3,3] %y)
  init float[] %xs = [0.05]
  init uint8[] %xz = [128]
  init int8[3,2,1,1] %aq = [12, -100, 127, 45, -128, 3]
  init int8[3,2,1,1] %bq = [7, 8, -9, 10, 11, -12]
  init float[] %ws = [0.01]
  init int8[] %wz = [0]
  init float[] %ms = [0.07]
  init uint8[] %mz = [100]
  init float[] %ns = [0.04]
  init uint8[] %nz = [120]
  init float[] %ys = [0.1]
  init uint8[] %yz = [0]
{
  %x = DequantizeLinear(%xq, %xs, %xz) @dq_x
  %a = DequantizeLinear(%aq, %ws, %wz) @dq_a
  %b = DequantizeLinear(%bq, %ws, %wz) @dq_b
  %ca = Conv(%x, %a) {kernel_shape: [1, 1]} @conv_a
  %cb = Conv(%x, %b) {kernel_shape: [1, 1]} @conv_b
  %maq = QuantizeLinear(%ca, %ms, %mz) @q_a
  %mbq = QuantizeLinear(%cb, %ns, %nz) @q_b
  %ma = DequantizeLinear(%maq, %ms, %mz) @dq_ma
  %mb = DequantizeLinear(%mbq, %ns, %nz) @dq_mb
  %s = Add(%ma, %mb) @residual
  %r = Relu(%s) @relu
  %y = QuantizeLinear(%r, %ys, %yz) @q
})";
  Rewritten rewritten = ExpectRewriteOps(text, kPass, {"ai.fusionopt::FusedQConv", "ai.fusionopt::FusedQConvRelu"},
                                         {.numbers = Inlined()});
  REQUIRE(rewritten.run.fusions.size() == 2);
  const std::vector<cpu::NamedTensor> feeds = {{"xq", Bytes({1, 2, 3, 3}, 7)}};
  const fused_test::Outcome fused = fused_test::Run(*rewritten.model, feeds, true);
  const fused_test::Outcome op_by_op = fused_test::Run(*rewritten.model, feeds, false);
  CHECK(fused.stats.kernels_launched == 2);
  const cpu::RtTensor& a = fused.outputs[0].tensor;
  const cpu::RtTensor& b = op_by_op.outputs[0].tensor;
  for (int64_t i = 0; i < a.NumElements(); ++i) CHECK(std::abs(int(a.data<uint8_t>()[i]) - int(b.data<uint8_t>()[i])) <= 1);
}
