// Dynamically quantized contractions (onnxruntime's quantize_dynamic: DynamicQuantizeLinear →
// MatMulInteger/ConvInteger → Cast → Mul by the scales) as chain heads of
// fuse-contraction-epilogues, merged by fuse-horizontal-contractions, and run by the CPU runtime
// as one integer kernel that quantizes its own input; with the cases each refuses.
#include <catch2/catch.hpp>

#include "cpu_fused_test_helpers.h"
#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

// x [2,5,4] quantized dynamically, then each projection's MatMulInteger, Cast, scale, and
// `tail` after the first projection's product %p (%y the first output).
std::string MatMulModel(const std::string& tail, const std::string& outputs = "float[2,5,3] %y",
                        const std::string& extra_inits = "") {
  return R"(
ir_version 10
opset "" 21
graph main (float[2,5,4] %x) -> ()" + outputs + R"()
  init int8[4,3] %wq = [12, -100, 127, 45, -128, 3, 77, -5, 0, 64, -64, 9]
  init float[] %ws = [0.01]
  init int8[] %wz = [0]
  init float[3] %bias = [0.5, -0.25, 0.125]
)" + extra_inits + R"({
  %xq, %xs, %xz = DynamicQuantizeLinear(%x) @dql
  %s = Mul(%xs, %ws) @scales
  %acc = MatMulInteger(%xq, %wq, %xz, %wz) @mmi
  %f = Cast(%acc) {to: 1} @cast
  %p = Mul(%f, %s) @rescale
)" + tail + R"(
})";
}

// A second projection of the same quantized input, its product %p2, its weights' zero point
// `zero_point`; and its initializers.
std::string SecondHead(const std::string& zero_point = "%wz") {
  return R"(
  %s2 = Mul(%xs, %ws2) @scales2
  %acc2 = MatMulInteger(%xq, %wq2, %xz, )" + zero_point + R"() @mmi2
  %f2 = Cast(%acc2) {to: 1} @cast2
  %p2 = Mul(%f2, %s2) @rescale2)";
}
constexpr const char* kSecondHeadInits =
    "  init int8[4,2] %wq2 = [1, 2, 3, 4, -5, -6, 7, 8]\n  init float[2] %ws2 = [0.02, 0.04]\n";

const std::vector<cpu::NamedTensor>& Feeds() {
  static const std::vector<cpu::NamedTensor> feeds = {{"x", fused_test::Random(DataType::kFloat, {2, 5, 4}, 11)}};
  return feeds;
}

// The rewritten model runs as `kernels` fused kernels and agrees with its bodies run op by op.
void ExpectFusedKernels(const Model& model, int64_t kernels) {
  const fused_test::Outcome fused = fused_test::Run(model, Feeds(), true);
  const fused_test::Outcome op_by_op = fused_test::Run(model, Feeds(), false);
  CHECK(fused.stats.kernels_launched == kernels);
  CHECK(op_by_op.stats.kernels_launched > kernels);
  pass_test::RequireClose(fused.outputs, op_by_op.outputs, 1e-5, 1e-6);
}

constexpr const char* kEpilogues = "fuse-contraction-epilogues";

}  // namespace

TEST_CASE("dynamic quantization: DynamicQuantizeLinear through bias and GELU is one integer kernel",
          "[passes][quantized]") {
  const std::string text = MatMulModel(R"(
  %h = Add(%p, %bias) @bias_add
  %y = Gelu(%h) @gelu)");
  Rewritten rewritten = ExpectRewriteOps(text, kEpilogues, {"ai.fusionopt::FusedDynamicQMatMulAddGelu"},
                                         {.numbers = Inlined()});
  REQUIRE(rewritten.run.fusions.size() == 1);
  CHECK(rewritten.run.fusions[0].replaced.size() == 7);  // the quantization and the head among them
  ExpectFusedKernels(*rewritten.model, 1);
}

