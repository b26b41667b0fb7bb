// Activations in convolution layouts between convolutions and pools (rt_tensor.h): a kernel
// leaves its output in oneDNN's layout only where every reader reads such layouts, and a run
// with the hand-off computes the same numbers as one that keeps every value row-major.
#include "cpu_fused_test_helpers.h"
#include "cpu_runtime/onednn/conv_layout_views.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::fused_test;

namespace {

const std::string kHeader = "ir_version 8\nopset \"\" 20\n";

// `text` with each group of named nodes outlined into its own fused node.
std::unique_ptr<Model> OutlinedGroups(const std::string& text, const std::vector<std::vector<std::string>>& groups) {
  auto model = Parse(text);
  for (const auto& group : groups) {
    REQUIRE(pass_test::OutlineNodes(*model, group, "test").fused != nullptr);
  }
  return model;
}

// A ResNet-like run: Conv+Relu, MaxPool, a 1x1 Conv, Conv + residual + Relu, then a global
// pool as the graph output. `channels` is the width of every activation.
std::string ResidualStage(int channels) {
  const std::string c = std::to_string(channels);
  return kHeader + "graph main (float[2,16,10,10] %x) -> (float[2," + c + ",1,1] %y)\n" +
         Init("float[" + c + ",16,3,3]", "wa", channels * 16 * 9, 51) + Init("float[" + c + "]", "ba", channels, 52) +
         Init("float[" + c + "," + c + ",1,1]", "wb", channels * channels, 53) +
         Init("float[" + c + "," + c + ",3,3]", "wc", channels * channels * 9, 54) +
         Init("float[" + c + "]", "bc", channels, 55) + R"({
  %a = Conv(%x, %wa, %ba) {kernel_shape: [3, 3], pads: [1, 1, 1, 1]} @conv_a
  %ar = Relu(%a) @relu_a
  %p = MaxPool(%ar) {kernel_shape: [2, 2], strides: [2, 2]} @pool
  %b = Conv(%p, %wb) {kernel_shape: [1, 1]} @conv_b
  %c = Conv(%b, %wc, %bc) {kernel_shape: [3, 3], pads: [1, 1, 1, 1]} @conv_c
  %s = Add(%c, %p) @residual
  %r = Relu(%s) @relu_c
  %y = GlobalAveragePool(%r) @gap
}
)";
}

const std::vector<std::vector<std::string>> kStageGroups = {{"conv_a", "relu_a"}, {"conv_c", "residual", "relu_c"}};

}  // namespace

TEST_CASE("convolutions and pools in a row hand each other activations in their own layout", "[cpu][layout]") {
  auto model = OutlinedGroups(ResidualStage(32), kStageGroups);
  const std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {2, 16, 10, 10}, 56)}};
  Outcome handed_on = RunLayouts(*model, feeds, true);
  Outcome row_major = RunLayouts(*model, feeds, false);
  // Conv+Relu, MaxPool, the 1x1 Conv and Conv+residual+Relu; the global pool is the output.
  REQUIRE(handed_on.stats.conv_layout_outputs == 4);
  REQUIRE(row_major.stats.conv_layout_outputs == 0);
  REQUIRE(handed_on.stats.kernels_launched == row_major.stats.kernels_launched);
  // The same primitives run on the same numbers; only the reorders between them went.
  RequireIdentical(handed_on.outputs, row_major.outputs);
  // And both agree with the graph before fusion.
  auto unfused = Parse(ResidualStage(32));
  pass_test::RequireClose(handed_on.outputs, RunLayouts(*unfused, feeds, true).outputs, 1e-4, 1e-5);
}

TEST_CASE("an activation stays row-major when any reader needs it so", "[cpu][layout]") {
  const std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {2, 16, 10, 10}, 57)}};
  SECTION("unfused: every Conv output feeds a Relu or an Add") {
    auto model = Parse(ResidualStage(32));
    Outcome handed_on = RunLayouts(*model, feeds, true);
    // Relu, Add and the pools read convolution layouts too: every value but the graph output.
    REQUIRE(handed_on.stats.conv_layout_outputs == 7);
    RequireIdentical(handed_on.outputs, RunLayouts(*model, feeds, false).outputs);
  }
  SECTION("fused calls run op by op read row-major") {
    auto model = OutlinedGroups(ResidualStage(32), kStageGroups);
    Outcome op_by_op = RunLayouts(*model, feeds, true, /*fused=*/false);
    // Only inside the bodies: each Conv's output, read by the body's Relu or residual Add
    // (which reads the row-major residual too, so writes row-major).
    REQUIRE(op_by_op.stats.conv_layout_outputs == 2);
    RequireIdentical(op_by_op.outputs, RunLayouts(*model, feeds, false, false).outputs);
  }
  SECTION("channels that fill no block of 8: channels-last or row-major, whichever oneDNN picks") {
    auto model = OutlinedGroups(ResidualStage(12), kStageGroups);
    RequireIdentical(RunLayouts(*model, feeds, true).outputs, RunLayouts(*model, feeds, false).outputs);
  }
  SECTION("a value that is also a graph output") {
    std::string text = ResidualStage(32);
    text.replace(text.find("-> (float[2,32,1,1] %y)"), 23, "-> (float[2,32,1,1] %y, float[2,32,5,5] %b)");
    auto model = OutlinedGroups(text, kStageGroups);
    Outcome handed_on = RunLayouts(*model, feeds, true);
    REQUIRE(handed_on.stats.conv_layout_outputs == 3);  // all but the 1x1 Conv's
    RequireIdentical(handed_on.outputs, RunLayouts(*model, feeds, false).outputs);
  }
}

