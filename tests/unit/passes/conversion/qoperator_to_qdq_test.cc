// qoperator-to-qdq: onnxruntime's QOperator ops become their QDQ units, to the output's
// quantization step; what cannot expand stays, with its reason.
#include <catch2/catch.hpp>

#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "qoperator-to-qdq";

std::string QOperatorModel(const std::string& graph) {
  return "ir_version 10\nopset \"\" 21\nopset \"com.microsoft\" 1\n" + graph;
}

// A uint8 output within one quantization step of the original's (a float op and a rounding
// may land a tie on the other side).
SameNumbers WithinOneStep() { return {.dims = kEveryOpenDimOne, .tolerance = {0.0, 1.0}}; }

}  // namespace

TEST_CASE("qoperator-to-qdq: QLinearConv with per-channel weights and a bias, QLinearAdd, QLinearSigmoid",
          "[passes][quantized]") {
  const std::string text = QOperatorModel(R"(
graph g (uint8[1,2,4,4] %x, uint8[1,3,4,4] %r) -> (uint8[1,3,4,4] %y)
  init float[] %xs = [0.05]
  init uint8[] %xz = [128]
  init int8[3,2,1,1] %w = [10, -20, 30, 40, -50, 60]
  init float[3] %ws = [0.01, 0.02, 0.03]
  init int8[3] %wz = [0, 0, 0]
  init int32[3] %b = [100, -200, 300]
  init float[] %cs = [0.04]
  init uint8[] %cz = [120]
  init float[] %rs = [0.06]
  init uint8[] %rz = [130]
  init float[] %as = [0.08]
  init uint8[] %az = [125]
  init float[] %ys = [0.004]
{
  %c = QLinearConv(%x, %xs, %xz, %w, %ws, %wz, %cs, %cz, %b) @conv
  %a = com.microsoft::QLinearAdd(%c, %cs, %cz, %r, %rs, %rz, %as, %az) @add
  %y = com.microsoft::QLinearSigmoid(%a, %as, %az, %ys) @sigmoid
}
)");
  Rewritten rewritten = ExpectRewriteOps(text, kPass,
                                         {"DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Conv",
                                          "QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "Add",
                                          "QuantizeLinear", "DequantizeLinear", "Sigmoid", "QuantizeLinear"},
                                         {.numbers = WithinOneStep()});
  CHECK(rewritten.Counter("expanded_Conv") == 1);
  CHECK(rewritten.Counter("expanded_Sigmoid") == 1);
}

TEST_CASE("qoperator-to-qdq: QGemm with alpha, transposed per-row weights and an int32 C; float and int8 outputs",
          "[passes][quantized]") {
  // Without y_scale QGemm writes float: the expansion ends at the Gemm. The int8 QLinearMul
  // omits its output zero point: the QuantizeLinear must still write int8. C is added before
  // alpha scales the sum: its dequantization scale is alpha·as·bs (2.5 off were alpha left out).
  const std::string text = QOperatorModel(R"(
graph g (uint8[2,3] %a, int8[2,2] %m) -> (float[2,2] %f, uint8[2,2] %q, int8[2,2] %p)
  init float[] %as = [0.5]
  init uint8[] %az = [2]
  init int8[2,3] %b = [1, -2, 3, 4, 5, -6]
  init float[2] %bs = [0.25, 0.125]
  init int8[2] %bz = [0, 0]
  init int32[2] %c = [40, -40]
  init float[] %ys = [0.1]
  init uint8[] %yz = [50]
  init float[] %ms = [0.5]
  init float[] %ps = [0.3]
{
  %f = com.microsoft::QGemm(%a, %as, %az, %b, %bs, %bz, %c) {transB: 1, alpha: 2.0} @float_gemm
  %q = com.microsoft::QGemm(%a, %as, %az, %b, %bs, %bz, %c, %ys, %yz) {transB: 1, alpha: 2.0} @gemm
  %p = com.microsoft::QLinearMul(%m, %ms, , %m, %ms, , %ps, ) @mul
}
)");
  const std::vector<std::string> expanded = {"DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Gemm",
                                            "DequantizeLinear", "DequantizeLinear", "DequantizeLinear", "Gemm",
                                            "QuantizeLinear", "DequantizeLinear", "DequantizeLinear", "Mul",
                                            "QuantizeLinear"};
  // The 8-bit outputs within one step; the float one as a float Gemm computes it.
  ExpectRewriteOps(text, kPass, expanded, {.numbers = WithinOneStep()});
  std::string float_only = text;
  const std::string outputs = "-> (float[2,2] %f, uint8[2,2] %q, int8[2,2] %p)";
  float_only.replace(float_only.find(outputs), outputs.size(), "-> (float[2,2] %f)");
  ExpectRewriteOps(float_only, kPass, expanded, {.numbers = {.dims = kEveryOpenDimOne, .tolerance = {1e-5, 1e-5}}});
}

