// fold-batchnorm: inference BatchNormalization folded into Conv / ConvTranspose / Gemm / 2-D
// MatMul weights and bias, numbers unchanged; the cases it must leave alone, with reasons.
#include "pass_harness.h"

#include "ir/float16.h"
#include "passes/util/constant_operand.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "fold-batchnorm";

// Statistics over `channels` channels with varied, positive variances.
std::string Statistics(int channels, int seed) {
  return "  init float[" + std::to_string(channels) + "] %gamma = " + Spread(channels, seed, 0.5, 2.0) + "\n" +
         "  init float[" + std::to_string(channels) + "] %beta = " + Spread(channels, seed + 1) + "\n" +
         "  init float[" + std::to_string(channels) + "] %mean = " + Spread(channels, seed + 2) + "\n" +
         "  init float[" + std::to_string(channels) + "] %var = " + Spread(channels, seed + 3, 0.1, 3.0) + "\n";
}

}  // namespace

TEST_CASE("fold-batchnorm folds into Conv weights and bias: W' = W*s, b' = (b - mean)*s + beta", "[passes]") {
  // s = gamma / sqrt(var) = [0.5, 6]; b' = (b - mean) * s + beta = [0, -12].
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[1,1,3,3] %x) -> (float[1,2,2,2] %y)
  init float[2,1,2,2] %w = [1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.25, 2.0]
  init float[2] %b = [1.0, -1.0]
  init float[2] %gamma = [1.0, 3.0]
  init float[2] %beta = [0.5, 0.0]
  init float[2] %mean = [2.0, 1.0]
  init float[2] %var = [4.0, 0.25]
{
  %c = Conv(%x, %w, %b) {kernel_shape: [2, 2]} @conv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon: 0.0} @bn
}
)",
                kPass, R"(
ir_version 8
opset "" 17
graph main (float[1,1,3,3] %x) -> (float[1,2,2,2] %y)
  init float[2,1,2,2] %w_folded = [0.5, 1.0, 1.5, 2.0, -6.0, 3.0, 1.5, 12.0]
  init float[2] %b_folded = [0.0, -12.0]
{
  %y = Conv(%x, %w_folded, %b_folded) {kernel_shape: [2, 2]} @conv
}
)");
}

TEST_CASE("fold-batchnorm: grouped, strided Conv without bias, default epsilon", "[passes]") {
  ExpectRewriteOps(R"(
ir_version 8
opset "" 17
graph main (float[2,4,7,7] %x) -> (float[2,6,4,4] %y)
  init float[6,2,3,3] %w = )" + Spread(108, 1) + "\n" + Statistics(6, 2) + R"({
  %c = Conv(%x, %w) {group: 2, kernel_shape: [3, 3], pads: [1, 1, 1, 1], strides: [2, 2]} @conv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) @bn
}
)",
                   kPass, {"Conv"});
}

TEST_CASE("fold-batchnorm scales a grouped ConvTranspose per output channel of each group", "[passes]") {
  // Weights [C_in=2, M/group=2, 1, 1], group 2: W[c, j] feeds output channel c*2 + j, so
  // W' = W * s[c*2 + j] = [1*1, 2*2, 3*3, 4*4]; the shift -mean*s = [-1, 0, 0, 0] makes a bias.
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[1,2,2,2] %x) -> (float[1,4,2,2] %y)
  init float[2,2,1,1] %w = [1.0, 2.0, 3.0, 4.0]
  init float[4] %gamma = [1.0, 2.0, 3.0, 4.0]
  init float[4] %beta = [0.0, 0.0, 0.0, 0.0]
  init float[4] %mean = [1.0, 0.0, 0.0, 0.0]
  init float[4] %var = [1.0, 1.0, 1.0, 1.0]
{
  %c = ConvTranspose(%x, %w) {group: 2} @deconv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon: 0.0} @bn
}
)",
                kPass, R"(
ir_version 8
opset "" 17
graph main (float[1,2,2,2] %x) -> (float[1,4,2,2] %y)
  init float[2,2,1,1] %w_folded = [1.0, 4.0, 9.0, 16.0]
  init float[4] %w_bias = [-1.0, 0.0, 0.0, 0.0]
{
  %y = ConvTranspose(%x, %w_folded, %w_bias) {group: 2} @deconv
}
)");
  ExpectRewriteOps(R"(
ir_version 8
opset "" 17
graph main (float[1,4,5,5] %x) -> (float[1,6,11,11] %y)
  init float[4,3,3,3] %w = )" + Spread(108, 3) + R"(
  init float[6] %b = )" + Spread(6, 4) + "\n" + Statistics(6, 5) + R"({
  %c = ConvTranspose(%x, %w, %b) {group: 2, strides: [2, 2]} @deconv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon: 0.001} @bn
}
)",
                   kPass, {"ConvTranspose"});
}

