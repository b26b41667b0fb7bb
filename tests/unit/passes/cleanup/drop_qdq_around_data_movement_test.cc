// drop-qdq-around-data-movement: MaxPool, Reshape and Concat between a DQ and a Q of the same
// parameters run on the quantized values, bit for bit; and the pairs that must stay.
#include <catch2/catch.hpp>

#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "drop-qdq-around-data-movement";

std::string QdqModel(const std::string& signature, const std::string& body, const std::string& inits = "") {
  return "ir_version 10\nopset \"\" 21\ngraph g (" + signature + ")\n" +
         "  init float[] %s = [0.05]\n  init uint8[] %z = [128]\n  init float[] %s2 = [0.07]\n" + inits + "{\n" + body +
         "\n}\n";
}

}  // namespace

TEST_CASE("drop-qdq-around-data-movement: MaxPool, Reshape and Concat run on the quantized values", "[passes][quantized]") {
  const std::string before = QdqModel("uint8[1,2,4,4] %q, uint8[1,2,2,2] %r) -> (uint8[1,16] %y",
                                   "  %x = DequantizeLinear(%q, %s, %z) @dq\n"
                                   "  %p = MaxPool(%x) {kernel_shape: [2, 2], strides: [2, 2]} @pool\n"
                                   "  %pq = QuantizeLinear(%p, %s, %z) @q_pool\n"
                                   "  %a = DequantizeLinear(%pq, %s, %z) @dq_a\n"
                                   "  %b = DequantizeLinear(%r, %s, %z) @dq_b\n"
                                   "  %c = Concat(%a, %b) {axis: 1} @concat\n"
                                   "  %cq = QuantizeLinear(%c, %s, %z) @q_concat\n"
                                   "  %f = DequantizeLinear(%cq, %s, %z) @dq_f\n"
                                   "  %v = Reshape(%f, %shape) @reshape\n"
                                   "  %y = QuantizeLinear(%v, %s, %z) @q",
                                   "  init int64[2] %shape = [1, 16]\n");
  const std::string after = QdqModel("uint8[1,2,4,4] %q, uint8[1,2,2,2] %r) -> (uint8[1,16] %y",
                                  "  %pq = MaxPool(%q) {kernel_shape: [2, 2], strides: [2, 2]} @pool\n"
                                  "  %cq = Concat(%pq, %r) {axis: 1} @concat\n"
                                  "  %y = Reshape(%cq, %shape) @reshape",
                                  "  init int64[2] %shape = [1, 16]\n");
  Rewritten rewritten = ExpectRewrite(before, kPass, after, {.numbers = BitForBit()});
  CHECK(rewritten.Counter("dropped_pairs") == 7);  // 4 DequantizeLinear, 3 QuantizeLinear
}

TEST_CASE("drop-qdq-around-data-movement: different parameters, float readers and averaging stay", "[passes][quantized]") {
  // Quantized again with another scale: a requantization, not a move.
  ExpectUnchanged(QdqModel("uint8[1,2,4,4] %q) -> (uint8[1,2,2,2] %y",
                        "  %x = DequantizeLinear(%q, %s, %z)\n"
                        "  %p = MaxPool(%x) {kernel_shape: [2, 2], strides: [2, 2]}\n"
                        "  %y = QuantizeLinear(%p, %s2, %z)"),
                  kPass);
  // The float result is read beside the QuantizeLinear.
  ExpectUnchanged(QdqModel("uint8[1,2,4,4] %q) -> (uint8[1,2,2,2] %y, float[1,2,2,2] %p",
                        "  %x = DequantizeLinear(%q, %s, %z)\n"
                        "  %p = MaxPool(%x) {kernel_shape: [2, 2], strides: [2, 2]}\n"
                        "  %y = QuantizeLinear(%p, %s, %z)"),
                  kPass);
  // Averaging rounds: an AveragePool is no move of values.
  ExpectUnchanged(QdqModel("uint8[1,2,4,4] %q) -> (uint8[1,2,2,2] %y",
                        "  %x = DequantizeLinear(%q, %s, %z)\n"
                        "  %p = AveragePool(%x) {kernel_shape: [2, 2], strides: [2, 2]}\n"
                        "  %y = QuantizeLinear(%p, %s, %z)"),
                  kPass);
  // Resize that interpolates.
  ExpectUnchanged(QdqModel("uint8[1,2,4,4] %q) -> (uint8[1,2,8,8] %y",
                        "  %x = DequantizeLinear(%q, %s, %z)\n"
                        "  %p = Resize(%x, , %scales) {mode: \"linear\"}\n"
                        "  %y = QuantizeLinear(%p, %s, %z)",
                        "  init float[4] %scales = [1, 1, 2, 2]\n"),
                  kPass);
  // Nearest, but cropping: outside the crop it writes a float extrapolation value.
  ExpectUnchanged(QdqModel("uint8[1,2,4,4] %q) -> (uint8[1,2,8,8] %y",
                        "  %x = DequantizeLinear(%q, %s, %z)\n"
                        "  %p = Resize(%x, %roi, %scales) {mode: \"nearest\", coordinate_transformation_mode: "
                        "\"tf_crop_and_resize\", extrapolation_value: 0.3}\n"
                        "  %y = QuantizeLinear(%p, %s, %z)",
                        "  init float[4] %scales = [1, 1, 2, 2]\n  init float[8] %roi = [0, 0, -0.5, -0.5, 1, 1, 1.5, 1.5]\n"),
                  kPass);
}

TEST_CASE("drop-qdq-around-data-movement: a DequantizeLinear other nodes read stays for them", "[passes][quantized]") {
  const std::string before = QdqModel("uint8[1,8] %q) -> (uint8[2,4] %y, float[1,8] %x",
                                   "  %x = DequantizeLinear(%q, %s, %z) @dq\n"
                                   "  %v = Reshape(%x, %shape) @reshape\n"
                                   "  %y = QuantizeLinear(%v, %s, %z) @q",
                                   "  init int64[2] %shape = [2, 4]\n");
  const std::string after = QdqModel("uint8[1,8] %q) -> (uint8[2,4] %y, float[1,8] %x",
                                  "  %x = DequantizeLinear(%q, %s, %z) @dq\n"
                                  "  %y = Reshape(%q, %shape) @reshape",
                                  "  init int64[2] %shape = [2, 4]\n");
  ExpectRewrite(before, kPass, after, {.numbers = BitForBit()});
}
