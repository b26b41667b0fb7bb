// The integer contractions (quantized/integer_contraction.h) against loops written here from
// the ops' definitions, on random operands that include the extremes (255 · 127 is what
// saturates u8·s8 sums on hosts without VNNI), on both paths: oneDNN's int8 primitives and the
// float32 path (FUSIONOPT_CPU_INT8 chooses one per kernel).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "cpu_runtime/quantized/integer_contraction.h"
#include "cpu_test_support.h"
#include "scoped_env.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::cpu_test;
using fusionopt::test_support::ScopedEnv;

namespace {

std::string QuantizedModel(const std::string& graph) {
  return "ir_version 10\nopset \"\" 21\nopset \"com.microsoft\" 1\n" + graph;
}

template <typename T>
std::vector<T> Random(size_t count, std::mt19937& generator, bool extremes = true) {
  std::uniform_int_distribution<int> pick(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  std::vector<T> values(count);
  for (size_t i = 0; i < count; ++i) {
    // One value in four at the type's ends: the products that saturate without VNNI.
    const int end = (i % 2 == 0) ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
    values[i] = static_cast<T>(extremes && i % 4 == 0 ? end : pick(generator));
  }
  return values;
}

// Σ_k (a[m,k] - a_zero) (b[k,n] - b_zero[n]) for row-major a [M, K] and b [K, N].
template <typename A, typename B>
std::vector<int64_t> ReferenceProduct(const std::vector<A>& a, const std::vector<B>& b, int64_t m, int64_t k,
                                      int64_t n, int32_t a_zero, const std::vector<int32_t>& b_zero) {
  std::vector<int64_t> out(static_cast<size_t>(m * n), 0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        sum += (int64_t{a[i * k + p]} - a_zero) * (int64_t{b[p * n + j]} - b_zero[b_zero.size() == 1 ? 0 : j]);
      }
      out[i * n + j] = sum;
    }
  }
  return out;
}

std::vector<int64_t> Int32Values(const RtTensor& tensor) {
  REQUIRE(tensor.dtype() == DataType::kInt32);
  return std::vector<int64_t>(tensor.data<int32_t>(), tensor.data<int32_t>() + tensor.NumElements());
}

const char* kPaths[] = {"onednn", "float32"};

}  // namespace

TEST_CASE("MatMulInteger is exact on both paths, for constant and computed B", "[cpu][quantized]") {
  std::mt19937 generator(3);
  const int64_t m = 5, k = 67, n = 9;
  const std::vector<uint8_t> a = Random<uint8_t>(m * k, generator);
  const std::vector<int8_t> b = Random<int8_t>(k * n, generator);
  const std::vector<uint8_t> b_unsigned = Random<uint8_t>(k * n, generator);
  for (const char* path : kPaths) {
    ScopedEnv env("FUSIONOPT_CPU_INT8", path);
    INFO("path " << path);
    const std::string computed = QuantizedModel(R"(
graph g (uint8[5,67] %a, int8[67,9] %b) -> (int32 %y)
  init uint8[] %a_zero = [131]
  init int8[] %b_zero = [-7]
{
  %y = MatMulInteger(%a, %b, %a_zero, %b_zero)
})");
    auto outputs = Run(computed, {{"a", Make(DataType::kUint8, {m, k}, a)}, {"b", Make(DataType::kInt8, {k, n}, b)}});
    CHECK(Int32Values(outputs[0].tensor) == ReferenceProduct(a, b, m, k, n, 131, {-7}));
    // uint8 weights with a zero point per column: the int8 path shifts them by 128, the
    // differing zero points send it to the float32 path.
    const std::string per_column = QuantizedModel(R"(
graph g (uint8[5,67] %a, uint8[67,9] %b) -> (int32 %y)
  init uint8[9] %b_zero = [0, 1, 2, 128, 200, 255, 7, 9, 128]
{
  %y = MatMulInteger(%a, %b, , %b_zero)
})");
    outputs = Run(per_column, {{"a", Make(DataType::kUint8, {m, k}, a)}, {"b", Make(DataType::kUint8, {k, n}, b_unsigned)}});
    CHECK(Int32Values(outputs[0].tensor) ==
          ReferenceProduct(a, b_unsigned, m, k, n, 0, {0, 1, 2, 128, 200, 255, 7, 9, 128}));
  }
}