TEST_CASE("fold-batchnorm folds into Gemm (both transB) and keeps alpha, folding beta into C", "[passes]") {
  // s = [2, 0.5], shift = beta - mean*s = [1, -1]; B' scales columns; C' = 2*C*s + shift.
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %a) -> (float[2,2] %y)
  init float[3,2] %b = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
  init float[2] %c = [1.0, 1.0]
  init float[2] %gamma = [2.0, 0.5]
  init float[2] %beta = [1.0, 0.0]
  init float[2] %mean = [0.0, 2.0]
  init float[2] %var = [1.0, 1.0]
{
  %g = Gemm(%a, %b, %c) {alpha: 0.5, beta: 2.0} @gemm
  %y = BatchNormalization(%g, %gamma, %beta, %mean, %var) {epsilon: 0.0} @bn
}
)",
                kPass, R"(
ir_version 8
opset "" 17
graph main (float[2,3] %a) -> (float[2,2] %y)
  init float[3,2] %b_folded = [2.0, 1.0, 6.0, 2.0, 10.0, 3.0]
  init float[2] %c_folded = [5.0, 0.0]
{
  %y = Gemm(%a, %b_folded, %c_folded) {alpha: 0.5, beta: 1.0} @gemm
}
)");
  ExpectRewriteOps(R"(
ir_version 8
opset "" 17
graph main (float[3,5] %a) -> (float[3,4] %y)
  init float[4,5] %b = )" + Spread(20, 6) + R"(
  init float[3,4] %c = )" + Spread(12, 7) + "\n" + Statistics(4, 8) + R"({
  %g = Gemm(%a, %b, %c) {transB: 1, beta: 0.5} @gemm
  %y = BatchNormalization(%g, %gamma, %beta, %mean, %var) @bn
}
)",
                   kPass, {"Gemm"});
}

TEST_CASE("fold-batchnorm turns a 2-D MatMul + BatchNormalization into a Gemm", "[passes]") {
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[2,2] %a) -> (float[2,2] %y)
  init float[2,2] %w = [1.0, 2.0, 3.0, 4.0]
  init float[2] %gamma = [2.0, 1.0]
  init float[2] %beta = [0.0, 1.0]
  init float[2] %mean = [1.0, 0.0]
  init float[2] %var = [1.0, 1.0]
{
  %m = MatMul(%a, %w) @matmul
  %y = BatchNormalization(%m, %gamma, %beta, %mean, %var) {epsilon: 0.0} @bn
}
)",
                kPass, R"(
ir_version 8
opset "" 17
graph main (float[2,2] %a) -> (float[2,2] %y)
  init float[2,2] %w_folded = [2.0, 2.0, 6.0, 4.0]
  init float[2] %w_bias = [-2.0, 1.0]
{
  %y = Gemm(%a, %w_folded, %w_bias) @matmul
}
)");
}

TEST_CASE("fold-batchnorm makes new weights when the old ones are shared", "[passes]") {
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x) -> (float[1,1,2,2] %y, float[1,1,2,2] %z)
  init float[1,1,1,1] %w = [2.0]
  init float[1] %gamma = [3.0]
  init float[1] %beta = [0.0]
  init float[1] %mean = [0.0]
  init float[1] %var = [1.0]
{
  %c = Conv(%x, %w) @conv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon: 0.0} @bn
  %z = Conv(%x, %w) @other
}
)",
                kPass, R"(
ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x) -> (float[1,1,2,2] %y, float[1,1,2,2] %z)
  init float[1,1,1,1] %w = [2.0]
  init float[1,1,1,1] %w_folded = [6.0]
{
  %y = Conv(%x, %w_folded) @conv
  %z = Conv(%x, %w) @other
}
)");
}