TEST_CASE("dynamic quantization: a head alone, and a float residual after the bias", "[passes][quantized]") {
  Rewritten alone = ExpectRewriteOps(MatMulModel("  %y = Identity(%p) @out"), kEpilogues,
                                     {"ai.fusionopt::FusedDynamicQMatMul", "Identity"}, {.numbers = Inlined()});
  ExpectFusedKernels(*alone.model, 1);
  std::string with_residual = MatMulModel(R"(
  %h = Add(%p, %bias) @bias_add
  %r = Relu(%h) @relu
  %y = Add(%r, %shortcut) @residual)");
  const std::string inputs = "(float[2,5,4] %x)";
  with_residual.replace(with_residual.find(inputs), inputs.size(), "(float[2,5,4] %x, float[2,5,3] %shortcut)");
  Rewritten residual = ExpectRewriteOps(with_residual, kEpilogues, {"ai.fusionopt::FusedDynamicQMatMulAddReluAdd"},
                                        {.numbers = Inlined()});
  const std::vector<cpu::NamedTensor> feeds = {Feeds()[0], {"shortcut", fused_test::Random(DataType::kFloat, {2, 5, 3}, 5)}};
  const fused_test::Outcome fused = fused_test::Run(*residual.model, feeds, true);
  const fused_test::Outcome op_by_op = fused_test::Run(*residual.model, feeds, false);
  CHECK(fused.stats.kernels_launched == 1);
  pass_test::RequireClose(fused.outputs, op_by_op.outputs, 1e-5, 1e-6);
}

TEST_CASE("dynamic quantization: a shared DynamicQuantizeLinear stays outside; the heads read its outputs",
          "[passes][quantized]") {
  const std::string text = MatMulModel("  %y = Add(%p, %bias) @bias_add" + SecondHead() + "\n  %y2 = Identity(%p2) @out2",
                                       "float[2,5,3] %y, float[2,5,2] %y2", kSecondHeadInits);
  Rewritten rewritten = ExpectRewriteOps(text, kEpilogues,
                                         {"DynamicQuantizeLinear", "ai.fusionopt::FusedDynamicQMatMulAdd",
                                          "ai.fusionopt::FusedDynamicQMatMul", "Identity"},
                                         {.numbers = Inlined()});
  // The two heads and the quantization they share: three kernels.
  ExpectFusedKernels(*rewritten.model, 3);
}

TEST_CASE("dynamic quantization: projections of one quantized input merge into one head with per-column scales",
          "[passes][quantized]") {
  const std::string text = MatMulModel("  %y = Add(%p, %bias) @bias_add" + SecondHead() + "\n  %y2 = Add(%p2, %bias2) @bias_add2",
                                       "float[2,5,3] %y, float[2,5,2] %y2",
                                       std::string(kSecondHeadInits) + "  init float[2] %bias2 = [1.0, -1.0]\n");
  Rewritten merged = ExpectRewriteOps(text, "fuse-horizontal-contractions",
                                      {"DynamicQuantizeLinear", "MatMulInteger", "Cast", "Mul", "Mul", "Add", "Split"},
                                      {.numbers = Inlined()});
  REQUIRE(merged.run.fusions.size() == 1);
  CHECK(merged.run.fusions[0].replaced.size() == 10);  // two heads of four and their bias Adds
  // The merged head then takes the quantization and the bias: one kernel, and the Split (which
  // an attention node reads in place; here, with graph outputs after it, a copy).
  Rewritten fused = ExpectRewriteOps(Print(*merged.model), kEpilogues, {"ai.fusionopt::FusedDynamicQMatMulAdd", "Split"},
                                     {.numbers = Inlined()});
  ExpectFusedKernels(*fused.model, 2);

  // Different weight zero points cannot share one accumulator: nothing merges.
  const std::string zero_points = MatMulModel("  %y = Identity(%p) @out" + SecondHead("%wz2") + "\n  %y2 = Identity(%p2) @out2",
                                              "float[2,5,3] %y, float[2,5,2] %y2",
                                              std::string(kSecondHeadInits) + "  init int8[] %wz2 = [3]\n");
  ExpectUnchanged(zero_points, "fuse-horizontal-contractions",
                  "no other contraction on the same input with compatible weights and attributes");
}

