// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear on the CPU runtime: rounding,
// saturation, every granularity (tensor, axis, blocks that divide the axis and blocks that do
// not), the packed types (4- and 2-bit integers, minifloats), and the errors bad parameters give.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "cpu_test_support.h"
#include "ir/minifloat.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::cpu_test;

namespace {

std::string QuantizedModel(const std::string& graph, int opset = 21) {
  return "ir_version 10\nopset \"\" " + std::to_string(opset) + "\nopset \"com.microsoft\" 1\n" + graph;
}

template <typename T>
std::vector<T> As(const RtTensor& tensor) {
  return std::vector<T>(tensor.data<T>(), tensor.data<T>() + tensor.NumElements());
}

// The stored bytes (packed types hold several values in one).
std::vector<uint8_t> Bytes(const RtTensor& tensor) {
  return std::vector<uint8_t>(tensor.raw(), tensor.raw() + tensor.nbytes());
}

}  // namespace

TEST_CASE("QuantizeLinear rounds half to even, adds the zero point and saturates", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (float[8] %x) -> (uint8 %y, int8 %z)
  init float[] %scale = [0.5]
  init uint8[] %zero = [10]
  init int8[] %signed_zero = [-3]
{
  %y = QuantizeLinear(%x, %scale, %zero)
  %z = QuantizeLinear(%x, %scale, %signed_zero)
})");
  // x / 0.5: 2.5 → 2, 3.5 → 4, -2.5 → -2; beyond the range saturates.
  RtTensor x = Floats({8}, {1.25, 1.75, -1.25, 0.0, 1000.0, -1000.0, 63.0, 0.26});
  auto outputs = Run(text, {{"x", x}});
  CHECK(As<uint8_t>(outputs[0].tensor) == std::vector<uint8_t>{12, 14, 8, 10, 255, 0, 136, 11});
  CHECK(As<int8_t>(outputs[1].tensor) == std::vector<int8_t>{-1, 1, -5, -3, 127, -128, 123, -2});
}

TEST_CASE("QuantizeLinear sends NaN to the bottom of the range and defaults to uint8", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (float[3] %x) -> (uint8 %y)
  init float[] %scale = [1.0]
{
  %y = QuantizeLinear(%x, %scale)
})");
  RtTensor x = Floats({3}, {std::numeric_limits<double>::quiet_NaN(), 7.0, -7.0});
  auto outputs = Run(text, {{"x", x}});
  CHECK(outputs[0].tensor.dtype() == DataType::kUint8);
  CHECK(As<uint8_t>(outputs[0].tensor) == std::vector<uint8_t>{0, 7, 0});
}

TEST_CASE("DequantizeLinear subtracts the zero point exactly, per tensor and per axis", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (int8[2,3] %x) -> (float %y, float %per_axis)
  init float[] %scale = [0.25]
  init int8[] %zero = [-128]
  init float[3] %scales = [1, 2, 4]
  init int8[3] %zeros = [127, 0, -128]
{
  %y = DequantizeLinear(%x, %scale, %zero)
  %per_axis = DequantizeLinear(%x, %scales, %zeros) {axis: 1}
})");
  // 127 - (-128) = 255 does not fit int8: the difference is taken wide.
  RtTensor x = Make<int8_t>(DataType::kInt8, {2, 3}, {127, 0, -128, 1, -1, 5});
  auto outputs = Run(text, {{"x", x}});
  CheckClose(outputs[0].tensor, {2, 3}, {63.75, 32.0, 0.0, 32.25, 31.75, 33.25});
  CheckClose(outputs[1].tensor, {2, 3}, {0.0, 0.0, 0.0, -126.0, -2.0, 532.0});
}