TEST_CASE("fold-batchnorm keeps a splat weight a splat when every channel scales alike", "[passes]") {
  const std::string prefix = R"(
ir_version 8
opset "" 17
graph main (float[1,2,3,3] %x) -> (float[1,2,3,3] %y)
  init int64[4] %shape = [2, 2, 1, 1]
  init float[2] %beta = [0.0, 0.0]
  init float[2] %mean = [0.0, 0.0]
  init float[2] %var = [1.0, 1.0]
)";
  const std::string body = R"({
  %w = ConstantOfShape(%shape) {value: tensor float[1] [0.5]} @fill
  %c = Conv(%x, %w) @conv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon: 0.0} @bn
}
)";
  ExpectRewrite(prefix + "  init float[2] %gamma = [3.0, 3.0]\n" + body, kPass, R"(
ir_version 8
opset "" 17
graph main (float[1,2,3,3] %x) -> (float[1,2,3,3] %y)
  init int64[4] %shape = [2, 2, 1, 1]
{
  %w = ConstantOfShape(%shape) {value: tensor float[1] [1.5]} @fill
  %y = Conv(%x, %w) @conv
}
)");
  // Scales differing per channel materialise the splat — up to max-bytes.
  const std::string differing = prefix + "  init float[2] %gamma = [3.0, 2.0]\n" + body;
  ExpectRewrite(differing, kPass, R"(
ir_version 8
opset "" 17
graph main (float[1,2,3,3] %x) -> (float[1,2,3,3] %y)
  init float[2,2,1,1] %w_folded = [1.5, 1.5, 1.0, 1.0]
{
  %y = Conv(%x, %w_folded) @conv
}
)");
  ExpectUnchanged(differing, kPass, "splat weights would grow beyond max-bytes", {{"max-bytes", "8"}});
}

TEST_CASE("fold-batchnorm computes float16 weights in double and rounds once", "[passes]") {
  // 1 + 2^-11 + 2^-40 lies just above the midpoint of two halves: through float it would land
  // exactly on the midpoint and round (to even) down to 1.
  TensorPtr rounded = MakeFloatingTensor(DataType::kFloat16, {1}, {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)});
  CHECK(HalfToFloat(rounded->values<uint16_t>()[0]) == 1.0F + std::ldexp(1.0F, -10));
  TensorPtr bf16 = MakeFloatingTensor(DataType::kBFloat16, {1}, {1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)});
  CHECK(BFloat16ToFloat(bf16->values<uint16_t>()[0]) == 1.0F + std::ldexp(1.0F, -7));

  auto folded = ExpectRewriteOps(R"(
ir_version 8
opset "" 17
graph main (float16[1,3,4,4] %x) -> (float16[1,4,4,4] %y)
  init float16[4,3,1,1] %w = )" + Spread(12, 9) +
                                     R"(
  init float16[4] %gamma = )" + Spread(4, 10, 0.5, 2.0) +
                                     R"(
  init float16[4] %beta = )" + Spread(4, 11) +
                                     R"(
  init float16[4] %mean = )" + Spread(4, 12) +
                                     R"(
  init float16[4] %var = )" + Spread(4, 13, 0.1, 3.0) +
                                     R"(
{
  %c = Conv(%x, %w) @conv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) @bn
}
)",
                                 kPass, {"Conv"}, {.numbers = {.tolerance = {2e-2, 1e-2}}})
                    .model;
  const Node& conv = *folded->graph->nodes().front();
  CHECK(conv.input(1)->initializer()->dtype() == DataType::kFloat16);
  CHECK(conv.input(2)->initializer()->dtype() == DataType::kFloat16);
}

TEST_CASE("fold-batchnorm leaves a contraction output that is read twice or is a graph output", "[passes]") {
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x) -> (float[1,1,2,2] %y, float[1,1,2,2] %r)
  init float[1,1,1,1] %w = [2.0]
  init float[1] %gamma = [3.0]
  init float[1] %beta = [0.0]
  init float[1] %mean = [0.0]
  init float[1] %var = [1.0]
{
  %c = Conv(%x, %w) @conv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) @bn
  %r = Relu(%c) @relu
}
)",
                  kPass, "contraction output has other readers or is a graph output");
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x) -> (float[1,1,2,2] %y, float[1,1,2,2] %c)
  init float[1,1,1,1] %w = [2.0]
  init float[1] %gamma = [3.0]
  init float[1] %beta = [0.0]
  init float[1] %mean = [0.0]
  init float[1] %var = [1.0]
{
  %c = Conv(%x, %w) @conv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) @bn
}
)",
                  kPass, "contraction output has other readers or is a graph output");
}

