// fold-scale-into-conv: Mul/Add by a per-output-channel constant after Conv / ConvTranspose /
// Gemm folded into weights and bias, numbers unchanged; broadcasts that are not per-channel and
// the other cases it must leave alone, with reasons.
#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "fold-scale-into-conv";

// A 1x1 Conv over 2 channels whose output is multiplied by `scale` (declared `scale_type`).
std::string ConvTimes(const std::string& scale_type, const std::string& scale_values, const std::string& input_type = "float[1,2,2,2]") {
  return R"(
ir_version 8
opset "" 17
graph main ()" + input_type + R"( %x) -> (float %y)
  init float[2,2,1,1] %w = [1.0, 2.0, 3.0, 4.0]
  init )" + scale_type + " %s = " + scale_values + R"(
{
  %c = Conv(%x, %w) @conv
  %y = Mul(%c, %s) @mul
}
)";
}

}  // namespace

TEST_CASE("fold-scale-into-conv folds Conv -> Mul [C,1,1] -> Add [1,C,1,1] into weights and bias", "[passes]") {
  auto statistics = ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x) -> (float[1,2,2,2] %y)
  init float[2,1,1,1] %w = [1.0, 2.0]
  init float[2] %b = [1.0, 1.0]
  init float[2,1,1] %s = [2.0, 3.0]
  init float[1,2,1,1] %a = [0.5, -1.0]
{
  %c = Conv(%x, %w, %b) @conv
  %m = Mul(%c, %s) @mul
  %y = Add(%a, %m) @add
}
)",
                                  kPass, R"(
ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x) -> (float[1,2,2,2] %y)
  init float[2,1,1,1] %w_folded = [2.0, 6.0]
  init float[2] %b_folded_1 = [2.5, 2.0]
{
  %y = Conv(%x, %w_folded, %b_folded_1) @conv
}
)");
  CHECK(statistics.Counter("muls_folded") == 1);
  CHECK(statistics.Counter("adds_folded") == 1);
}

TEST_CASE("fold-scale-into-conv creates the bias an Add needs, and takes scalars", "[passes]") {
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[1,2,2,2] %x) -> (float[1,2,2,2] %y)
  init float[2,2,1,1] %w = [1.0, 2.0, 3.0, 4.0]
  init float[] %s = [0.5]
  init float[1] %a = [3.0]
{
  %c = Conv(%x, %w) @conv
  %m = Mul(%s, %c) @mul
  %y = Add(%m, %a) @add
}
)",
                kPass, R"(
ir_version 8
opset "" 17
graph main (float[1,2,2,2] %x) -> (float[1,2,2,2] %y)
  init float[2,2,1,1] %w_folded = [0.5, 1.0, 1.5, 2.0]
  init float[2] %w_folded_bias = [3.0, 3.0]
{
  %y = Conv(%x, %w_folded, %w_folded_bias) @conv
}
)");
}

TEST_CASE("fold-scale-into-conv folds per-column constants after Gemm and per-channel ones after ConvTranspose",
          "[passes]") {
  ExpectRewriteOps(R"(
ir_version 8
opset "" 17
graph main (float[3,5] %a) -> (float[3,4] %y)
  init float[5,4] %b = )" + Spread(20, 1) + R"(
  init float[4] %c = )" + Spread(4, 2) + R"(
  init float[4] %s = )" + Spread(4, 3, 0.5, 2.0) + R"(
  init float[1,4] %t = )" + Spread(4, 4) + R"(
{
  %g = Gemm(%a, %b, %c) {beta: 0.25} @gemm
  %m = Mul(%g, %s) @mul
  %y = Add(%m, %t) @add
}
)",
                   kPass, {"Gemm"});
  ExpectRewriteOps(R"(
ir_version 8
opset "" 17
graph main (float[1,4,3,3] %x) -> (float[1,6,5,5] %y)
  init float[4,3,3,3] %w = )" + Spread(108, 5) + R"(
  init float[6,1,1] %s = )" + Spread(6, 6, 0.5, 2.0) + R"(
{
  %c = ConvTranspose(%x, %w) {group: 2} @deconv
  %y = Mul(%c, %s) @mul
}
)",
                   kPass, {"ConvTranspose"});
}

