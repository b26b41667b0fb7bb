// The contraction family of the CPU runtime: MatMul, Gemm, Conv, ConvTranspose, pooling
// and the normalizations with statistics, each with hand-computed numbers and the errors a
// bad model must produce (at Create when attributes or declared shapes show it, else at Run).
#include <catch2/catch.hpp>

#include <cmath>

#include "cpu_runtime/engine/session.h"
#include "cpu_test_support.h"
#include "ir/float16.h"
#include "text_format/text_format.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::cpu_test;

namespace {

// "graph ... { nodes }" wrapped into a model with the given default-domain opset.
std::string ModelText(const std::string& graph, int opset = 17) {
  return "ir_version 8\nopset \"\" " + std::to_string(opset) + "\n" + graph;
}

std::string RunError(const std::string& text, const std::vector<NamedTensor>& feeds) {
  auto outputs = Prepare(text).session->Run(feeds);
  REQUIRE_FALSE(outputs.ok());
  return outputs.status().message();
}

}  // namespace

TEST_CASE("MatMul: 2-D, broadcast batches and 1-D operands", "[cpu]") {
  const std::string text = ModelText(R"(
graph g (float %a, float %b) -> (float %y) {
  %y = MatMul(%a, %b)
})");
  RtTensor a = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  RtTensor b = Floats({3, 2}, {1, 0, 0, 1, 1, 1});
  CheckClose(Run(text, {{"a", a}, {"b", b}})[0].tensor, {2, 2}, {4, 5, 10, 11});

  // A's single batch broadcasts over B's two.
  RtTensor b2 = Floats({2, 3, 2}, {1, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2, 2});
  CheckClose(Run(text, {{"a", a.Reshaped({1, 2, 3})}, {"b", b2}})[0].tensor, {2, 2, 2}, {4, 5, 10, 11, 12, 12, 30, 30});
  // 1-D on either side drops its unit dim from the result.
  CheckClose(Run(text, {{"a", Floats({3}, {1, 2, 3})}, {"b", b2}})[0].tensor, {2, 2}, {4, 5, 12, 12});
  CheckClose(Run(text, {{"a", a.Reshaped({2, 1, 3})}, {"b", Floats({3}, {1, 1, 1})}})[0].tensor, {2, 1}, {6, 15});

  CHECK_THAT(RunError(text, {{"a", a}, {"b", Floats({2, 2}, {1, 2, 3, 4})}}),
             Catch::Contains("inner dimensions differ"));
  RtTensor batch_of_two = Floats({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  RtTensor batch_of_three = Floats({3, 3, 1}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  CHECK_THAT(RunError(text, {{"a", batch_of_two}, {"b", batch_of_three}}), Catch::Contains("do not broadcast"));
}

TEST_CASE("MatMul in float16 and double", "[cpu]") {
  auto half = Run(ModelText(R"(
graph g () -> (float16 %y)
  init float16[1,2] %a = [1, 2]
  init float16[2,1] %b = [3, 4]
{
  %y = MatMul(%a, %b)
})"));
  REQUIRE(half[0].tensor.dtype() == DataType::kFloat16);
  CheckClose(half[0].tensor, {1, 1}, {11});
  auto wide = Run(ModelText(R"(
graph g () -> (double %y)
  init double[2,3] %a = [1, 2, 3, 4, 5, 6]
  init double[3,2] %b = [1, 0, 0, 1, 1, 1]
{
  %y = MatMul(%a, %b)
})"));
  REQUIRE(wide[0].tensor.dtype() == DataType::kDouble);
  CheckClose(wide[0].tensor, {2, 2}, {4, 5, 10, 11});
  auto integers = Run(ModelText(R"(
graph g () -> (int32 %y)
  init int32[2,2] %a = [1, -2, 3, 4]
  init int32[2,1] %b = [5, 6]
{
  %y = MatMul(%a, %b)
})"));
  REQUIRE(integers[0].tensor.dtype() == DataType::kInt32);
  CHECK(Values(integers[0].tensor) == std::vector<double>{-7, 39});
}

TEST_CASE("Gemm: transposes, alpha, beta and broadcast C", "[cpu]") {
  // A' = [[1,2,3],[4,5,6]], B' = [[1,0],[0,1],[1,1]]: A'B' = [[4,5],[10,11]].
  RtTensor a_t = Floats({3, 2}, {1, 4, 2, 5, 3, 6});
  RtTensor b_t = Floats({2, 3}, {1, 0, 1, 0, 1, 1});
  auto bias_row = Run(ModelText(R"(
graph g (float %a, float %b) -> (float %y)
  init float[2] %c = [10, 20]
{
  %y = Gemm(%a, %b, %c) {transA: 1, transB: 1}
})"), {{"a", a_t}, {"b", b_t}});
  CheckClose(bias_row[0].tensor, {2, 2}, {14, 25, 20, 31});

  auto scaled = Run(ModelText(R"(
graph g (float %a, float %b, float %c) -> (float %y) {
  %y = Gemm(%a, %b, %c) {transA: 1, transB: 1, alpha: 2.0, beta: 0.5}
})"), {{"a", a_t}, {"b", b_t}, {"c", Floats({2, 1}, {2, 4})}});
  CheckClose(scaled[0].tensor, {2, 2}, {9, 11, 22, 24});

  auto no_c = Run(ModelText(R"(
graph g (float %a, float %b) -> (float %y) {
  %y = Gemm(%a, %b) {alpha: 0.5}
})"), {{"a", Floats({1, 2}, {2, 4})}, {"b", Floats({2, 1}, {1, 1})}});
  CheckClose(no_c[0].tensor, {1, 1}, {3});

  std::string error = RunError(ModelText(R"(
graph g (float %a, float %b, float %c) -> (float %y) {
  %y = Gemm(%a, %b, %c) {transA: 1, transB: 1}
})"), {{"a", a_t}, {"b", b_t}, {"c", Floats({3}, {1, 2, 3})}});
  CHECK_THAT(error, Catch::Contains("does not broadcast to [2,2]"));
  CHECK_THAT(RunError(ModelText(R"(
graph g (float %a, float %b) -> (float %y) {
  %y = Gemm(%a, %b)
})"), {{"a", a_t}, {"b", a_t}}), Catch::Contains("inner dimensions differ"));
}

TEST_CASE("constant MatMul and Gemm weights give the same numbers as fed ones", "[cpu]") {
  // B = [[1,0],[0,1],[1,1]] as an initializer: the kernel keeps its own column-major copy.
  RtTensor a = Floats({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  auto shared = Run(ModelText(R"(
graph g (float %a) -> (float %y)
  init float[1,3,2] %b = [1, 0, 0, 1, 1, 1]
{
  %y = MatMul(%a, %b)
})"), {{"a", a}});
  CheckClose(shared[0].tensor, {2, 1, 2}, {4, 5, 10, 11});
  // One matrix per batch is not a shared weight: it stays as loaded.
  auto per_batch = Run(ModelText(R"(
graph g (float %a) -> (float %y)
  init float[2,3,1] %b = [1, 1, 1, 1, 0, 2]
{
  %y = MatMul(%a, %b)
})"), {{"a", a}});
  CheckClose(per_batch[0].tensor, {2, 1, 1}, {6, 16});
  // A 1-D constant B is a column already.
  auto vector_b = Run(ModelText(R"(
graph g (float %a) -> (float %y)
  init float[3] %b = [1, 0, 2]
{
  %y = MatMul(%a, %b)
})"), {{"a", a}});
  CheckClose(vector_b[0].tensor, {2, 1}, {7, 16});

  const std::string gemm = R"(
graph g (float %a) -> (float %y)
  init float[3,2] %b = [1, 0, 0, 1, 1, 1]
  init float[2] %c = [10, 20]
{
  %y = Gemm(%a, %b, %c) {alpha: 2.0}
})";
  RtTensor rows = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  CheckClose(Run(ModelText(gemm), {{"a", rows}})[0].tensor, {2, 2}, {18, 30, 30, 42});
  const std::string gemm_trans_b = R"(
graph g (float %a) -> (float %y)
  init float[2,3] %b = [1, 0, 1, 0, 1, 1]
{
  %y = Gemm(%a, %b) {transB: 1}
})";
  CheckClose(Run(ModelText(gemm_trans_b), {{"a", rows}})[0].tensor, {2, 2}, {4, 5, 10, 11});
  // Many rows and a wide B: the column-major copy must hold every element in its place.
  std::vector<double> wide(16 * 24);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<double>(i % 7) - 3.0;
  RtTensor many_rows = Iota({5, 16});
  std::vector<double> expected(5 * 24, 0.0);
  for (int row = 0; row < 5; ++row) {
    for (int column = 0; column < 24; ++column) {
      for (int inner = 0; inner < 16; ++inner) expected[row * 24 + column] += (row * 16 + inner) * wide[inner * 24 + column];
    }
  }
  std::string constant = "graph g (float %a) -> (float %y)\n  init float[16,24] %b = [";
  for (size_t i = 0; i < wide.size(); ++i) constant += (i ? ", " : "") + std::to_string(wide[i]);
  constant += "]\n{\n  %y = MatMul(%a, %b)\n}";
  CheckClose(Run(ModelText(constant), {{"a", many_rows}})[0].tensor, {5, 24}, expected);
}

TEST_CASE("constant float16 and bfloat16 weights: packed from the model's bytes or converted, same numbers", "[cpu]") {
  // Packed (ConstantWeightsLayout on AVX-512, or forced) reorders B straight from its 16-bit
  // bytes; column-major converts it to float32 first. ctest runs this under both.
  for (const std::string type : {"float16", "bfloat16"}) {
    INFO(type);
    const std::string matmul = "graph g (" + type + " %a) -> (" + type + " %y)\n  init " + type +
                               "[3,2] %b = [1, 0, 0, 1, 1, 1]\n{\n  %y = MatMul(%a, %b)\n}";
    const DataType dtype = type == "float16" ? DataType::kFloat16 : DataType::kBFloat16;
    RtTensor a = RtTensor::Allocate(dtype, {2, 3});
    const std::vector<float> values = {1, 2, 3, 4, 5, 6};
    for (size_t i = 0; i < values.size(); ++i) {
      a.data<uint16_t>()[i] = dtype == DataType::kFloat16 ? FloatToHalf(values[i]) : FloatToBFloat16(values[i]);
    }
    auto product = Run(ModelText(matmul), {{"a", a}});
    REQUIRE(product[0].tensor.dtype() == dtype);
    CheckClose(product[0].tensor, {2, 2}, {4, 5, 10, 11});
    const std::string gemm = "graph g (" + type + " %a) -> (" + type + " %y)\n  init " + type +
                             "[2,3] %b = [1, 0, 1, 0, 1, 1]\n{\n  %y = Gemm(%a, %b) {transB: 1}\n}";
    CheckClose(Run(ModelText(gemm), {{"a", a}})[0].tensor, {2, 2}, {4, 5, 10, 11});
  }
}

TEST_CASE("Conv: pads, strides, bias, groups, auto_pad, dilations, 1-D to 3-D", "[cpu]") {
  RtTensor x = Floats({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  CheckClose(Run(ModelText(R"(
graph g (float[1,1,3,3] %x) -> (float %y)
  init float[1,1,2,2] %w = [1, 1, 1, 1]
{
  %y = Conv(%x, %w)
})"), {{"x", x}})[0].tensor, {1, 1, 2, 2}, {12, 16, 24, 28});

  CheckClose(Run(ModelText(R"(
graph g (float[1,1,3,3] %x) -> (float %y)
  init float[1,1,2,2] %w = [1, 1, 1, 1]
  init float[1] %b = [1]
{
  %y = Conv(%x, %w, %b) {pads: [1, 1, 1, 1], strides: [2, 2], kernel_shape: [2, 2]}
})"), {{"x", x}})[0].tensor, {1, 1, 2, 2}, {2, 6, 12, 29});

  // Depthwise: each channel has its own 2x2 filter.
  CheckClose(Run(ModelText(R"(
graph g () -> (float %y)
  init float[1,2,2,2] %x = [1, 2, 3, 4, 5, 6, 7, 8]
  init float[2,1,2,2] %w = [1, 1, 1, 1, 1, 0, 0, -1]
{
  %y = Conv(%x, %w) {group: 2}
})"))[0].tensor, {1, 2, 1, 1}, {10, -3});

  // Pointwise (the row-major GEMM path) with bias.
  CheckClose(Run(ModelText(R"(
graph g () -> (float %y)
  init float[1,2,1,2] %x = [1, 2, 3, 4]
  init float[3,2,1,1] %w = [1, 0, 0, 1, 1, 1]
  init float[3] %b = [0, 0, 10]
{
  %y = Conv(%x, %w, %b)
})"))[0].tensor, {1, 3, 1, 2}, {1, 2, 3, 4, 14, 16});

  const std::string one_d = R"(
graph g () -> (float %y)
  init float[1,1,5] %x = [1, 2, 3, 4, 5]
  init float[1,1,2] %w = [1, 1]
{
  %y = Conv(%x, %w) {ATTRS}
})";
  auto with = [&](const std::string& attributes) {
    std::string text = one_d;
    text.replace(text.find("ATTRS"), 5, attributes);
    return Run(ModelText(text))[0].tensor;
  };
  CheckClose(with("auto_pad: \"SAME_UPPER\", strides: [2]"), {1, 1, 3}, {3, 7, 5});
  CheckClose(with("auto_pad: \"SAME_LOWER\", strides: [2]"), {1, 1, 3}, {1, 5, 9});
  CheckClose(with("auto_pad: \"VALID\", strides: [2]"), {1, 1, 2}, {3, 7});
  CheckClose(with("dilations: [2]"), {1, 1, 3}, {4, 6, 8});

  CheckClose(Run(ModelText(R"(
graph g () -> (float %y)
  init float[1,1,2,2,2] %x = [1, 2, 3, 4, 5, 6, 7, 8]
  init float[1,1,2,2,2] %w = [1, 1, 1, 1, 1, 1, 1, 1]
{
  %y = Conv(%x, %w)
})"))[0].tensor, {1, 1, 1, 1, 1}, {36});
}

TEST_CASE("Conv in double matches float; primitives are cached per input shape", "[cpu]") {
  CheckClose(Run(ModelText(R"(
graph g () -> (double %y)
  init double[1,1,3,3] %x = [1, 2, 3, 4, 5, 6, 7, 8, 9]
  init double[1,1,2,2] %w = [1, 1, 1, 1]
  init double[1] %b = [1]
{
  %y = Conv(%x, %w, %b) {pads: [1, 1, 1, 1], strides: [2, 2]}
})"))[0].tensor, {1, 1, 2, 2}, {2, 6, 12, 29});

  Prepared prepared = Prepare(ModelText(R"(
graph g (float[N,1,2,2] %x) -> (float %y)
  init float[2,1,1,1] %w = [1, -1]
{
  %y = Conv(%x, %w)
})"));
  for (int round = 0; round < 2; ++round) {
    auto one = prepared.session->Run({{"x", Floats({1, 1, 2, 2}, {1, 2, 3, 4})}});
    REQUIRE(one.ok());
    CheckClose((*one)[0].tensor, {1, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -4});
    auto two = prepared.session->Run({{"x", Floats({2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}});
    REQUIRE(two.ok());
    CheckClose((*two)[0].tensor, {2, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -4, 5, 6, 7, 8, -5, -6, -7, -8});
  }
}

TEST_CASE("Conv errors: bad group, channel mismatch, window larger than input", "[cpu]") {
  CHECK_THAT(CreateError(ModelText(R"(
graph g (float[1,3,4,4] %x) -> (float %y)
  init float[2,2,1,1] %w = [1, 1, 1, 1]
{
  %y = Conv(%x, %w)
})")), Catch::Contains("input has 3 channels but weights [2,2,1,1] with group 1 expect 2"));
  CHECK_THAT(CreateError(ModelText(R"(
graph g (float[1,2,4,4] %x) -> (float %y)
  init float[3,1,1,1] %w = [1, 1, 1]
{
  %y = Conv(%x, %w) {group: 2}
})")), Catch::Contains("not divisible by group 2"));
  CHECK_THAT(CreateError(ModelText(R"(
graph g (float[1,1,4,4] %x) -> (float %y)
  init float[1,1,1,1] %w = [1]
{
  %y = Conv(%x, %w) {group: 0}
})")), Catch::Contains("group 0 must be >= 1"));
  CHECK_THAT(CreateError(ModelText(R"(
graph g (float[1,1,4,4] %x) -> (float %y)
  init float[1,1,1,1] %w = [1]
{
  %y = Conv(%x, %w) {auto_pad: "SAME"}
})")), Catch::Contains("auto_pad 'SAME'"));

  const std::string symbolic = ModelText(R"(
graph g (float[N,C,H,W] %x) -> (float %y)
  init float[2,2,1,1] %w = [1, 1, 1, 1]
{
  %y = Conv(%x, %w) @conv
})");
  std::string error = RunError(symbolic, {{"x", Floats({1, 3, 1, 1}, {1, 2, 3})}});
  CHECK_THAT(error, Catch::Contains("node 'conv' (Conv)"));
  CHECK_THAT(error, Catch::Contains("input has 3 channels"));
  CHECK_THAT(RunError(ModelText(R"(
graph g (float %x) -> (float %y)
  init float[1,1,3,3] %w = [1, 1, 1, 1, 1, 1, 1, 1, 1]
{
  %y = Conv(%x, %w)
})"), {{"x", Floats({1, 1, 2, 2}, {1, 2, 3, 4})}}), Catch::Contains("larger than the padded input"));
}

TEST_CASE("ConvTranspose: strides, output_padding, pads, output_shape, groups", "[cpu]") {
  const std::string base = R"(
graph g () -> (float %y)
  init float[1,1,3] %x = [1, 2, 3]
  init float[1,1,3] %w = [1, 1, 1]
  init float[1] %b = [10]
{
  %y = ConvTranspose(%x, %w, %b) {ATTRS}
})";
  auto with = [&](const std::string& attributes) {
    std::string text = base;
    text.replace(text.find("ATTRS"), 5, attributes);
    return Run(ModelText(text))[0].tensor;
  };
  CheckClose(with("strides: [2]"), {1, 1, 7}, {11, 11, 13, 12, 15, 13, 13});
  // The padded-on element receives no input, only the bias.
  CheckClose(with("strides: [2], output_padding: [1]"), {1, 1, 8}, {11, 11, 13, 12, 15, 13, 13, 10});
  CheckClose(with("strides: [2], output_shape: [8]"), {1, 1, 8}, {11, 11, 13, 12, 15, 13, 13, 10});
  CheckClose(with("strides: [2], pads: [1, 1]"), {1, 1, 5}, {11, 13, 12, 15, 13});

  // output_shape beyond the natural size (4) with a dilated kernel: one bias-only cell on
  // each side; out[i + 1 + 2k] += x[i] * w[k].
  CheckClose(Run(ModelText(R"(
graph g () -> (float %y)
  init float[1,1,2] %x = [1, 2]
  init float[1,1,2] %w = [1, 10]
  init float[1] %b = [100]
{
  %y = ConvTranspose(%x, %w, %b) {dilations: [2], output_shape: [6]}
})"))[0].tensor, {1, 1, 6}, {100, 101, 102, 110, 120, 100});

  CheckClose(Run(ModelText(R"(
graph g () -> (float %y)
  init float[1,2,2] %x = [1, 2, 3, 4]
  init float[2,1,2] %w = [1, 1, 1, -1]
{
  %y = ConvTranspose(%x, %w) {group: 2}
})"))[0].tensor, {1, 2, 3}, {1, 3, 2, 3, 1, -4});

  CheckClose(Run(ModelText(R"(
graph g () -> (double %y)
  init double[1,1,3] %x = [1, 2, 3]
  init double[1,1,3] %w = [1, 1, 1]
{
  %y = ConvTranspose(%x, %w) {strides: [2]}
})"))[0].tensor, {1, 1, 7}, {1, 1, 3, 2, 5, 3, 3});

  CHECK_THAT(CreateError(ModelText(R"(
graph g (float[1,2,3] %x) -> (float %y)
  init float[3,1,3] %w = [1, 1, 1, 1, 1, 1, 1, 1, 1]
{
  %y = ConvTranspose(%x, %w)
})")), Catch::Contains("input has 2 channels but weights [3,1,3] with group 1 expect 3"));
}

TEST_CASE("MaxPool: values, Indices in both storage orders, ceil_mode, dilations, uint8", "[cpu]") {
  std::vector<float> ramp(16);
  for (int i = 0; i < 16; ++i) ramp[i] = static_cast<float>(i + 1);
  RtTensor x = Floats({1, 1, 4, 4}, ramp);
  const std::string with_indices = ModelText(R"(
graph g (float %x) -> (float %y, int64 %i) {
  %y, %i = MaxPool(%x) {kernel_shape: [2, 2], strides: [2, 2], storage_order: ORDER}
})");
  for (int order : {0, 1}) {
    std::string text = with_indices;
    text.replace(text.find("ORDER"), 5, std::to_string(order));
    auto outputs = Run(text, {{"x", x}});
    CheckClose(outputs[0].tensor, {1, 1, 2, 2}, {6, 8, 14, 16});
    REQUIRE(outputs[1].tensor.dtype() == DataType::kInt64);
    const std::vector<double> row_major = {5, 7, 13, 15}, column_major = {5, 13, 7, 15};
    CHECK(Values(outputs[1].tensor) == (order == 0 ? row_major : column_major));
  }
  CheckClose(Run(ModelText(R"(
graph g (float %x) -> (float %y) {
  %y = MaxPool(%x) {kernel_shape: [2, 2], strides: [2, 2]}
})"), {{"x", x}})[0].tensor, {1, 1, 2, 2}, {6, 8, 14, 16});

  // ceil_mode keeps the partial window at 4 but drops one that would start in the padding.
  RtTensor line = Floats({1, 1, 5}, {1, 5, 2, 4, 3});
  const std::string pool_1d = ModelText(R"(
graph g (float %x) -> (float %y) {
  %y = MaxPool(%x) {ATTRS}
})");
  auto with = [&](const std::string& attributes, const RtTensor& input) {
    std::string text = pool_1d;
    text.replace(text.find("ATTRS"), 5, attributes);
    return Run(text, {{"x", input}})[0].tensor;
  };
  CheckClose(with("kernel_shape: [2], strides: [2], ceil_mode: 1", line), {1, 1, 3}, {5, 4, 3});
  CheckClose(with("kernel_shape: [2], strides: [2]", line), {1, 1, 2}, {5, 4});
  CheckClose(with("kernel_shape: [2], strides: [2], pads: [0, 1], ceil_mode: 1", Floats({1, 1, 4}, {1, 2, 3, 4})),
             {1, 1, 2}, {2, 4});
  CheckClose(with("kernel_shape: [2], dilations: [2]", line), {1, 1, 3}, {2, 5, 3});
  CheckClose(with("kernel_shape: [3], pads: [1, 1], auto_pad: \"SAME_UPPER\"", line), {1, 1, 5}, {5, 5, 5, 4, 4});

  auto bytes = Run(ModelText(R"(
graph g () -> (uint8 %y)
  init uint8[1,1,2,2] %x = [1, 200, 3, 4]
{
  %y = MaxPool(%x) {kernel_shape: [2, 2]}
})"));
  REQUIRE(bytes[0].tensor.dtype() == DataType::kUint8);
  CHECK(Values(bytes[0].tensor) == std::vector<double>{200});

  CHECK_THAT(CreateError(ModelText(R"(
graph g (float %x) -> (float %y) {
  %y = MaxPool(%x) {strides: [2, 2]}
})")), Catch::Contains("kernel_shape is required"));
  CHECK_THAT(CreateError(ModelText(R"(
graph g (float %x) -> (float %y, int64 %i) {
  %y, %i = MaxPool(%x) {kernel_shape: [2], storage_order: 2}
})")), Catch::Contains("storage_order 2 must be 0 or 1"));
  CHECK_THAT(RunError(with_indices.substr(0, with_indices.find("ORDER")) + "0}\n}", {{"x", line}}),
             Catch::Contains("does not fit input"));
}

TEST_CASE("AveragePool, LpPool and the global pools", "[cpu]") {
  const std::string average = ModelText(R"(
graph g (float %x) -> (float %y) {
  %y = AveragePool(%x) {ATTRS}
})");
  auto with = [&](const std::string& attributes, const RtTensor& input) {
    std::string text = average;
    text.replace(text.find("ATTRS"), 5, attributes);
    return Run(text, {{"x", input}})[0].tensor;
  };
  RtTensor square = Floats({1, 1, 2, 2}, {1, 2, 3, 4});
  CheckClose(with("kernel_shape: [2, 2], pads: [1, 1, 0, 0]", square), {1, 1, 2, 2}, {1, 1.5, 2, 2.5});
  CheckClose(with("kernel_shape: [2, 2], pads: [1, 1, 0, 0], count_include_pad: 1", square), {1, 1, 2, 2},
             {0.25, 0.75, 1, 2.5});
  RtTensor line = Floats({1, 1, 5}, {1, 2, 3, 4, 5});
  CheckClose(with("kernel_shape: [2], strides: [2], ceil_mode: 1", line), {1, 1, 3}, {1.5, 3.5, 5});
  // The partial window past the input holds no padding either: it divides by 1.
  CheckClose(with("kernel_shape: [2], strides: [2], ceil_mode: 1, count_include_pad: 1", line), {1, 1, 3},
             {1.5, 3.5, 5});

  CheckClose(Run(ModelText(R"(
graph g () -> (float %y)
  init float[1,1,4] %x = [3, 4, 0, -5]
{
  %y = LpPool(%x) {kernel_shape: [2], strides: [2], p: 2}
})"))[0].tensor, {1, 1, 2}, {5, 5});

  const std::string globals = ModelText(R"(
graph g () -> (float %avg, float %max, float %lp)
  init float[1,2,2,2] %x = [1, 2, 3, 4, -1, -2, -3, -8]
{
  %avg = GlobalAveragePool(%x)
  %max = GlobalMaxPool(%x)
  %lp = GlobalLpPool(%x)
})");
  auto outputs = Run(globals);
  CheckClose(outputs[0].tensor, {1, 2, 1, 1}, {2.5, -3.5});
  CheckClose(outputs[1].tensor, {1, 2, 1, 1}, {4, -1});
  CheckClose(outputs[2].tensor, {1, 2, 1, 1}, {std::sqrt(30.0), std::sqrt(78.0)});

  CHECK_THAT(RunError(ModelText(R"(
graph g (float %x) -> (float %y) {
  %y = GlobalAveragePool(%x)
})"), {{"x", Floats({2, 2}, {1, 2, 3, 4})}}), Catch::Contains("(N, C, D1, ...)"));
}

TEST_CASE("BatchNormalization: inference, constant and runtime parameters, training mode, spatial=0", "[cpu]") {
  RtTensor x = Floats({1, 2, 1, 2}, {1, 2, 3, 4});
  CheckClose(Run(ModelText(R"(
graph g (float %x) -> (float %y)
  init float[2] %scale = [1, 2]
  init float[2] %bias = [0, 1]
  init float[2] %mean = [1, 3]
  init float[2] %var = [4, 0.25]
{
  %y = BatchNormalization(%x, %scale, %bias, %mean, %var) {epsilon: 0.0}
})"), {{"x", x}})[0].tensor, {1, 2, 1, 2}, {0, 0.5, 1, 5});

  const std::string runtime = ModelText(R"(
graph g (float %x, float %scale, float %bias, float %mean, float %var) -> (float %y) {
  %y = BatchNormalization(%x, %scale, %bias, %mean, %var) {epsilon: 0.0}
})");
  auto params = [](std::vector<float> scale) {
    return std::vector<NamedTensor>{{"scale", Floats({static_cast<int64_t>(scale.size())}, scale)},
                                    {"bias", Floats({2}, {0, 1})}, {"mean", Floats({2}, {1, 3})},
                                    {"var", Floats({2}, {4, 0.25})}};
  };
  std::vector<NamedTensor> feeds = params({1, 2});
  feeds.push_back({"x", x});
  CheckClose(Run(runtime, feeds)[0].tensor, {1, 2, 1, 2}, {0, 0.5, 1, 5});
  feeds = params({1, 2, 3});
  feeds.push_back({"x", x});
  CHECK_THAT(RunError(runtime, feeds), Catch::Contains("expected 2 values"));

  // Batch statistics: mean 3, population variance 3.5; running = 0.5 * old + 0.5 * new.
  auto training = Run(ModelText(R"(
graph g () -> (float %y, float %running_mean, float %running_var)
  init float[2,1,2] %x = [1, 2, 3, 6]
  init float[1] %scale = [1]
  init float[1] %bias = [0]
  init float[1] %mean = [0]
  init float[1] %var = [1]
{
  %y, %running_mean, %running_var = BatchNormalization(%x, %scale, %bias, %mean, %var)
      {epsilon: 0.0, momentum: 0.5, training_mode: 1}
})", 15));
  const double deviation = std::sqrt(3.5);
  CheckClose(training[0].tensor, {2, 1, 2}, {-2 / deviation, -1 / deviation, 0, 3 / deviation});
  CheckClose(training[1].tensor, {1}, {1.5});
  CheckClose(training[2].tensor, {1}, {2.25});

  // Opset 7, spatial = 0: one parameter per (C, D1) element.
  CheckClose(Run(ModelText(R"(
graph g () -> (float %y)
  init float[1,1,2] %x = [3, 5]
  init float[1,2] %scale = [1, 2]
  init float[1,2] %bias = [0, 0]
  init float[1,2] %mean = [1, 1]
  init float[1,2] %var = [1, 1]
{
  %y = BatchNormalization(%x, %scale, %bias, %mean, %var) {epsilon: 0.0, spatial: 0}
})", 7))[0].tensor, {1, 1, 2}, {2, 8});

  CHECK_THAT(CreateError(ModelText(R"(
graph g (float %x, float %s, float %b, float %m, float %v) -> (float %y, float %rm) {
  %y, %rm = BatchNormalization(%x, %s, %b, %m, %v)
})", 15)), Catch::Contains("only in training mode"));
}

TEST_CASE("InstanceNormalization and LRN", "[cpu]") {
  // mean 2.5, variance 1.25; y = 2 * (x - 2.5) / sqrt(1.25) + 1.
  const double deviation = std::sqrt(1.25);
  const std::string instance = ModelText(R"(
graph g (float %x, float %scale) -> (float %y)
  init float[1] %bias = [1]
{
  %y = InstanceNormalization(%x, %scale, %bias) {epsilon: 0.0}
})");
  CheckClose(Run(instance, {{"x", Floats({1, 1, 4}, {1, 2, 3, 4})}, {"scale", Floats({1}, {2})}})[0].tensor, {1, 1, 4},
             {1 - 3 / deviation, 1 - 1 / deviation, 1 + 1 / deviation, 1 + 3 / deviation});
  CHECK_THAT(RunError(instance, {{"x", Floats({1, 1, 4}, {1, 2, 3, 4})}, {"scale", Floats({2}, {2, 2})}}),
             Catch::Contains("needs 1 values"));

  // alpha / size = 1: y = x / (1 + sum of squares over the channel window).
  const std::string lrn = ModelText(R"(
graph g (float %x) -> (float %y) {
  %y = LRN(%x) {size: SIZE, alpha: ALPHA, beta: 1.0, bias: 1.0}
})");
  auto with = [&](const std::string& size, const std::string& alpha, const RtTensor& x) {
    std::string text = lrn;
    text.replace(text.find("SIZE"), 4, size);
    text.replace(text.find("ALPHA"), 5, alpha);
    return Run(text, {{"x", x}})[0].tensor;
  };
  RtTensor channels = Floats({1, 3, 1, 1}, {1, 2, 3});
  CheckClose(with("3", "3.0", channels), {1, 3, 1, 1}, {1.0 / 6, 2.0 / 15, 3.0 / 14});
  // An even size reaches one channel further forward than back.
  CheckClose(with("2", "2.0", channels), {1, 3, 1, 1}, {1.0 / 6, 2.0 / 14, 3.0 / 10});
  CheckClose(with("3", "3.0", channels.Reshaped({1, 3})), {1, 3}, {1.0 / 6, 2.0 / 15, 3.0 / 14});

  CHECK_THAT(CreateError(ModelText(R"(
graph g (float %x) -> (float %y) {
  %y = LRN(%x) {alpha: 1.0}
})")), Catch::Contains("size attribute is required"));
}
