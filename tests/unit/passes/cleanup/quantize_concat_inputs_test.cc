// quantize-concat-inputs: a QuantizeLinear after a Concat quantizes each input instead — bit
// for bit — and the Concats it must leave alone.
#include <catch2/catch.hpp>

#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "quantize-concat-inputs";

std::string QdqModel(const std::string& signature, const std::string& body) {
  return "ir_version 10\nopset \"\" 21\ngraph g (" + signature + ")\n" +
         "  init float[] %s = [0.05]\n  init uint8[] %z = [128]\n  init float[] %s2 = [0.07]\n"
         "  init uint8[] %z2 = [90]\n  init float[2] %sv = [0.05, 0.07]\n  init uint8[2] %zv = [128, 90]\n{\n" +
         body + "\n}\n";
}

}  // namespace

TEST_CASE("quantize-concat-inputs: each input quantized, the same grid's DequantizeLinear dropped",
          "[passes][quantized]") {
  // a: another grid (requantized); b: the Q's own grid (its 8-bit value); x: a float input.
  const std::string before = QdqModel("uint8[1,2,3] %qa, uint8[1,3,3] %qb, float[1,1,3] %x) -> (uint8[1,6,3] %y",
                                      "  %a = DequantizeLinear(%qa, %s2, %z2) @dq_a\n"
                                      "  %b = DequantizeLinear(%qb, %s, %z) @dq_b\n"
                                      "  %c = Concat(%a, %b, %x) {axis: 1} @concat\n"
                                      "  %y = QuantizeLinear(%c, %s, %z) @q");
  const std::string after = QdqModel("uint8[1,2,3] %qa, uint8[1,3,3] %qb, float[1,1,3] %x) -> (uint8[1,6,3] %y",
                                     "  %a = DequantizeLinear(%qa, %s2, %z2) @dq_a\n"
                                     "  %a_quantized = QuantizeLinear(%a, %s, %z) @q_input\n"
                                     "  %x_quantized = QuantizeLinear(%x, %s, %z) @q_input_1\n"
                                     "  %y = Concat(%a_quantized, %qb, %x_quantized) {axis: 1} @concat");
  Rewritten rewritten = ExpectRewrite(before, kPass, after, {.numbers = BitForBit()});
  CHECK(rewritten.Counter("concats") == 1);
  CHECK(rewritten.Counter("inputs_requantized") == 2);
  CHECK(rewritten.Counter("dequantizations_dropped") == 1);
}

TEST_CASE("quantize-concat-inputs: a DequantizeLinear read elsewhere stays for its other reader",
          "[passes][quantized]") {
  const std::string before = QdqModel("uint8[1,2,3] %qa, uint8[1,3,3] %qb) -> (uint8[1,5,3] %y, float[1,3,3] %b",
                                      "  %a = DequantizeLinear(%qa, %s2, %z2) @dq_a\n"
                                      "  %b = DequantizeLinear(%qb, %s, %z) @dq_b\n"
                                      "  %c = Concat(%a, %b) {axis: 1} @concat\n"
                                      "  %y = QuantizeLinear(%c, %s, %z) @q");
  const std::string after = QdqModel("uint8[1,2,3] %qa, uint8[1,3,3] %qb) -> (uint8[1,5,3] %y, float[1,3,3] %b",
                                     "  %a = DequantizeLinear(%qa, %s2, %z2) @dq_a\n"
                                     "  %b = DequantizeLinear(%qb, %s, %z) @dq_b\n"
                                     "  %a_quantized = QuantizeLinear(%a, %s, %z) @q_input\n"
                                     "  %y = Concat(%a_quantized, %qb) {axis: 1} @concat");
  ExpectRewrite(before, kPass, after, {.numbers = BitForBit()});
}

TEST_CASE("quantize-concat-inputs: float readers, per-axis quantization and float joins stay", "[passes][quantized]") {
  // The joined float value is read beside the QuantizeLinear.
  ExpectUnchanged(QdqModel("uint8[1,2,3] %qa, float[1,1,3] %x) -> (uint8[1,3,3] %y, float[1,3,3] %c",
                           "  %a = DequantizeLinear(%qa, %s2, %z2)\n"
                           "  %c = Concat(%a, %x) {axis: 1}\n"
                           "  %y = QuantizeLinear(%c, %s, %z)"),
                  kPass);
  // Per-axis parameters along the joined axis: each input would need a slice of them.
  ExpectUnchanged(QdqModel("uint8[1,1,3] %qa, float[1,1,3] %x) -> (uint8[1,2,3] %y",
                           "  %a = DequantizeLinear(%qa, %s2, %z2)\n"
                           "  %c = Concat(%a, %x) {axis: 1}\n"
                           "  %y = QuantizeLinear(%c, %sv, %zv) {axis: 1}"),
                  kPass, "the QuantizeLinear after it is not per tensor with constant parameters");
  // No input dequantized: a float model's join, quantized once.
  ExpectUnchanged(QdqModel("float[1,1,3] %x, float[1,2,3] %w) -> (uint8[1,3,3] %y",
                           "  %c = Concat(%x, %w) {axis: 1}\n"
                           "  %y = QuantizeLinear(%c, %s, %z)"),
                  kPass, "no input is dequantized");
}