TEST_CASE("qoperator-to-qdq: a product of two activations and a computed scale stay, with their reasons",
          "[passes][quantized]") {
  ExpectUnchanged(QOperatorModel(R"(
graph g (uint8[2,3] %a, uint8[3,2] %b) -> (uint8[2,2] %y)
  init float[] %s = [0.5]
  init uint8[] %z = [128]
{
  %y = QLinearMatMul(%a, %s, %z, %b, %s, %z, %s, %z)
}
)"),
                  kPass, "its weights are not a constant (no integer kernel takes two activations)");
  ExpectUnchanged(QOperatorModel(R"(
graph g (uint8[2,3] %a, float[] %s) -> (uint8[2,3] %y)
  init uint8[] %z = [128]
{
  %y = com.microsoft::QLinearSigmoid(%a, %s, %z, %s, %z)
}
)"),
                  kPass, "a scale is not a constant");
}

TEST_CASE("qoperator-to-qdq: QLinearMatMul by batched per-column weights, and QLinearLeakyRelu", "[passes][quantized]") {
  // B [2, 3, 2] with one scale per column: the DequantizeLinear's axis is B's last (2), not 1.
  const std::string text = QOperatorModel(R"(
graph g (uint8[2,4,3] %a) -> (uint8[2,4,2] %y)
  init float[] %as = [0.05]
  init uint8[] %az = [128]
  init int8[2,3,2] %b = [10, -20, 30, 40, -50, 60, 70, -80, 90, 100, -110, 120]
  init float[2] %bs = [0.01, 0.03]
  init int8[2] %bz = [0, 0]
  init float[] %ms = [0.2]
  init uint8[] %mz = [100]
  init float[] %ys = [0.15]
  init uint8[] %yz = [90]
{
  %m = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %ms, %mz) @matmul
  %y = com.microsoft::QLinearLeakyRelu(%m, %ms, %mz, %ys, %yz) {alpha: 0.1} @leaky
}
)");
  Rewritten rewritten = ExpectRewriteOps(text, kPass,
                                         {"DequantizeLinear", "DequantizeLinear", "MatMul", "QuantizeLinear",
                                          "DequantizeLinear", "LeakyRelu", "QuantizeLinear"},
                                         {.numbers = WithinOneStep()});
  const Node& weights = **std::next(rewritten.model->graph->nodes().begin());
  CHECK(weights.GetInt("axis", -1) == 2);
}

TEST_CASE("qoperator-to-qdq: a per-axis activation scale, and per-channel weights below opset 13, stay",
          "[passes][quantized]") {
  ExpectUnchanged(QOperatorModel(R"(
graph g (uint8[2,3] %a, uint8[2,3] %b) -> (uint8[2,3] %y)
  init float[3] %s = [0.5, 0.25, 0.125]
  init float[] %t = [0.5]
  init uint8[] %z = [128]
{
  %y = com.microsoft::QLinearAdd(%a, %s, %z, %b, %t, %z, %t, %z)
}
)"),
                  kPass, "a per-axis activation scale");
  ExpectUnchanged(R"(
ir_version 7
opset "" 12
graph g (uint8[2,3] %a) -> (uint8[2,2] %y)
  init float[] %as = [0.5]
  init uint8[] %az = [128]
  init int8[3,2] %b = [1, -2, 3, 4, 5, -6]
  init float[2] %bs = [0.25, 0.125]
  init int8[2] %bz = [0, 0]
{
  %y = QLinearMatMul(%a, %as, %az, %b, %bs, %bz, %as, %az)
}
)",
                  kPass, "a per-channel scale needs opset 13 (DequantizeLinear's axis)");
}