TEST_CASE("a residual summed into a row-major output is reordered from its convolution layout", "[cpu][layout]") {
  // The fused Conv + residual + Relu feeds a Softmax, so it writes row-major while its
  // residual (the pool's output) arrives in the pool's layout.
  std::string text = ResidualStage(32);
  text.replace(text.find("  %y = GlobalAveragePool(%r) @gap"), 33,
               "  %q = Softmax(%r) {axis: 1} @softmax\n  %y = GlobalAveragePool(%q) @gap");
  auto model = OutlinedGroups(text, kStageGroups);
  const std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {2, 16, 10, 10}, 58)}};
  Outcome handed_on = RunLayouts(*model, feeds, true);
  REQUIRE(handed_on.stats.conv_layout_outputs == 3);
  RequireIdentical(handed_on.outputs, RunLayouts(*model, feeds, false).outputs);
}

namespace {

// An SE block (ReduceMean, two 1x1 convolutions, a gate Mul), a Concat of two activations,
// a per-channel BatchNorm-like prologue (Mul, Add, Relu) and a bool side path (Less, Cast)
// that must come back row-major before the Add that reads it.
std::string LayoutAgnosticOps() {
  return kHeader + "graph main (float[2,16,8,8] %x) -> (float[2,16,8,8] %y)\n" +
         Init("float[32,16,3,3]", "wa", 32 * 16 * 9, 61) + Init("float[8,32,1,1]", "wg", 8 * 32, 62) +
         Init("float[32,8,1,1]", "wh", 32 * 8, 63) + Init("float[16,32,1,1]", "wb", 16 * 32, 64) +
         Init("float[48,1,1]", "scale", 48, 65) + Init("float[48,1,1]", "shift", 48, 66) +
         Init("float[16,48,3,3]", "wy", 16 * 48 * 9, 67) +
         "  init int64[2] %axes = [2, 3]\n  init float[] %zero = [0.0]\n" + R"({
  %a = Conv(%x, %wa) {kernel_shape: [3, 3], pads: [1, 1, 1, 1]} @conv_a
  %s = ReduceMean(%a, %axes) @squeeze
  %g1 = Conv(%s, %wg) {kernel_shape: [1, 1]} @conv_g
  %g2 = Relu(%g1) @relu_g
  %g3 = Conv(%g2, %wh) {kernel_shape: [1, 1]} @conv_h
  %g = Sigmoid(%g3) @gate
  %m = Mul(%a, %g) @excite
  %neg = Less(%a, %zero) @less
  %negf = Cast(%neg) {to: 1} @cast
  %m2 = Add(%m, %negf) @add_mask
  %b = Conv(%m2, %wb) {kernel_shape: [1, 1]} @conv_b
  %cat = Concat(%b, %m) {axis: 1} @concat
  %p = Mul(%cat, %scale) @bn_scale
  %q = Add(%p, %shift) @bn_shift
  %r = Relu(%q) @bn_relu
  %y = Conv(%r, %wy) {kernel_shape: [3, 3], pads: [1, 1, 1, 1]} @conv_y
}
)";
}

}  // namespace

TEST_CASE("elementwise ops, reductions and Concat read activations in convolution layouts", "[cpu][layout]") {
  const std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {2, 16, 8, 8}, 68)}};
  SECTION("op by op") {
    auto model = Parse(LayoutAgnosticOps());
    Outcome handed_on = RunLayouts(*model, feeds, true);
    Outcome row_major = RunLayouts(*model, feeds, false);
    REQUIRE(handed_on.stats.conv_layout_outputs > 0);
    REQUIRE(row_major.stats.conv_layout_outputs == 0);
    // The mean sums in another order over the physical dims, and the gate carries that on:
    // float rounding of outputs up to ~160 (3e-5 seen).
    pass_test::RequireClose(handed_on.outputs, row_major.outputs, 1e-5, 1e-4);
  }
  SECTION("the prologue as one fused elementwise program") {
    auto model = OutlinedGroups(LayoutAgnosticOps(), {{"bn_scale", "bn_shift", "bn_relu"}});
    Outcome handed_on = RunLayouts(*model, feeds, true);
    REQUIRE(handed_on.stats.conv_layout_outputs > 0);
    pass_test::RequireClose(handed_on.outputs, RunLayouts(*model, feeds, false).outputs, 1e-5, 1e-4);
    pass_test::RequireClose(handed_on.outputs, RunLayouts(*Parse(LayoutAgnosticOps()), feeds, false).outputs, 1e-5,
                            1e-4);
  }
}