TEST_CASE("Blocked quantization along an axis, blocks dividing it and not", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (float[2,5] %x) -> (int8 %even, int8 %ragged, float %back)
  init float[2,3] %scales = [1, 2, 4, 0.5, 0.25, 1]
  init float[1,5] %one_row = [1, 1, 1, 1, 1]
{
  %ragged = QuantizeLinear(%x, %scales) {axis: 1, block_size: 2, output_dtype: 3}
  %even = QuantizeLinear(%x, %one_row) {axis: 0, block_size: 2, output_dtype: 3}
  %back = DequantizeLinear(%ragged, %scales) {axis: 1, block_size: 2}
})");
  RtTensor x = Floats({2, 5}, {1, 2, 3, 4, 5, -1, -2, -3, -4, -5});
  auto outputs = Run(text, {{"x", x}});
  // Columns 0-1 use scale 1 (row 0) / 0.5 (row 1), columns 2-3 use 2 / 0.25, column 4 uses 4 / 1.
  CHECK(As<int8_t>(outputs[1].tensor) == std::vector<int8_t>{1, 2, 2, 2, 1, -2, -4, -12, -16, -5});
  CHECK(As<int8_t>(outputs[0].tensor) == std::vector<int8_t>{1, 2, 3, 4, 5, -1, -2, -3, -4, -5});
  CheckClose(outputs[2].tensor, {2, 5}, {1, 2, 4, 4, 4, -1, -2, -3, -4, -5});
}

TEST_CASE("A blocked scale of the wrong shape is refused with the shape it needs", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (float[2,5] %x) -> (int8 %y)
  init float[2,2] %scales = [1, 2, 4, 0.5]
{
  %y = QuantizeLinear(%x, %scales) {axis: 1, block_size: 2, output_dtype: 3}
})");
  auto outputs = TryRun(text, {{"x", Floats({2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10})}});
  REQUIRE_FALSE(outputs.ok());
  CHECK_THAT(outputs.status().message(), Catch::Contains("must have 3 entries on that axis"));
}

TEST_CASE("A per-axis scale whose length is not the axis's is refused", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (uint8[2,3] %x) -> (float %y)
  init float[2] %scales = [1, 2]
{
  %y = DequantizeLinear(%x, %scales) {axis: 1}
})");
  auto outputs = TryRun(text, {{"x", Make<uint8_t>(DataType::kUint8, {2, 3}, {1, 2, 3, 4, 5, 6})}});
  REQUIRE_FALSE(outputs.ok());
  CHECK_THAT(outputs.status().message(), Catch::Contains("3 values of axis 1"));
}

TEST_CASE("4-bit and 2-bit integers pack two and four to a byte, low bits first", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (float[5] %x) -> (int4 %q4, float %back4, uint2 %q2, float %back2)
  init float[] %scale = [1.0]
  init int4[] %zero4 = raw "00"
  init uint2[] %zero2 = raw "01"
{
  %q4 = QuantizeLinear(%x, %scale, %zero4)
  %back4 = DequantizeLinear(%q4, %scale, %zero4)
  %q2 = QuantizeLinear(%x, %scale, %zero2)
  %back2 = DequantizeLinear(%q2, %scale, %zero2)
})");
  RtTensor x = Floats({5}, {-9, -1, 3, 7, 20});
  auto outputs = Run(text, {{"x", x}});
  // int4 saturates to [-8, 7]: -8 = 0x8, -1 = 0xF, 3, 7, 7.
  CHECK(Bytes(outputs[0].tensor) == std::vector<uint8_t>{0xF8, 0x73, 0x07});
  CheckClose(outputs[1].tensor, {5}, {-8, -1, 3, 7, 7});
  // uint2 with zero point 1 holds [-1, 2]: 0, 0, 3, 3, 3.
  CHECK(Bytes(outputs[2].tensor) == std::vector<uint8_t>{0xF0, 0x03});
  CheckClose(outputs[3].tensor, {5}, {-1, -1, 2, 2, 2});
}

TEST_CASE("float8 quantization saturates unless told not to", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (float[4] %x) -> (float8e4m3fn %saturated, float8e4m3fn %wrapped, float %back)
  init float[] %scale = [1.0]
  init float8e4m3fn[] %zero = raw "00"
{
  %saturated = QuantizeLinear(%x, %scale, %zero)
  %wrapped = QuantizeLinear(%x, %scale, %zero) {saturate: 0}
  %back = DequantizeLinear(%saturated, %scale, %zero)
})");
  RtTensor x = Floats({4}, {1.0, 464.0, 1000.0, -0.3});
  auto outputs = Run(text, {{"x", x}});
  // 464 is the tie between 448 (even) and 480 (not finite in e4m3fn); 1000 overflows.
  CHECK(As<uint8_t>(outputs[0].tensor) == std::vector<uint8_t>{0x38, 0x7E, 0x7E, 0xAA});
  CHECK(As<uint8_t>(outputs[1].tensor) == std::vector<uint8_t>{0x38, 0x7E, 0x7F, 0xAA});
  CheckClose(outputs[2].tensor, {4}, {1.0, 448.0, 448.0, -0.3125});
}