TEST_CASE("fold-batchnorm needs constant weights and statistics", "[passes]") {
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x, float[1,1,1,1] %w) -> (float[1,1,2,2] %y)
  init float[1] %gamma = [3.0]
  init float[1] %beta = [0.0]
  init float[1] %mean = [0.0]
  init float[1] %var = [1.0]
{
  %c = Conv(%x, %w) @conv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) @bn
}
)",
                  kPass, "non-constant weights");
  // An initializer that is also a graph input (IR >= 4) can be fed: not a constant.
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x, float[1] %gamma) -> (float[1,1,2,2] %y)
  init float[1,1,1,1] %w = [2.0]
  init float[1] %gamma = [3.0]
  init float[1] %beta = [0.0]
  init float[1] %mean = [0.0]
  init float[1] %var = [1.0]
{
  %c = Conv(%x, %w) @conv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) @bn
}
)",
                  kPass, "non-constant statistics");
}

TEST_CASE("fold-batchnorm leaves training mode, old opsets, spatial=0 and batched MatMul", "[passes]") {
  const std::string stats = R"(
  init float[1,1,1,1] %w = [2.0]
  init float[1] %gamma = [3.0]
  init float[1] %beta = [0.0]
  init float[1] %mean = [0.0]
  init float[1] %var = [1.0]
)";
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x) -> (float[1,1,2,2] %y, float[1] %m, float[1] %v))" + stats + R"({
  %c = Conv(%x, %w) @conv
  %y, %m, %v = BatchNormalization(%c, %gamma, %beta, %mean, %var) {training_mode: 1} @bn
}
)",
                  kPass, "training mode");
  ExpectUnchanged(R"(
ir_version 8
opset "" 6
graph main (float[1,1,2,2] %x) -> (float[1,1,2,2] %y))" + stats + R"({
  %c = Conv(%x, %w) @conv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) @bn
}
)",
                  kPass, "BatchNormalization opset outside 7-28");
  ExpectUnchanged(R"(
ir_version 8
opset "" 8
graph main (float[1,1,2,2] %x) -> (float[1,1,2,2] %y))" + stats + R"({
  %c = Conv(%x, %w) @conv
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) {spatial: 0} @bn
}
)",
                  kPass, "spatial=0 (per-activation statistics)");
  // BatchNormalization normalizes axis 1; for a [B, S, N] MatMul output that is S, not the
  // weight's columns.
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2,3,4] %a) -> (float[2,3,2] %y)
  init float[4,2] %w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
  init float[3] %gamma = [1.0, 2.0, 3.0]
  init float[3] %beta = [0.0, 0.0, 0.0]
  init float[3] %mean = [0.0, 0.0, 0.0]
  init float[3] %var = [1.0, 1.0, 1.0]
{
  %m = MatMul(%a, %w) @matmul
  %y = BatchNormalization(%m, %gamma, %beta, %mean, %var) @bn
}
)",
                  kPass, "A is not known to be 2-D");
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x) -> (float[1,1,2,2] %y))" + stats + R"({
  %c = Relu(%x) @relu
  %y = BatchNormalization(%c, %gamma, %beta, %mean, %var) @bn
}
)",
                  kPass, "not after a contraction it folds into");
}

TEST_CASE("fold-batchnorm folds inside a subgraph, reading statistics of the enclosing graph", "[passes]") {
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x, bool[] %cond) -> (float[1,1,2,2] %y)
  init float[1,1,1,1] %w = [2.0]
  init float[1] %gamma = [3.0]
  init float[1] %beta = [1.0]
  init float[1] %mean = [0.0]
  init float[1] %var = [1.0]
{
  %y = If(%cond) {then_branch: graph then_body () -> (float[1,1,2,2] %t) {
    %c = Conv(%x, %w)
    %t = BatchNormalization(%c, %gamma, %beta, %mean, %var) {epsilon: 0.0}
  }, else_branch: graph else_body () -> (float[1,1,2,2] %e) {
    %e = Relu(%x)
  }} @if
}
)",
                kPass, R"(
ir_version 8
opset "" 17
graph main (float[1,1,2,2] %x, bool[] %cond) -> (float[1,1,2,2] %y)
{
  %y = If(%cond) {then_branch: graph then_body () -> (float[1,1,2,2] %t)
    init float[1,1,1,1] %w_folded = [6.0]
    init float[1] %w_bias = [1.0]
  {
    %t = Conv(%x, %w_folded, %w_bias)
  }, else_branch: graph else_body () -> (float[1,1,2,2] %e) {
    %e = Relu(%x)
  }} @if
}
)");
}