TEST_CASE("physical views of convolution layouts map dims and axes both ways", "[cpu][layout]") {
  using layouts::LogicalDims;
  using layouts::PhysicalAxes;
  using layouts::PhysicalDims;
  const std::vector<int64_t> logical = {2, 32, 5, 7};
  REQUIRE(PhysicalDims(logical, Layout::kChannelsLast) == std::vector<int64_t>{2, 5, 7, 32});
  REQUIRE(PhysicalDims(logical, Layout::kBlocked8) == std::vector<int64_t>{2, 4, 5, 7, 8});
  REQUIRE(PhysicalDims({1, 1, 5, 7}, Layout::kBlocked16) == std::vector<int64_t>{1, 1, 5, 7, 1});
  for (Layout layout : {Layout::kChannelsLast, Layout::kBlocked8, Layout::kBlocked16}) {
    REQUIRE(LogicalDims(PhysicalDims(logical, layout), layout) == logical);
  }
  REQUIRE(PhysicalAxes(1, 4, Layout::kChannelsLast) == std::vector<int64_t>{3});
  REQUIRE(PhysicalAxes(3, 4, Layout::kChannelsLast) == std::vector<int64_t>{2});
  REQUIRE(PhysicalAxes(1, 4, Layout::kBlocked8) == std::vector<int64_t>{1, 4});
  REQUIRE(PhysicalAxes(2, 4, Layout::kBlocked8) == std::vector<int64_t>{2});
  REQUIRE(layouts::SameInBothLayouts({2, 32, 1, 1}));
  REQUIRE(layouts::SameInBothLayouts({2, 1, 5, 7}, Layout::kBlocked8));
  REQUIRE_FALSE(layouts::SameInBothLayouts({2, 32, 5, 1}));
  REQUIRE_FALSE(layouts::SameInBothLayouts({2, 12, 1, 1}, Layout::kBlocked8));

  RtTensor activation = RtTensor::Allocate(DataType::kFloat, logical);
  activation.set_layout(Layout::kChannelsLast);
  const RtTensor gate = RtTensor::Allocate(DataType::kFloat, {2, 32, 1, 1});
  const RtTensor per_channel = RtTensor::Allocate(DataType::kFloat, {32, 1, 1});
  const RtTensor full = RtTensor::Allocate(DataType::kFloat, logical);
  auto views = layouts::ElementwiseViews({&activation, &gate, &per_channel});
  REQUIRE(views);
  REQUIRE((*views)[0].dims() == std::vector<int64_t>{2, 5, 7, 32});
  REQUIRE((*views)[1].dims() == std::vector<int64_t>{2, 1, 1, 32});
  REQUIRE((*views)[2].dims() == std::vector<int64_t>{1, 1, 1, 32});
  REQUIRE_FALSE(layouts::ElementwiseViews({&activation, &full}));  // a row-major activation
  REQUIRE_FALSE(layouts::ElementwiseViews({&full, &gate}));        // nothing in a convolution layout
  RtTensor blocked = RtTensor::Allocate(DataType::kFloat, logical);
  blocked.set_layout(Layout::kBlocked8);
  REQUIRE_FALSE(layouts::ElementwiseViews({&activation, &blocked}));  // two layouts
}

TEST_CASE("Transpose reads channels-last activations through their physical view", "[cpu][layout]") {
  // ConvNeXt's block: depthwise Conv, permute to NHWC, a last-axis op, permute back, Conv;
  // and a permutation that swaps the spatial axes, which copies.
  const std::string text = kHeader + "graph main (float[2,16,6,6] %x) -> (float[2,16,6,6] %y, float[2,16,6,6] %z)\n" +
                           Init("float[16,1,3,3]", "wd", 16 * 9, 71) + Init("float[16]", "bias", 16, 72) +
                           Init("float[16,16,1,1]", "wp", 16 * 16, 73) + R"({
  %d = Conv(%x, %wd) {kernel_shape: [3, 3], pads: [1, 1, 1, 1], group: 16} @depthwise
  %t = Transpose(%d) {perm: [0, 2, 3, 1]} @to_nhwc
  %u = Add(%t, %bias) @last_axis
  %v = Transpose(%u) {perm: [0, 3, 1, 2]} @to_nchw
  %y = Conv(%v, %wp) {kernel_shape: [1, 1]} @pointwise
  %s = Transpose(%d) {perm: [0, 1, 3, 2]} @swap
  %z = Relu(%s) @relu
}
)";
  auto model = Parse(text);
  const std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {2, 16, 6, 6}, 74)}};
  Outcome handed_on = RunLayouts(*model, feeds, true);
  Outcome row_major = RunLayouts(*model, feeds, false);
  REQUIRE(handed_on.stats.conv_layout_outputs > 0);
  RequireIdentical(handed_on.outputs, row_major.outputs);
}