TEST_CASE("MatMulInteger with B an initializer packs it once and broadcasts batches", "[cpu][quantized]") {
  std::mt19937 generator(5);
  const std::vector<int8_t> b = Random<int8_t>(4 * 3, generator);
  std::string weights;
  for (size_t i = 0; i < b.size(); ++i) weights += (i ? ", " : "") + std::to_string(b[i]);
  const std::vector<uint8_t> a = Random<uint8_t>(2 * 3 * 4, generator);
  for (const char* path : kPaths) {
    ScopedEnv env("FUSIONOPT_CPU_INT8", path);
    INFO("path " << path);
    auto prepared = Prepare(QuantizedModel(R"(
graph g (uint8[2,3,4] %a) -> (int32 %y)
  init int8[4,3] %b = [)" + weights + R"(]
{
  %y = MatMulInteger(%a, %b)
})"));
    for (int repeat = 0; repeat < 2; ++repeat) {
      auto outputs = prepared.session->Run({{"a", Make(DataType::kUint8, {2, 3, 4}, a)}});
      REQUIRE(outputs.ok());
      CHECK(outputs.value()[0].tensor.dims() == std::vector<int64_t>{2, 3, 3});
      CHECK(Int32Values(outputs.value()[0].tensor) == ReferenceProduct(a, b, 6, 4, 3, 0, {0}));
    }
  }
}

TEST_CASE("QLinearMatMul requantizes with per-column scales", "[cpu][quantized]") {
  std::mt19937 generator(7);
  const int64_t m = 3, k = 40, n = 4;
  const std::vector<int8_t> a = Random<int8_t>(m * k, generator);
  const std::vector<int8_t> b = Random<int8_t>(k * n, generator);
  const std::vector<float> b_scale = {0.001f, 0.002f, 0.0005f, 0.004f};
  const float a_scale = 0.05f, y_scale = 0.3f;
  const int y_zero = -10;
  const std::vector<int64_t> acc = ReferenceProduct(a, b, m, k, n, 3, {0});
  for (const char* path : kPaths) {
    ScopedEnv env("FUSIONOPT_CPU_INT8", path);
    INFO("path " << path);
    auto outputs = Run(QuantizedModel(R"(
graph g (int8[3,40] %a, int8[40,4] %b) -> (int8 %y)
  init float[] %a_scale = [0.05]
  init int8[] %a_zero = [3]
  init float[4] %b_scale = [0.001, 0.002, 0.0005, 0.004]
  init int8[4] %b_zero = [0, 0, 0, 0]
  init float[] %y_scale = [0.3]
  init int8[] %y_zero = [-10]
{
  %y = QLinearMatMul(%a, %a_scale, %a_zero, %b, %b_scale, %b_zero, %y_scale, %y_zero)
})"),
                       {{"a", Make(DataType::kInt8, {m, k}, a)}, {"b", Make(DataType::kInt8, {k, n}, b)}});
    const RtTensor& y = outputs[0].tensor;
    REQUIRE(y.dtype() == DataType::kInt8);
    for (int64_t i = 0; i < m * n; ++i) {
      const double real = static_cast<double>(acc[static_cast<size_t>(i)]) * a_scale * b_scale[i % n] / y_scale;
      const double expected = std::clamp(std::nearbyint(real) + y_zero, -128.0, 127.0);
      // Within one step: the float rounding of the scale product may move a tie.
      CHECK(std::abs(y.data<int8_t>()[i] - expected) <= 1);
    }
  }
}

TEST_CASE("QLinearConv: per-channel weight scales, an int32 bias, padding and groups", "[cpu][quantized]") {
  std::mt19937 generator(11);
  const int64_t channels = 4, out_channels = 6, group = 2, size = 5;
  const std::vector<uint8_t> x = Random<uint8_t>(channels * size * size, generator);
  const std::vector<int8_t> w = Random<int8_t>(out_channels * (channels / group) * 9, generator);
  std::string weights;
  for (size_t i = 0; i < w.size(); ++i) weights += (i ? ", " : "") + std::to_string(w[i]);
  const std::vector<int32_t> bias = {100, -2000, 0, 5, 70000, -1};
  const std::vector<float> w_scale = {0.01f, 0.02f, 0.005f, 0.01f, 0.001f, 0.03f};
  const float x_scale = 0.02f, y_scale = 0.5f;
  const int x_zero = 128, y_zero = 100;
  for (const char* path : kPaths) {
    ScopedEnv env("FUSIONOPT_CPU_INT8", path);
    INFO("path " << path);
    auto outputs = Run(QuantizedModel(R"(
graph g (uint8[1,4,5,5] %x) -> (uint8 %y)
  init float[] %x_scale = [0.02]
  init uint8[] %x_zero = [128]
  init int8[6,2,3,3] %w = [)" + weights + R"(]
  init float[6] %w_scale = [0.01, 0.02, 0.005, 0.01, 0.001, 0.03]
  init int8[6] %w_zero = [0, 0, 0, 0, 0, 0]
  init float[] %y_scale = [0.5]
  init uint8[] %y_zero = [100]
  init int32[6] %bias = [100, -2000, 0, 5, 70000, -1]
{
  %y = QLinearConv(%x, %x_scale, %x_zero, %w, %w_scale, %w_zero, %y_scale, %y_zero, %bias) {group: 2, pads: [1, 1, 1, 1], strides: [2, 2]}
})"),
                       {{"x", Make(DataType::kUint8, {1, channels, size, size}, x)}});
    const RtTensor& y = outputs[0].tensor;
    REQUIRE(y.dims() == std::vector<int64_t>{1, 6, 3, 3});
    for (int64_t o = 0; o < out_channels; ++o) {
      const int64_t g = o / (out_channels / group);
      for (int64_t oy = 0; oy < 3; ++oy) {
        for (int64_t ox = 0; ox < 3; ++ox) {
          int64_t acc = bias[static_cast<size_t>(o)];
          for (int64_t c = 0; c < channels / group; ++c) {
            for (int64_t ky = 0; ky < 3; ++ky) {
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = oy * 2 - 1 + ky, ix = ox * 2 - 1 + kx;
                if (iy < 0 || ix < 0 || iy >= size || ix >= size) continue;
                const int64_t xv = x[static_cast<size_t>(((g * (channels / group) + c) * size + iy) * size + ix)];
                acc += (xv - x_zero) * w[static_cast<size_t>(((o * (channels / group) + c) * 3 + ky) * 3 + kx)];
              }
            }
          }
          const double real = static_cast<double>(acc) * x_scale * w_scale[static_cast<size_t>(o)] / y_scale;
          const double expected = std::clamp(std::nearbyint(real) + y_zero, 0.0, 255.0);
          INFO("channel " << o << " at " << oy << "," << ox);
          CHECK(std::abs(y.data<uint8_t>()[(o * 3 + oy) * 3 + ox] - expected) <= 1);
        }
      }
    }
  }
}