TEST_CASE("Minifloat conversions round to nearest even and know each type's specials", "[cpu][quantized]") {
  CHECK(FloatToMinifloat(DataType::kFloat8E5M2, 61440.0f, false) == 0x7C);  // tie to even: 65536 = inf
  CHECK(FloatToMinifloat(DataType::kFloat8E5M2, 61440.0f, true) == 0x7B);
  CHECK(FloatToMinifloat(DataType::kFloat8E4M3FNUZ, -0.0f, true) == 0x00);  // no negative zero
  CHECK(FloatToMinifloat(DataType::kFloat8E4M3FNUZ, 1e9f, false) == 0x80);  // NaN
  CHECK(FloatToMinifloat(DataType::kFloat4E2M1, 5.0f, false) == 0x6);       // tie 4/6 → 4 (even)
  CHECK(FloatToMinifloat(DataType::kFloat4E2M1, -100.0f, false) == 0xF);    // always saturates
  CHECK(std::isnan(MinifloatToFloat(DataType::kFloat8E4M3FN, 0xFF)));
  CHECK(std::isinf(MinifloatToFloat(DataType::kFloat8E5M2, 0xFC)));
  CHECK(MinifloatToFloat(DataType::kFloat8E4M3FN, 0x01) == std::ldexp(1.0f, -9));  // smallest subnormal
  for (DataType type : {DataType::kFloat8E4M3FN, DataType::kFloat8E4M3FNUZ, DataType::kFloat8E5M2,
                        DataType::kFloat8E5M2FNUZ}) {
    for (int code = 0; code < 256; ++code) {
      const float value = MinifloatToFloat(type, static_cast<uint8_t>(code));
      if (std::isnan(value)) continue;
      INFO(NameOf(type) << " code " << code);
      const uint8_t back = FloatToMinifloat(type, value, false);
      // Every finite value and infinity round-trips (fnuz has one zero).
      CHECK((back == code || (value == 0 && MinifloatToFloat(type, back) == 0)));
    }
  }
}

TEST_CASE("DynamicQuantizeLinear stretches the range over zero", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (float[4] %x) -> (uint8 %y, float %scale, uint8 %zero) {
  %y, %scale, %zero = DynamicQuantizeLinear(%x)
})");
  auto outputs = Run(text, {{"x", Floats({4}, {1.0, 2.0, 3.0, 5.1})}});
  // min(x, 0) = 0: scale 5.1 / 255 = 0.02, zero point 0.
  CHECK(outputs[1].tensor.data<float>()[0] == Approx(0.02f));
  CHECK(outputs[2].tensor.data<uint8_t>()[0] == 0);
  CHECK(As<uint8_t>(outputs[0].tensor) == std::vector<uint8_t>{50, 100, 150, 255});
  auto zeros = Run(text, {{"x", Floats({4}, {0, 0, 0, 0})}});
  CHECK(zeros[1].tensor.data<float>()[0] == 0.0f);
  CHECK(As<uint8_t>(zeros[0].tensor) == std::vector<uint8_t>{0, 0, 0, 0});
}

TEST_CASE("onnxruntime's domain forms of QuantizeLinear and DequantizeLinear run alike", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (float[3] %x) -> (float %y)
  init float[] %scale = [0.1]
  init uint16[] %zero = [30000]
{
  %q = com.microsoft::QuantizeLinear(%x, %scale, %zero)
  %y = com.microsoft::DequantizeLinear(%q, %scale, %zero)
})");
  auto outputs = Run(text, {{"x", Floats({3}, {-1.04, 0.0, 2.26})}});
  CheckClose(outputs[0].tensor, {3}, {-1.0, 0.0, 2.3});
}