TEST_CASE("dynamic quantization: the integer kernel's epilogue limits end the chain", "[passes][quantized]") {
  // A product with a tensor has no integer post-op: the head is fused without it.
  Rewritten product = ExpectRewriteOps(MatMulModel(R"(
  %y = Mul(%p, %gate) @gate_mul)",
                                                   "float[2,5,3] %y", "  init float[2,5,3] %gate = " +
                                                                          fused_test::Literal(30, 9) + "\n"),
                                       kEpilogues, {"ai.fusionopt::FusedDynamicQMatMul", "Mul"}, {.numbers = Inlined()});
  CHECK(product.run.Rejections("integer kernel: a product with a tensor is no post-op of it") == 1);
  // A per-channel addend after the activation is no bias.
  Rewritten late = ExpectRewriteOps(MatMulModel(R"(
  %r = Relu(%p) @relu
  %y = Add(%r, %bias) @late_add)"),
                                    kEpilogues, {"ai.fusionopt::FusedDynamicQMatMulRelu", "Add"}, {.numbers = Inlined()});
  CHECK(late.run.Rejections("integer kernel: a per-channel addend other than the bias right after the product") == 1);
}

TEST_CASE("dynamic quantization: heads that do not match stay as they are", "[passes][quantized]") {
  // Computed weights: no constant to pack.
  ExpectUnchanged(R"(
ir_version 10
opset "" 21
graph main (float[2,4] %x, int8[4,3] %wq) -> (float[2,3] %y)
  init float[] %ws = [0.01]
{
  %xq, %xs, %xz = DynamicQuantizeLinear(%x) @dql
  %s = Mul(%xs, %ws) @scales
  %acc = MatMulInteger(%xq, %wq, %xz) @mmi
  %f = Cast(%acc) {to: 1} @cast
  %y = Mul(%f, %s) @rescale
})",
                  kEpilogues, "the weights are not a constant");
  // The accumulator read as int32 too: the head cannot end in the float product.
  ExpectUnchanged(MatMulModel("  %y = Identity(%p) @out\n  %raw = Identity(%acc) @raw", "float[2,5,3] %y, int32[2,5,3] %raw"),
                  kEpilogues, "the accumulator is not only cast");
  // A scale per row is not per output column.
  std::string per_row = MatMulModel("  %y = Identity(%p) @out");
  const std::string scalar_scale = "init float[] %ws = [0.01]";
  per_row.replace(per_row.find(scalar_scale), scalar_scale.size(), "init float[5,1] %ws = [0.1, 0.2, 0.3, 0.4, 0.5]");
  ExpectUnchanged(per_row,
                  kEpilogues, "the weights' scale is not one value per output channel");
}

TEST_CASE("dynamic quantization: ConvInteger with a per-channel bias and Relu is one kernel", "[passes][quantized]") {
  const std::string text = R"(
ir_version 10
opset "" 21
graph main (float[1,2,4,4] %x) -> (float[1,3,4,4] %y)
  init int8[3,2,3,3] %wq = )" + std::string("[") + [] {
    std::string values;
    for (int i = 0; i < 54; ++i) values += (i ? ", " : "") + std::to_string((i * 37) % 255 - 127);
    return values;
  }() + R"(]
  init float[] %ws = [0.004]
  init float[3,1,1] %bias = [0.1, -0.2, 0.3]
{
  %xq, %xs, %xz = DynamicQuantizeLinear(%x) @dql
  %s = Mul(%xs, %ws) @scales
  %acc = ConvInteger(%xq, %wq, %xz) {kernel_shape: [3, 3], pads: [1, 1, 1, 1]} @conv
  %f = Cast(%acc) {to: 1} @cast
  %p = Mul(%f, %s) @rescale
  %h = Add(%p, %bias) @bias_add
  %y = Relu(%h) @relu
})";
  Rewritten rewritten = ExpectRewriteOps(text, kEpilogues, {"ai.fusionopt::FusedDynamicQConvAddRelu"},
                                         {.numbers = Inlined()});
  const std::vector<cpu::NamedTensor> feeds = {{"x", fused_test::Random(DataType::kFloat, {1, 2, 4, 4}, 3)}};
  const fused_test::Outcome fused = fused_test::Run(*rewritten.model, feeds, true);
  const fused_test::Outcome op_by_op = fused_test::Run(*rewritten.model, feeds, false);
  CHECK(fused.stats.kernels_launched == 1);
  pass_test::RequireClose(fused.outputs, op_by_op.outputs, 1e-5, 1e-6);
}