TEST_CASE("ConvInteger with a weight zero point takes the float32 path and stays exact", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (uint8[1,1,3,3] %x) -> (int32 %y)
  init uint8[1,1,2,2] %w = [255, 0, 10, 200]
  init uint8[] %x_zero = [1]
  init uint8[] %w_zero = [100]
{
  %y = ConvInteger(%x, %w, %x_zero, %w_zero)
})");
  auto outputs = Run(text, {{"x", Make<uint8_t>(DataType::kUint8, {1, 1, 3, 3}, {255, 1, 2, 3, 4, 5, 6, 7, 8})}});
  // (x - 1) · (w - 100) summed over each 2x2 window; w - 100 = [155, -100, -90, 100].
  // x - 1 = [[254, 0, 1], [2, 3, 4], [5, 6, 7]].
  CHECK(Int32Values(outputs[0].tensor) ==
        std::vector<int64_t>{254 * 155 + 0 * -100 + 2 * -90 + 3 * 100, 0 * 155 + 1 * -100 + 3 * -90 + 4 * 100,
                             2 * 155 + 3 * -100 + 5 * -90 + 6 * 100, 3 * 155 + 4 * -100 + 6 * -90 + 7 * 100});
}

TEST_CASE("QGemm: transposed B, alpha, an int32 C, float and requantized outputs", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (uint8[2,3] %a) -> (float %y, uint8 %q)
  init float[] %a_scale = [0.5]
  init uint8[] %a_zero = [2]
  init int8[2,3] %b = [1, -2, 3, 4, 5, -6]
  init float[] %b_scale = [0.25]
  init int8[] %b_zero = [0]
  init int32[2] %c = [8, -8]
  init float[] %y_scale = [0.1]
  init uint8[] %y_zero = [50]
{
  %y = com.microsoft::QGemm(%a, %a_scale, %a_zero, %b, %b_scale, %b_zero, %c) {transB: 1, alpha: 2.0}
  %q = com.microsoft::QGemm(%a, %a_scale, %a_zero, %b, %b_scale, %b_zero, %c, %y_scale, %y_zero) {transB: 1, alpha: 2.0}
})");
  for (const char* path : kPaths) {
    ScopedEnv env("FUSIONOPT_CPU_INT8", path);
    INFO("path " << path);
    auto outputs = Run(text, {{"a", Make<uint8_t>(DataType::kUint8, {2, 3}, {3, 4, 5, 2, 2, 12})}});
    // (a - 2) = [[1, 2, 3], [0, 0, 10]]; · bᵀ = [[6, -4], [30, -60]]; + c = [[14, -12], [38, -68]];
    // · alpha · a_scale · b_scale = 0.25.
    CheckClose(outputs[0].tensor, {2, 2}, {3.5, -3.0, 9.5, -17.0});
    CHECK(std::vector<uint8_t>(outputs[1].tensor.data<uint8_t>(), outputs[1].tensor.data<uint8_t>() + 4) ==
          std::vector<uint8_t>{85, 20, 145, 0});
  }
}

