// merge-summed-contractions: convolutions of one input whose outputs are summed (four 3×3s of a
// detector block; RepVGG's 3×3 + 1×1 + identity) and matrix products summed become one
// contraction with the summed weights and the same numbers; branches that do not line up
// (other strides, a 1×1 off the 3×3's centre, an even kernel, an output read elsewhere) stay.
#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "merge-summed-contractions";

// Convolutions of %x [1,4,6,6] into 4 channels; `convs` their lines, `sum` the nodes adding them.
std::string Branches(const std::string& convs, const std::string& sum) {
  return R"(ir_version 8
opset "" 17
graph main (float[1,4,6,6] %x) -> (float %y)
  init float[4,4,3,3] %w0 = )" + Spread(144, 1) + R"(
  init float[4,4,3,3] %w1 = )" + Spread(144, 2) + R"(
  init float[4,4,3,3] %w2 = )" + Spread(144, 3) + R"(
  init float[4,4,3,3] %w3 = )" + Spread(144, 4) + R"(
  init float[4,4,1,1] %p = )" + Spread(16, 5) + R"(
  init float[4,4,2,2] %e = )" + Spread(64, 6) + R"(
  init float[4] %b0 = [0.5, -0.5, 0.25, 0.0]
  init float[4] %b1 = [0.125, 0.25, -1.0, 2.0]
{
)" + convs + sum + "}\n";
}

const std::string kFourConvs = R"(  %c0 = Conv(%x, %w0, %b0) {pads: [1, 1, 1, 1]} @conv0
  %c1 = Conv(%x, %w1, %b1) {pads: [1, 1, 1, 1]} @conv1
  %c2 = Conv(%x, %w2) {pads: [1, 1, 1, 1]} @conv2
  %c3 = Conv(%x, %w3) {pads: [1, 1, 1, 1]} @conv3
)";

}  // namespace

TEST_CASE("merge-summed-contractions: four 3x3 convolutions summed are one", "[passes]") {
  // A Sum of four, and the same as a chain of Adds.
  auto model = ExpectRewriteOps(Branches(kFourConvs, "  %y = Sum(%c0, %c1, %c2, %c3) @sum\n"), kPass, {"Conv"}).model;
  const Node& conv = *model->graph->nodes().front();
  CHECK(conv.input(1)->shape() == Shape{Dim::Known(4), Dim::Known(4), Dim::Known(3), Dim::Known(3)});
  CHECK(conv.output(0)->name() == "y");
  ExpectRewriteOps(Branches(kFourConvs, "  %s0 = Add(%c0, %c1) @add0\n  %s1 = Add(%c2, %s0) @add1\n"
                                        "  %y = Add(%s1, %c3) @add2\n"),
                   kPass, {"Conv"});
  Rewritten rewritten = Rewrite(Branches(kFourConvs, "  %y = Sum(%c0, %c1, %c2, %c3) @sum\n"), kPass);
  CHECK(rewritten.Counter("branches_merged") == 4);
}

TEST_CASE("merge-summed-contractions: RepVGG's 3x3, 1x1 and identity branches are one 3x3", "[passes]") {
  const std::string convs = R"(  %c0 = Conv(%x, %w0, %b0) {pads: [1, 1, 1, 1], kernel_shape: [3, 3]} @conv3x3
  %c1 = Conv(%x, %p, %b1) {pads: [0, 0, 0, 0]} @conv1x1
)";
  auto model =
      ExpectRewriteOps(Branches(convs, "  %s = Add(%c0, %c1) @add0\n  %y = Add(%s, %x) @add1\n"), kPass, {"Conv"})
          .model;
  const Node& conv = *model->graph->nodes().front();
  CHECK(conv.GetInts("pads") == std::vector<int64_t>{1, 1, 1, 1});
  CHECK(conv.GetInts("kernel_shape") == std::vector<int64_t>{3, 3});
  Rewritten rewritten = Rewrite(Branches(convs, "  %s = Add(%c0, %c1) @add0\n  %y = Add(%s, %x) @add1\n"), kPass);
  CHECK(rewritten.Counter("branches_merged") == 3);  // the identity counts as a branch
}

TEST_CASE("merge-summed-contractions: what joins nothing stays an addend", "[passes]") {
  // conv1 pads asymmetrically (its windows start a row earlier): the same output size, but
  // not the others' windows. It is added to the merged conv0 + conv2 (the defaults written out).
  const std::string convs = R"(  %c0 = Conv(%x, %w0) {pads: [1, 1, 1, 1]} @conv0
  %c1 = Conv(%x, %w1) {pads: [2, 1, 0, 1]} @conv1
  %c2 = Conv(%x, %w2) {pads: [1, 1, 1, 1], dilations: [1, 1], strides: [1, 1]} @conv2
)";
  ExpectRewriteOps(Branches(convs, "  %y = Sum(%c0, %c1, %c2) @sum\n"), kPass, {"Conv", "Conv", "Add"});
}

