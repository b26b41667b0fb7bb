// The quantization-aware tolerance: each output's step from the model, and Compare allowing
// that many steps besides rtol and atol — for quantized models only.
#include <catch2/catch.hpp>

#include "cpu_test_support.h"
#include "verify/quantization_steps.h"

using namespace fusionopt;
using namespace fusionopt::cpu_test;

TEST_CASE("QuantizationSteps: a DequantizeLinear's scale, one for integers, the range otherwise", "[verify][quantized]") {
  auto model = Parse(R"(
ir_version 10
opset "" 21
graph g (float[4] %x) -> (uint8 %q, float %d, float %f)
  init float[] %s = [0.25]
  init uint8[] %z = [3]
{
  %q = QuantizeLinear(%x, %s, %z)
  %d = DequantizeLinear(%q, %s, %z)
  %f = Relu(%d)
})");
  const std::map<std::string, double> steps = verify::QuantizationSteps(*model);
  CHECK(steps.at("q") == 1.0);
  CHECK(steps.at("d") == 0.25);
  CHECK(steps.at("f") == -1.0);
  auto float_model = Parse(R"(
ir_version 10
opset "" 21
graph g (float[4] %x) -> (float %y) {
  %y = Relu(%x)
})");
  CHECK(verify::QuantizationSteps(*float_model).empty());
  // Weights stored quantized round no activation: the plain tolerance.
  auto weight_only = Parse(R"(
ir_version 10
opset "" 21
graph g (float[2,4] %x) -> (float %y)
  init int8[4,3] %wq = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
  init float[] %s = [0.25]
{
  %w = DequantizeLinear(%wq, %s)
  %y = MatMul(%x, %w)
})");
  CHECK(verify::QuantizationSteps(*weight_only).empty());
  // An integer output no quantization writes (an argmax) is exact.
  auto indices = Parse(R"(
ir_version 10
opset "" 21
graph g (float[4] %x) -> (uint8 %q, int64 %i)
  init float[] %s = [0.25]
  init uint8[] %z = [3]
{
  %q = QuantizeLinear(%x, %s, %z)
  %i = ArgMax(%x)
})");
  const std::map<std::string, double> index_steps = verify::QuantizationSteps(*indices);
  CHECK(index_steps.at("q") == 1.0);
  CHECK(index_steps.count("i") == 0);
}

TEST_CASE("Compare allows the output's quantization steps besides atol", "[verify][quantized]") {
  cpu::Tolerance tolerance;
  tolerance.step = {{"d", 0.25}, {"f", -1.0}};
  const cpu::RtTensor expected = Floats({4}, {0.0, 0.5, 1.0, 51.0});
  // Off by two steps of 0.25: allowed for "d", not for an output without steps.
  const cpu::RtTensor two_steps = Floats({4}, {0.5, 0.5, 1.0, 51.0});
  CHECK(cpu::Compare(two_steps, expected, tolerance, "d").passed);
  CHECK_FALSE(cpu::Compare(two_steps, expected, tolerance, "other").passed);
  CHECK_FALSE(cpu::Compare(Floats({4}, {0.51, 0.5, 1.0, 51.0}), expected, tolerance, "d").passed);
  // "f": an 8-bit step of the range (51 / 255 = 0.2), two of them 0.4.
  CHECK(cpu::Compare(Floats({4}, {0.39, 0.5, 1.0, 51.0}), expected, tolerance, "f").passed);
  CHECK_FALSE(cpu::Compare(Floats({4}, {0.41, 0.5, 1.0, 51.0}), expected, tolerance, "f").passed);
  CHECK(tolerance.Describe() == "rtol 1e-4, atol 1e-5, 2 quantization steps");
  tolerance.quantization_steps = 0;
  CHECK_FALSE(cpu::Compare(two_steps, expected, tolerance, "d").passed);
}