TEST_CASE("MatMulIntegerToFloat and DynamicQuantizeMatMul scale, add the bias, give float", "[cpu][quantized]") {
  const std::string text = QuantizedModel(R"(
graph g (uint8[1,2] %a, float[1,2] %x) -> (float %y, float %z)
  init int8[2,2] %b = [1, 2, 3, 4]
  init float[] %a_scale = [0.5]
  init float[2] %b_scale = [1.0, 0.1]
  init uint8[] %a_zero = [1]
  init float[2] %bias = [10, 20]
{
  %y = com.microsoft::MatMulIntegerToFloat(%a, %b, %a_scale, %b_scale, %a_zero, , %bias)
  %z = com.microsoft::DynamicQuantizeMatMul(%x, %b, %b_scale, , %bias)
})");
  for (const char* path : kPaths) {
    ScopedEnv env("FUSIONOPT_CPU_INT8", path);
    INFO("path " << path);
    auto outputs = Run(text, {{"a", Make<uint8_t>(DataType::kUint8, {1, 2}, {3, 5})},
                              {"x", Floats({1, 2}, {2.56, 5.1})}});
    // (a - 1) · b = [2·1 + 4·3, 2·2 + 4·4] = [14, 20]; · 0.5 · [1, 0.1] + bias.
    CheckClose(outputs[0].tensor, {1, 2}, {17.0, 21.0});
    // x quantizes to [128, 255] (scale 5.1 / 255 = 0.02, zero point 0): the integer product
    // [893, 1276] · 0.02 · [1, 0.1] + bias.
    CheckClose(outputs[1].tensor, {1, 2}, {27.86, 22.552});
  }
}