TEST_CASE("merge-summed-contractions: branches that do not line up stay", "[passes]") {
  // Another stride (the sum broadcasts the 3x3 output of the strided one over the 6x6).
  const std::string strided = R"(  %c0 = Conv(%x, %w0) {pads: [1, 1, 1, 1], strides: [6, 6]} @conv0
  %c1 = Conv(%x, %w1) {pads: [1, 1, 1, 1]} @conv1
)";
  ExpectUnchanged(Branches(strided, "  %y = Add(%c0, %c1) @add\n"), kPass, "");
  // An even kernel: growing it to the other's size needs an off-centre pad.
  const std::string even = R"(  %c0 = Conv(%x, %e) {pads: [0, 0, 1, 1]} @conv0
  %c1 = Conv(%x, %w1) {pads: [0, 0, 2, 2]} @conv1
)";
  ExpectUnchanged(Branches(even, "  %y = Add(%c0, %c1) @add\n"), kPass, "");
  // An output read elsewhere keeps its convolution.
  std::string read = Branches(kFourConvs, "  %y = Sum(%c0, %c1, %c2, %c3) @sum\n  %z = Relu(%c3) @relu\n");
  read.replace(read.find("-> (float %y)"), 13, "-> (float %y, float %z)");
  ExpectRewriteOps(read, kPass, {"Conv", "Relu", "Conv", "Add"});
}

TEST_CASE("merge-summed-contractions: matrix products of one input summed are one", "[passes]") {
  const std::string text = R"(ir_version 8
opset "" 17
graph main (float[2,5,4] %x) -> (float %y)
  init float[4,3] %a = )" + Spread(12, 1) + R"(
  init float[4,3] %b = )" + Spread(12, 2) + R"(
  init float[3] %bias = [0.5, -0.5, 0.25]
{
  %ma = MatMul(%x, %a) @matmul_a
  %mb = MatMul(%x, %b) @matmul_b
  %s = Add(%ma, %bias) @bias
  %y = Add(%s, %mb) @sum
}
)";
  ExpectRewriteOps(text, kPass, {"MatMul", "Add"});
}

namespace {

// RepVGG / MobileOne as exported: the identity branch is a BatchNormalization of the input.
std::string WithIdentityBatchNorm(const std::string& batchnorm) {
  std::string text = Branches(R"(  %c0 = Conv(%x, %w0, %b0) {pads: [1, 1, 1, 1], kernel_shape: [3, 3]} @conv3x3
  %c1 = Conv(%x, %p, %b1) {pads: [0, 0, 0, 0]} @conv1x1
)" + batchnorm, "  %s = Add(%c0, %c1) @add0\n  %y = Add(%s, %n) @add1\n");
  text.replace(text.find("{\n"), 2, R"(  init float[4] %gamma = [0.5, 1.25, -0.75, 2.0]
  init float[4] %beta = [0.125, -0.25, 0.5, 0.0]
  init float[4] %mean = [0.25, -0.5, 0.0, 1.5]
  init float[4] %var = [1.0, 0.5, 2.0, 0.25]
{
)");
  return text;
}

}  // namespace

TEST_CASE("merge-summed-contractions: an identity BatchNormalization joins as a scaled identity kernel", "[passes]") {
  const std::string text =
      WithIdentityBatchNorm("  %n = BatchNormalization(%x, %gamma, %beta, %mean, %var) {epsilon: 0.001} @bn\n");
  auto model = ExpectRewriteOps(text, kPass, {"Conv"}).model;
  const Node& conv = *model->graph->nodes().front();
  CHECK(conv.inputs().size() == 3);  // the BatchNormalization's shift is in the bias
  CHECK(conv.GetInts("pads") == std::vector<int64_t>{1, 1, 1, 1});
  Rewritten rewritten = Rewrite(text, kPass);
  CHECK(rewritten.Counter("branches_merged") == 3);
  for (const char* statistic : {"gamma", "beta", "mean", "var"}) {  // folded away
    CHECK(rewritten.model->graph->FindValue(statistic) == nullptr);
  }
}

TEST_CASE("merge-summed-contractions: an identity BatchNormalization that does not fold stays an addend", "[passes]") {
  // Training mode: its output is normalized by the batch's own statistics, not a fixed map.
  std::string training = WithIdentityBatchNorm(
      "  %n = BatchNormalization(%x, %gamma, %beta, %mean, %var) {training_mode: 1} @bn\n");
  Rewritten rewritten = Rewrite(training, kPass);
  CHECK(OpTypes(*rewritten.model->graph) == std::vector<std::string>{"BatchNormalization", "Conv", "Add"});
  CHECK(rewritten.run.Rejections("identity branch: training mode") == 1);
  // Statistics fed at run time are not constants.
  std::string fed = WithIdentityBatchNorm("  %n = BatchNormalization(%x, %gamma, %beta, %mean, %v) @bn\n");
  fed.replace(fed.find("(float[1,4,6,6] %x)"), 19, "(float[1,4,6,6] %x, float[4] %v)");
  rewritten = Rewrite(fed, kPass);
  CHECK(OpTypes(*rewritten.model->graph) == std::vector<std::string>{"BatchNormalization", "Conv", "Add"});
  CHECK(rewritten.run.Rejections("identity branch: non-constant statistics") == 1);
  // A BatchNormalization of another value is no identity branch (and not reported as one).
  CHECK(ExpectUnchanged(WithIdentityBatchNorm("  %n = BatchNormalization(%c1, %gamma, %beta, %mean, %var) @bn\n"), kPass, "")
            .statistics.rejections.empty());
}
