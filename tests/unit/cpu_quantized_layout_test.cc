// A quantized model's 8-bit activations in convolution layouts (rt_tensor.h): integer convolution
// units, the 8-bit MaxPool and the elementwise programs between them hand each other uint8
// tensors in oneDNN's layout, and a one-input 8-bit program runs as a table lookup — with the
// same numbers as a run that keeps every value row-major and as the ops run one by one.
#include "cpu_fused_test_helpers.h"
#include "scoped_env.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::fused_test;

namespace {

std::string Ints(int count, int seed) {
  std::string values;
  for (int i = 0; i < count; ++i) values += (i ? ", " : "") + std::to_string((i * 37 + seed * 11) % 255 - 127);
  return "[" + values + "]";
}

// uint8 [2,16,10,10] → conv unit (Relu) → 8-bit MaxPool → conv unit with the pool as residual →
// DQ → Exp → Q (one 8-bit input: a table; Exp is no epilogue step of the unit) → DQ, float out.
std::string QuantizedStage() {
  return R"(
ir_version 10
opset "" 21
graph main (uint8[2,16,10,10] %xq) -> (float[2,16,5,5] %y)
  init float[] %xs = [0.05]
  init uint8[] %xz = [128]
  init int8[16,16,3,3] %wa = )" + Ints(16 * 16 * 9, 1) + R"(
  init int8[16,16,1,1] %wb = )" + Ints(16 * 16, 2) + R"(
  init float[] %ws = [0.004]
  init float[] %as = [0.08]
  init uint8[] %az = [0]
  init float[] %ms = [0.06]
  init uint8[] %mz = [120]
  init float[] %bs = [0.09]
  init uint8[] %bz = [0]
  init float[] %ss = [0.25]
  init uint8[] %sz = [0]
{
  %x = DequantizeLinear(%xq, %xs, %xz) @dq_x
  %wad = DequantizeLinear(%wa, %ws) @dq_wa
  %a = Conv(%x, %wad) {kernel_shape: [3, 3], pads: [1, 1, 1, 1]} @conv_a
  %ar = Relu(%a) @relu_a
  %aq = QuantizeLinear(%ar, %as, %az) @q_a
  %pq = MaxPool(%aq) {kernel_shape: [2, 2], strides: [2, 2]} @pool
  %p = DequantizeLinear(%pq, %as, %az) @dq_p
  %wbd = DequantizeLinear(%wb, %ws) @dq_wb
  %b = Conv(%p, %wbd) {kernel_shape: [1, 1]} @conv_b
  %mq = QuantizeLinear(%b, %ms, %mz) @q_mid
  %m = DequantizeLinear(%mq, %ms, %mz) @dq_mid
  %r = DequantizeLinear(%pq, %as, %az) @dq_r
  %s = Add(%m, %r) @residual
  %sr = Relu(%s) @relu_b
  %bq = QuantizeLinear(%sr, %bs, %bz) @q_b
  %bd = DequantizeLinear(%bq, %bs, %bz) @dq_b
  %g = Exp(%bd) @exp
  %gq = QuantizeLinear(%g, %ss, %sz) @q_s
  %y = DequantizeLinear(%gq, %ss, %sz) @dq_y
}
)";
}

}  // namespace

TEST_CASE("8-bit activations pass between integer convolutions, the pool and a table in oneDNN's layout",
          "[cpu][layout][quantized]") {
  auto model = Parse(QuantizedStage());
  REQUIRE(pass_test::RunPass(*model, "fuse-quantized-contractions").statistics.changed);
  REQUIRE(pass_test::RunPass(*model, "fuse-elementwise").statistics.changed);
  const std::vector<NamedTensor> feeds = {{"xq", Bytes({2, 16, 10, 10}, 3)}};
  for (const char* path : {"onednn", "float32"}) {
    INFO("int8 path " << path);
    const test_support::ScopedEnv env("FUSIONOPT_CPU_INT8", path);
    Outcome handed_on = RunLayouts(*model, feeds, true);
    Outcome row_major = RunLayouts(*model, feeds, false);
    // The first unit and the pool hand their uint8 outputs on in oneDNN's layout (the int8
    // kernels' own); the float32 path computes row-major.
    if (std::string(path) == "onednn") CHECK(handed_on.stats.conv_layout_outputs >= 2);
    CHECK(row_major.stats.conv_layout_outputs == 0);
    CHECK(handed_on.stats.kernels_launched == row_major.stats.kernels_launched);
    RequireIdentical(handed_on.outputs, row_major.outputs);
    // The ops one by one: within one step of the output's grid (0.25).
    Outcome op_by_op = RunLayouts(*model, feeds, true, false);
    pass_test::RequireClose(handed_on.outputs, op_by_op.outputs, 0.0, 0.2501);
  }
}

TEST_CASE("an 8-bit MaxPool on oneDNN's int8 pooling equals the direct loop", "[cpu][quantized]") {
  // The Indices output makes the kernel take the direct loop: the same maxima either way.
  const std::string text = R"(
ir_version 10
opset "" 21
graph main (uint8[2,16,9,9] %x) -> (uint8[2,16,5,5] %y, uint8[2,16,5,5] %z)
{
  %y = MaxPool(%x) {kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1]} @pool
  %z, %i = MaxPool(%x) {kernel_shape: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1]} @pool_indices
}
)";
  auto model = Parse(text);
  const Outcome outcome = RunLayouts(*model, {{"x", Bytes({2, 16, 9, 9}, 5)}}, true);
  REQUIRE(outcome.outputs.size() == 2);
  RequireIdentical({outcome.outputs[0]}, {{"y", outcome.outputs[1].tensor}});
}

TEST_CASE("an elementwise program of one 8-bit input is a table: bit for bit the program's values",
          "[cpu][quantized]") {
  // Two outputs of two uint8 inputs side by side (as fuse-horizontal-elementwise merges them),
  // each a table of its own input; and, for contrast, a program of both inputs, computed.
  const std::string text = R"(
ir_version 10
opset "" 21
graph main (uint8[3,50] %a, uint8[3,50] %b) -> (float[3,50] %ya, uint8[3,50] %yb, float[3,50] %both)
  init float[] %s = [0.05]
  init uint8[] %z = [128]
  init float[] %t = [0.02]
{
  %da = DequantizeLinear(%a, %s, %z) @dq_a
  %ea = Exp(%da) @exp
  %ya = Mul(%ea, %da) @mul
  %db = DequantizeLinear(%b, %s, %z) @dq_b
  %hb = HardSwish(%db) @hardswish
  %yb = QuantizeLinear(%hb, %t, %z) @q_b
  %both = Add(%da, %db) @add
}
)";
  auto tables = Outlined(text, {"dq_a", "exp", "mul", "dq_b", "hardswish", "q_b"});
  auto computed = Outlined(text, {"dq_a", "dq_b", "add"});
  const std::vector<NamedTensor> feeds = {{"a", Bytes({3, 50}, 1)}, {"b", Bytes({3, 50}, 2)}};
  for (auto* model : {tables.get(), computed.get()}) {
    const Outcome fused = RunLayouts(*model, feeds, true);
    const Outcome op_by_op = RunLayouts(*model, feeds, true, false);
    RequireIdentical(fused.outputs, op_by_op.outputs);
  }
}