TEST_CASE("fold-scale-into-conv rejects constants that do not broadcast per channel", "[passes]") {
  // [C] against NCHW runs along W, not C (here C = W = 2, so it would even broadcast).
  ExpectUnchanged(ConvTimes("float[2]", "[2.0, 3.0]"), kPass, "constant is not per-channel");
  ExpectUnchanged(ConvTimes("float[1,2,2,1]", "[2.0, 3.0, 4.0, 5.0]"), kPass, "constant is not per-channel");
  ExpectUnchanged(ConvTimes("float[2,1,2,1,1]", "[2.0, 3.0, 4.0, 5.0]"), kPass, "constant raises the output's rank");
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[1,2,2,2] %x, float[2,1,1] %s) -> (float[1,2,2,2] %y)
  init float[2,2,1,1] %w = [1.0, 2.0, 3.0, 4.0]
{
  %c = Conv(%x, %w) @conv
  %y = Mul(%c, %s) @mul
}
)",
                  kPass, "non-constant operand");
}

TEST_CASE("fold-scale-into-conv leaves shared outputs, graph outputs, computed weights and old opsets", "[passes]") {
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[1,2,2,2] %x) -> (float[1,2,2,2] %y, float[1,2,2,2] %r)
  init float[2,2,1,1] %w = [1.0, 2.0, 3.0, 4.0]
  init float[2,1,1] %s = [2.0, 3.0]
{
  %c = Conv(%x, %w) @conv
  %y = Mul(%c, %s) @mul
  %r = Relu(%c) @relu
}
)",
                  kPass, "contraction output has other readers or is a graph output");
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[1,2,2,2] %x) -> (float[1,2,2,2] %y, float[1,2,2,2] %c)
  init float[2,2,1,1] %w = [1.0, 2.0, 3.0, 4.0]
  init float[2,1,1] %s = [2.0, 3.0]
{
  %c = Conv(%x, %w) @conv
  %y = Mul(%c, %s) @mul
}
)",
                  kPass, "contraction output has other readers or is a graph output");
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[1,2,2,2] %x, float[2,2,1,1] %w) -> (float[1,2,2,2] %y)
  init float[2,1,1] %s = [2.0, 3.0]
{
  %c = Conv(%x, %w) @conv
  %y = Mul(%c, %s) @mul
}
)",
                  kPass, "non-constant weights");
  ExpectUnchanged(R"(
ir_version 8
opset "" 6
graph main (float[1,2,2,2] %x) -> (float[1,2,2,2] %y)
  init float[2,2,1,1] %w = [1.0, 2.0, 3.0, 4.0]
  init float[2,1,1] %s = [2.0, 3.0]
{
  %c = Conv(%x, %w) @conv
  %y = Mul(%c, %s) {broadcast: 1, axis: 1} @mul
}
)",
                  kPass, "Mul/Add before opset 7");
}

TEST_CASE("fold-scale-into-conv refuses to materialise a big splat weight", "[passes]") {
  const std::string text = R"(
ir_version 8
opset "" 17
graph main (float[1,2,2,2] %x) -> (float[1,2,2,2] %y)
  init int64[4] %shape = [2, 2, 1, 1]
  init float[2,1,1] %s = [2.0, 3.0]
{
  %w = ConstantOfShape(%shape) {value: tensor float[1] [0.5]} @fill
  %c = Conv(%x, %w) @conv
  %y = Mul(%c, %s) @mul
}
)";
  ExpectUnchanged(text, kPass, "splat weights would grow beyond max-bytes", {{"max-bytes", "15"}});
  ExpectRewrite(text, kPass, R"(
ir_version 8
opset "" 17
graph main (float[1,2,2,2] %x) -> (float[1,2,2,2] %y)
  init float[2,2,1,1] %w_folded = [1.0, 1.0, 1.5, 1.5]
{
  %y = Conv(%x, %w_folded) @conv
}
)");
}