TEST_CASE("Integer contractions refuse float operands and misshapen parameters", "[cpu][quantized]") {
  auto float_operand = TryRun(QuantizedModel(R"(
graph g (float[2,2] %a, int8[2,2] %b) -> (int32 %y) {
  %y = MatMulInteger(%a, %b)
})"),
                              {{"a", Floats({2, 2}, {1, 2, 3, 4})}, {"b", Make<int8_t>(DataType::kInt8, {2, 2}, {1, 2, 3, 4})}});
  REQUIRE_FALSE(float_operand.ok());
  CHECK_THAT(float_operand.status().message(), Catch::Contains("an integer matrix product takes uint8 or int8 tensors, not float"));
  auto scales = TryRun(QuantizedModel(R"(
graph g (int8[2,2] %a) -> (int8 %y)
  init float[] %s = [1.0]
  init int8[2,2] %b = [1, 2, 3, 4]
  init float[3] %b_scale = [1, 2, 3]
  init int8[] %z = [0]
{
  %y = QLinearMatMul(%a, %s, %z, %b, %b_scale, %z, %s, %z)
})"),
                       {{"a", Make<int8_t>(DataType::kInt8, {2, 2}, {1, 2, 3, 4})}});
  REQUIRE_FALSE(scales.ok());
  CHECK_THAT(scales.status().message(), Catch::Contains("need 2 values, got 3"));
}

TEST_CASE("The host's int8 path follows VNNI unless overridden", "[cpu][quantized]") {
  {
    ScopedEnv env("FUSIONOPT_CPU_INT8", "float32");
    CHECK(Int8PathOnThisHost() == Int8Path::kFloat32);
  }
  {
    ScopedEnv env("FUSIONOPT_CPU_INT8", nullptr);
    CHECK(Int8PathOnThisHost() == (CpuHasVnni() ? Int8Path::kOneDnn : Int8Path::kFloat32));
  }
}

TEST_CASE("MatMulInteger by a constant 1-D or batched B", "[cpu][quantized]") {
  // A 1-D B is a vector the product contracts with; a [1, K, N] B broadcasts over A's batch.
  // Neither is the one [K, N] matrix the kernel packs: both are read as they lie.
  const std::string text = QuantizedModel(R"(
graph g (uint8[2,3] %a, uint8[2,2,3] %c) -> (int32 %v, int32 %m)
  init int8[3] %vector = [1, -2, 3]
  init int8[1,3,2] %batched = [1, 2, -3, 4, 5, -6]
  init uint8[] %zero = [1]
{
  %v = MatMulInteger(%a, %vector, %zero)
  %m = MatMulInteger(%c, %batched, %zero)
})");
  for (const char* path : kPaths) {
    ScopedEnv env("FUSIONOPT_CPU_INT8", path);
    INFO("path " << path);
    auto outputs = Run(text, {{"a", Make<uint8_t>(DataType::kUint8, {2, 3}, {2, 3, 4, 1, 1, 255})},
                              {"c", Make<uint8_t>(DataType::kUint8, {2, 2, 3}, {1, 2, 3, 4, 5, 6, 255, 1, 2, 3, 4, 5})}});
    // (a - 1) = [[1, 2, 3], [0, 0, 254]] · [1, -2, 3] = [6, 762].
    CHECK(outputs[0].tensor.dims() == std::vector<int64_t>{2});
    CHECK(Int32Values(outputs[0].tensor) == std::vector<int64_t>{6, 762});
    // (c - 1) rows [0,1,2], [3,4,5], [254,0,1], [2,3,4] · [[1, 2], [-3, 4], [5, -6]].
    CHECK(outputs[1].tensor.dims() == std::vector<int64_t>{2, 2, 2});
    CHECK(Int32Values(outputs[1].tensor) == std::vector<int64_t>{7, -8, 16, -8, 259, 502, 13, -8});
  }
}

TEST_CASE("int32 products beyond float32's exact range stay exact on both paths", "[cpu][quantized]") {
  // 1023 products of 255 · 127: 33,129,855, odd and above 2^24, where float32 holds only even
  // integers; every partial sum past 2^24 would round on the float32 path.
  const std::string text = QuantizedModel(R"(
graph g (uint8[2,1023] %a, int8[1023,2] %b) -> (int32 %y) {
  %y = MatMulInteger(%a, %b)
})");
  for (const char* path : kPaths) {
    ScopedEnv env("FUSIONOPT_CPU_INT8", path);
    INFO("path " << path);
    auto outputs = Run(text, {{"a", Make<uint8_t>(DataType::kUint8, {2, 1023}, std::vector<uint8_t>(2046, 255))},
                              {"b", Make<int8_t>(DataType::kInt8, {1023, 2}, std::vector<int8_t>(2046, 127))}});
    CHECK(Int32Values(outputs[0].tensor) == std::vector<int64_t>(4, 33129855));
  }
  // The same sum as a 1x1 ConvInteger over 1023 channels.
  const std::string conv = QuantizedModel(R"(
graph g (uint8[1,1023,1,2] %x, int8[2,1023,1,1] %w) -> (int32 %y) {
  %y = ConvInteger(%x, %w)
})");
  for (const char* path : kPaths) {
    ScopedEnv env("FUSIONOPT_CPU_INT8", path);
    INFO("path " << path);
    auto outputs = Run(conv, {{"x", Make<uint8_t>(DataType::kUint8, {1, 1023, 1, 2}, std::vector<uint8_t>(2046, 255))},
                              {"w", Make<int8_t>(DataType::kInt8, {2, 1023, 1, 1}, std::vector<int8_t>(2046, 127))}});
    CHECK(Int32Values(outputs[0].tensor) == std::vector<int64_t>(4, 33129855));
  }
}

TEST_CASE("MatMulIntegerToFloat with float16 scales writes float16 on both paths", "[cpu][quantized]") {
  // oneDNN's int8 primitive writes float32: a float16 output is computed on the float32 path
  // and converted, never written four bytes an element into a two-byte buffer.
  const std::string text = QuantizedModel(R"(
graph g (uint8[64,2] %a) -> (float16 %y)
  init int8[2,2] %b = [1, 2, 3, 4]
  init float16[] %a_scale = [0.5]
  init float16[2] %b_scale = [1.0, 0.25]
  init uint8[] %a_zero = [1]
{
  %y = com.microsoft::MatMulIntegerToFloat(%a, %b, %a_scale, %b_scale, %a_zero)
})");
  std::vector<uint8_t> a;
  for (int row = 0; row < 64; ++row) a.insert(a.end(), {3, 5});
  for (const char* path : kPaths) {
    ScopedEnv env("FUSIONOPT_CPU_INT8", path);
    INFO("path " << path);
    auto outputs = Run(text, {{"a", Make<uint8_t>(DataType::kUint8, {64, 2}, a)}});
    REQUIRE(outputs[0].tensor.dtype() == DataType::kFloat16);
    // Each row: (a - 1) · b = [14, 20]; · 0.5 · [1, 0.25] = [7, 2.5].
    std::vector<double> expected;
    for (int row = 0; row < 64; ++row) expected.insert(expected.end(), {7.0, 2.5});
    CheckClose(outputs[0].tensor, {64, 2}, expected);
  }
}
