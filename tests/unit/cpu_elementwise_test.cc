#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "cpu_runtime/elementwise/byte_table.h"
#include "cpu_runtime/elementwise/elementwise.h"
#include "cpu_runtime/elementwise/internal.h"
#include "cpu_runtime/engine/vector_isa.h"
#include "cpu_runtime/reduction/math.h"
#include "cpu_runtime/engine/session.h"
#include "cpu_runtime/quantized/quantize_expr.h"
#include "cpu_test_support.h"
#include "ir/float16.h"
#include "text_format/text_format.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::cpu_test;

TEST_CASE("broadcasting follows numpy and names incompatible shapes", "[cpu]") {
  RtTensor a = Floats({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  RtTensor b = Floats({4, 1}, {0, 0, 0, 0});
  REQUIRE(ew::BroadcastDims({&a, &b}).value() == std::vector<int64_t>{2, 4, 3});
  RtTensor c = Floats({2}, {0, 0});
  auto bad = ew::BroadcastDims({&a, &c});
  REQUIRE_THAT(bad.status().message(), Catch::Contains("[2,1,3] and [2]"));
}

TEST_CASE("a fused program evaluates several ops in one pass with broadcasting", "[cpu]") {
  // y = Relu(x * scale + bias) with scale [3] and bias [2,1]
  ew::ProgramBuilder builder({DataType::kFloat, DataType::kFloat, DataType::kFloat});
  int product = builder.Emit(ew::Op::kMul, {0, 1}).value();
  int sum = builder.Emit(ew::Op::kAdd, {product, 2}).value();
  int relu = builder.Emit(ew::Op::kRelu, {sum}).value();
  builder.AddOutput(relu);
  builder.AddOutput(sum);
  ew::Program program = builder.Finish("fused(Mul,Add,Relu)");

  RtTensor x = Floats({2, 3}, {1, -2, 3, -4, 5, -6});
  RtTensor scale = Floats({3}, {2, 2, 0.5f});
  RtTensor bias = Floats({2, 1}, {-1, 1});
  RtTensor y = RtTensor::Allocate(DataType::kFloat, {2, 3});
  RtTensor s = RtTensor::Allocate(DataType::kFloat, {2, 3});
  REQUIRE(ew::Evaluate(program, {&x, &scale, &bias}, {&y, &s}).ok());
  REQUIRE(Values(s) == std::vector<double>{1, -5, 0.5, -7, 11, -2});
  REQUIRE(Values(y) == std::vector<double>{1, 0, 0.5, 0, 11, 0});
}

TEST_CASE("large tensors are split in tiles and threads without changing results", "[cpu]") {
  const int64_t n = 3 * 100003;  // not a multiple of the tile
  RtTensor x = RtTensor::Allocate(DataType::kFloat, {3, 100003});
  for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = static_cast<float>(i % 97) - 48.0f;
  RtTensor row = Floats({3, 1}, {1, 10, 100});
  ew::ProgramBuilder builder({DataType::kFloat, DataType::kFloat});
  builder.AddOutput(builder.Emit(ew::Op::kMul, {0, 1}).value());
  ew::Program program = builder.Finish("Mul");
  RtTensor y = RtTensor::Allocate(DataType::kFloat, {3, 100003});
  REQUIRE(ew::Evaluate(program, {&x, &row}, {&y}).ok());
  for (int64_t i = 0; i < n; i += 7919) {
    float factor = i < 100003 ? 1 : (i < 200006 ? 10 : 100);
    REQUIRE(y.data<float>()[i] == x.data<float>()[i] * factor);
  }
}

TEST_CASE("operands that repeat a row within planes (blocked-layout gates) give the broadcast result", "[cpu]") {
  // (batch, blocks, spatial, 8) activations against a gate (batch, blocks, 1, 8), a per-block
  // value (1, blocks, 1, 1) and a per-spatial row (1, 1, spatial, 8) the tiles still gather:
  // 300 spatial rows of 8 are not a multiple of a tile's rows, so planes end in partial tiles.
  const int64_t batch = 2, blocks = 5, spatial = 300, lanes = 8;
  const std::vector<int64_t> dims = {batch, blocks, spatial, lanes};
  RtTensor x = RtTensor::Allocate(DataType::kFloat, dims);
  RtTensor gate = RtTensor::Allocate(DataType::kFloat, {batch, blocks, 1, lanes});
  RtTensor per_block = RtTensor::Allocate(DataType::kFloat, {1, blocks, 1, 1});
  RtTensor per_row = RtTensor::Allocate(DataType::kFloat, {1, 1, spatial, lanes});
  for (int64_t i = 0; i < x.NumElements(); ++i) x.data<float>()[i] = static_cast<float>(i % 37) - 18.0f;
  for (int64_t i = 0; i < gate.NumElements(); ++i) gate.data<float>()[i] = 0.25f * static_cast<float>(i + 1);
  for (int64_t i = 0; i < blocks; ++i) per_block.data<float>()[i] = static_cast<float>(10 * i);
  for (int64_t i = 0; i < per_row.NumElements(); ++i) per_row.data<float>()[i] = static_cast<float>(i % 11);
  // y = x * gate + per_block - per_row
  ew::ProgramBuilder builder({DataType::kFloat, DataType::kFloat, DataType::kFloat, DataType::kFloat});
  int product = builder.Emit(ew::Op::kMul, {0, 1}).value();
  int sum = builder.Emit(ew::Op::kAdd, {product, 2}).value();
  builder.AddOutput(builder.Emit(ew::Op::kSub, {sum, 3}).value());
  ew::Program program = builder.Finish("fused(Mul,Add,Sub)");
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    RtTensor y = RtTensor::Allocate(DataType::kFloat, dims);
    REQUIRE(ew::Evaluate(program, {&x, &gate, &per_block, &per_row}, {&y}).ok());
    int64_t mismatches = 0;
    for (int64_t n = 0; n < batch; ++n) {
      for (int64_t b = 0; b < blocks; ++b) {
        for (int64_t s = 0; s < spatial; ++s) {
          for (int64_t l = 0; l < lanes; ++l) {
            const int64_t at = ((n * blocks + b) * spatial + s) * lanes + l;
            const float expected = x.data<float>()[at] * gate.data<float>()[(n * blocks + b) * lanes + l] +
                                   per_block.data<float>()[b] - per_row.data<float>()[s * lanes + l];
            mismatches += y.data<float>()[at] != expected;
          }
        }
      }
    }
    REQUIRE(mismatches == 0);
  }
  omp_set_num_threads(2);
}

TEST_CASE("contiguous operands are read and written in place with the same results", "[cpu]") {
  // One merged axis: x and z contiguous, a scalar broadcast, an int32 input converted, a
  // float16 output that must still be rounded through the register path, and one register
  // stored to two outputs.
  const int64_t n = 5 * 512 + 37;
  RtTensor x = RtTensor::Allocate(DataType::kFloat, {n});
  RtTensor z = RtTensor::Allocate(DataType::kFloat, {n});
  RtTensor k = RtTensor::Allocate(DataType::kInt32, {n});
  for (int64_t i = 0; i < n; ++i) {
    x.data<float>()[i] = static_cast<float>(i % 13) * 0.25f - 1.0f;
    z.data<float>()[i] = static_cast<float>(i % 7);
    k.data<int32_t>()[i] = static_cast<int32_t>(i % 5) - 2;
  }
  RtTensor scale = Floats({1}, {3.0f});
  ew::ProgramBuilder builder({DataType::kFloat, DataType::kFloat, DataType::kFloat, DataType::kInt32});
  int sum = builder.Emit(ew::Op::kAdd, {0, 1}).value();
  int scaled = builder.Emit(ew::Op::kMul, {sum, 2}).value();
  int offset = builder.Emit(ew::Op::kAdd, {scaled, builder.Convert(3, DataType::kFloat).value()}).value();
  builder.AddOutput(offset);
  builder.AddOutput(offset);
  builder.AddOutput(builder.Convert(sum, DataType::kFloat16).value());
  ew::Program program = builder.Finish("fused");
  RtTensor first = RtTensor::Allocate(DataType::kFloat, {n});
  RtTensor second = RtTensor::Allocate(DataType::kFloat, {n});
  RtTensor half = RtTensor::Allocate(DataType::kFloat16, {n});
  REQUIRE(ew::Evaluate(program, {&x, &z, &scale, &k}, {&first, &second, &half}).ok());
  for (int64_t i = 0; i < n; ++i) {
    float expected_sum = x.data<float>()[i] + z.data<float>()[i];
    float expected = expected_sum * 3.0f + static_cast<float>(k.data<int32_t>()[i]);
    REQUIRE(first.data<float>()[i] == expected);
    REQUIRE(second.data<float>()[i] == expected);
    REQUIRE(half.data<uint16_t>()[i] == FloatToHalf(expected_sum));
  }
}

TEST_CASE("Pow squares exactly and integer Pow survives hostile exponents", "[cpu]") {
  RtTensor base = Floats({4}, {1.5f, -3.0f, 0.1f, 2.0f});
  RtTensor exponent = Floats({4}, {2.0f, 2.0f, 2.0f, 0.5f});
  auto floats = Run(R"(
ir_version 8
opset "" 17
graph t (float[4] %x, float[4] %e) -> (float[4] %y)
{
  %y = Pow(%x, %e)
}
)",
                        {{"x", base}, {"e", exponent}});
  const float* y = floats[0].tensor.data<float>();
  REQUIRE(y[0] == 2.25f);
  REQUIRE(y[1] == 9.0f);
  REQUIRE(y[2] == std::pow(0.1f, 2.0f));
  REQUIRE(y[3] == std::sqrt(2.0f));

  RtTensor a = RtTensor::Allocate(DataType::kInt64, {5});
  RtTensor b = RtTensor::Allocate(DataType::kInt64, {5});
  const int64_t bases[] = {3, -1, 1, 2, -2}, exponents[] = {4, int64_t{1} << 62, int64_t{1} << 62, -1, 63};
  for (int i = 0; i < 5; ++i) {
    a.data<int64_t>()[i] = bases[i];
    b.data<int64_t>()[i] = exponents[i];
  }
  auto ints = Run(R"(
ir_version 8
opset "" 17
graph t (int64[5] %a, int64[5] %b) -> (int64[5] %y)
{
  %y = Pow(%a, %b)
}
)",
                      {{"a", a}, {"b", b}});
  // 2^62 steps would never finish; (-2)^63 wraps to INT64_MIN like numpy.
  REQUIRE(Values(ints[0].tensor) == std::vector<double>{81, 1, 1, 0, -9223372036854775808.0});
}

TEST_CASE("the builder rejects ops on types they are not defined for", "[cpu]") {
  ew::ProgramBuilder builder({DataType::kInt64, DataType::kFloat, DataType::kFloat});
  REQUIRE(builder.Emit(ew::Op::kExp, {0}).status().code() == ErrorCode::kUnsupported);
  REQUIRE(builder.Emit(ew::Op::kAdd, {0, 1}).status().code() == ErrorCode::kInvalidModel);
  REQUIRE(builder.Emit(ew::Op::kWhere, {1, 1, 2}).status().code() == ErrorCode::kInvalidModel);
  REQUIRE(builder.Emit(ew::Op::kAnd, {1, 2}).status().code() == ErrorCode::kUnsupported);
}

TEST_CASE("ONNX elementwise ops run through the session", "[cpu]") {
  auto outputs = Run(R"(
ir_version 8
opset "" 17
graph t (float[2,3] %x, float[3] %b) -> (float[2,3] %y, bool[2,3] %m, float[2,3] %c, int32[2,3] %i)
{
  %s = Add(%x, %b)
  %y = Relu(%s)
  %m = Greater(%s, %b)
  %lo = Constant() {value: tensor float[] [-0.5]}
  %c = Clip(%s, %lo, )
  %i = Cast(%s) {to: 6}
}
)",
                         {{"x", Floats({2, 3}, {1, -2, 3, -4, 5, -6})}, {"b", Floats({3}, {0.5f, 0.5f, 0.5f})}});
  REQUIRE(Values(outputs[0].tensor) == std::vector<double>{1.5, 0, 3.5, 0, 5.5, 0});
  REQUIRE(outputs[1].tensor.dtype() == DataType::kBool);
  REQUIRE(Values(outputs[1].tensor) == std::vector<double>{1, 0, 1, 0, 1, 0});
  REQUIRE(Values(outputs[2].tensor) == std::vector<double>{1.5, -0.5, 3.5, -0.5, 5.5, -0.5});
  REQUIRE(outputs[3].tensor.dtype() == DataType::kInt32);
  REQUIRE(Values(outputs[3].tensor) == std::vector<double>{1, -1, 3, -3, 5, -5});
}

TEST_CASE("integer and float16 arithmetic keep their ONNX types", "[cpu]") {
  RtTensor a = RtTensor::Allocate(DataType::kInt32, {3});
  a.data<int32_t>()[0] = 2147483647;
  a.data<int32_t>()[1] = -7;
  a.data<int32_t>()[2] = 7;
  RtTensor b = RtTensor::Allocate(DataType::kInt32, {3});
  b.data<int32_t>()[0] = 1;
  b.data<int32_t>()[1] = 2;
  b.data<int32_t>()[2] = -2;
  auto outputs = Run(R"(
ir_version 8
opset "" 17
graph t (int32[3] %a, int32[3] %b) -> (int32[3] %sum, int32[3] %quotient, int32[3] %mod)
{
  %sum = Add(%a, %b)
  %quotient = Div(%a, %b)
  %mod = Mod(%a, %b)
}
)",
                         {{"a", a}, {"b", b}});
  REQUIRE(Values(outputs[0].tensor) == std::vector<double>{-2147483648.0, -5, 5});  // wraps like int32
  REQUIRE(Values(outputs[1].tensor) == std::vector<double>{2147483647.0, -3, -3});  // truncates
  REQUIRE(Values(outputs[2].tensor) == std::vector<double>{0, 1, -1});              // sign of divisor

  RtTensor h = RtTensor::Allocate(DataType::kFloat16, {2});
  h.data<uint16_t>()[0] = FloatToHalf(1.0f);
  h.data<uint16_t>()[1] = FloatToHalf(2049.0f);  // not representable: 2048
  auto half = Run(R"(
ir_version 8
opset "" 17
graph t (float16[2] %h) -> (float16[2] %y)
{
  %y = Mul(%h, %h)
}
)",
                      {{"h", h}});
  REQUIRE(half[0].tensor.dtype() == DataType::kFloat16);
  REQUIRE(Values(half[0].tensor) == std::vector<double>{1, INFINITY});  // 2048^2 overflows float16
}

TEST_CASE("sessions reject unsupported ops and bad inputs by name", "[cpu]") {
  auto model = ParseModel(R"(
ir_version 8
opset "" 17
opset "com.example" 1
graph t (float[2] %x) -> (float[2] %y)
{
  %y = com.example::Frobnicate(%x) @frob
}
)");
  REQUIRE(model.ok());
  auto session = Session::Create(**model);
  REQUIRE(session.status().code() == ErrorCode::kUnsupported);
  REQUIRE_THAT(session.status().message(), Catch::Contains("'frob'") && Catch::Contains("Frobnicate") &&
                                               Catch::Contains("com.example") && Catch::Contains("opset 1"));

  auto good = ParseModel("ir_version 8\nopset \"\" 17\ngraph t (float[2] %x) -> (float[2] %y)\n{\n  %y = Neg(%x)\n}\n");
  auto neg = Session::Create(**good);
  REQUIRE(neg.ok());
  auto wrong_shape = (*neg)->Run({{"x", Floats({3}, {1, 2, 3})}});
  REQUIRE_THAT(wrong_shape.status().message(), Catch::Contains("input 'x'") && Catch::Contains("[3]"));
  auto missing = (*neg)->Run({});
  REQUIRE_THAT(missing.status().message(), Catch::Contains("'x' was not given"));
  RunStats stats;
  auto ran = (*neg)->Run({{"x", Floats({2}, {1, -2})}}, &stats);
  REQUIRE(ran.ok());
  REQUIRE(Values((*ran)[0].tensor) == std::vector<double>{-1, 2});
  REQUIRE(stats.kernels_launched == 1);
}

TEST_CASE("Relu and Max keep NaN like numpy and onnxruntime", "[cpu]") {
  RtTensor x = Floats({3}, {NAN, -1, 2});
  RtTensor zero = Floats({1}, {0});
  ew::ProgramBuilder builder({DataType::kFloat, DataType::kFloat});
  builder.AddOutput(builder.Emit(ew::Op::kRelu, {0}).value());
  builder.AddOutput(builder.Emit(ew::Op::kMax, {0, 1}).value());
  ew::Program program = builder.Finish("Relu,Max");
  RtTensor relu = RtTensor::Allocate(DataType::kFloat, {3});
  RtTensor max = RtTensor::Allocate(DataType::kFloat, {3});
  REQUIRE(ew::Evaluate(program, {&x, &zero}, {&relu, &max}).ok());
  REQUIRE(std::isnan(relu.data<float>()[0]));
  REQUIRE(std::isnan(max.data<float>()[0]));
  REQUIRE(relu.data<float>()[1] == 0.0f);
  REQUIRE(max.data<float>()[2] == 2.0f);
}

TEST_CASE("CastLike takes only the type of its second input", "[cpu]") {
  RtTensor like = RtTensor::Allocate(DataType::kInt64, {1});
  auto outputs = Run(R"(
ir_version 8
opset "" 17
graph t (float[2,3] %x, int64[1] %like) -> (int64[2,3] %y)
{
  %y = CastLike(%x, %like)
}
)",
                         {{"x", Floats({2, 3}, {1.5f, -2.5f, 3, 4, 5, 6})}, {"like", like}});
  REQUIRE(outputs[0].tensor.dtype() == DataType::kInt64);
  REQUIRE(outputs[0].tensor.dims() == std::vector<int64_t>{2, 3});
  REQUIRE(Values(outputs[0].tensor) == std::vector<double>{1, -2, 3, 4, 5, 6});
}

namespace {

// A tensor whose element i is value(i), stored as `dtype`.
template <typename F>
RtTensor Filled(DataType dtype, std::vector<int64_t> dims, F value) {
  RtTensor tensor = RtTensor::Allocate(dtype, std::move(dims));
  for (int64_t i = 0; i < tensor.NumElements(); ++i) {
    double v = value(i);
    switch (dtype) {
      case DataType::kFloat: tensor.data<float>()[i] = static_cast<float>(v); break;
      case DataType::kDouble: tensor.data<double>()[i] = v; break;
      case DataType::kFloat16: tensor.data<uint16_t>()[i] = FloatToHalf(static_cast<float>(v)); break;
      case DataType::kInt32: tensor.data<int32_t>()[i] = static_cast<int32_t>(v); break;
      case DataType::kBool: tensor.data<uint8_t>()[i] = v != 0.0; break;
      default: FAIL("no filler for this dtype");
    }
  }
  return tensor;
}

// Quarters in [-4, 4]: every sum and product of two stays exact in float and float16, so the
// engine's results can be compared exactly with a reference computed here.
double Quarter(int64_t i, int salt) { return static_cast<double>((i * 37 + salt) % 33 - 16) * 0.25; }

// The element of `tensor` that numpy broadcasting pairs with element `flat` of an output of
// dims `out_dims`.
double BroadcastValue(const RtTensor& tensor, const std::vector<int64_t>& out_dims, int64_t flat) {
  std::vector<int64_t> index(out_dims.size());
  for (size_t axis = out_dims.size(); axis-- > 0;) {
    index[axis] = flat % out_dims[axis];
    flat /= out_dims[axis];
  }
  int64_t offset = 0;
  size_t lead = out_dims.size() - tensor.rank();
  for (size_t axis = 0; axis < tensor.rank(); ++axis) {
    offset = offset * tensor.dim(axis) + (tensor.dim(axis) == 1 ? 0 : index[lead + axis]);
  }
  return tensor.ValueAsDouble(offset);
}

struct BroadcastCase {
  std::vector<int64_t> x, scale, bias;
};

}  // namespace

TEST_CASE("broadcast inputs are read in place or gathered per row, with exact results", "[cpu]") {
  // y = x * scale + bias, stored to two float outputs (computed in place into the first, copied
  // to the second) and rounded to a float16 output; the shapes cover rows longer than a tile
  // and not a multiple of it, a single row, rank-3 layouts whose outer index wraps inside and
  // between tiles, short rows grouped into tiles with a last partial tile, and each kind of
  // broadcast: scalar, along the row, across rows.
  const std::vector<BroadcastCase> cases = {
      {{5, 777}, {777}, {5, 1}},           {{1, 1100}, {1100}, {1}},
      {{3, 4, 1100}, {3, 1, 1100}, {1, 4, 1}}, {{6, 5, 300}, {6, 1, 300}, {1, 5, 1}},
      {{40, 30, 7}, {40, 1, 7}, {1, 30, 1}},   {{1000, 48}, {48}, {1000, 1}},
      {{7, 3, 5}, {1}, {5}},               {{9, 200}, {200}, {9, 1}},
      {{2, 64, 7, 7}, {1, 64, 1, 1}, {64, 1, 1}}, {{2, 16, 56, 56}, {16, 1, 1}, {1}},
  };
  ew::ProgramBuilder builder({DataType::kFloat, DataType::kFloat, DataType::kFloat});
  int product = builder.Emit(ew::Op::kMul, {0, 1}).value();
  int sum = builder.Emit(ew::Op::kAdd, {product, 2}).value();
  builder.AddOutput(sum);
  builder.AddOutput(sum);
  builder.AddOutput(builder.Convert(sum, DataType::kFloat16).value());
  ew::Program program = builder.Finish("fused(Mul,Add)");
  for (const BroadcastCase& shapes : cases) {
    RtTensor x = Filled(DataType::kFloat, shapes.x, [](int64_t i) { return Quarter(i, 0); });
    RtTensor scale = Filled(DataType::kFloat, shapes.scale, [](int64_t i) { return Quarter(i, 5); });
    RtTensor bias = Filled(DataType::kFloat, shapes.bias, [](int64_t i) { return Quarter(i, 11); });
    std::vector<int64_t> dims = ew::BroadcastDims({&x, &scale, &bias}).value();
    RtTensor y = RtTensor::Allocate(DataType::kFloat, dims);
    RtTensor copy = RtTensor::Allocate(DataType::kFloat, dims);
    RtTensor half = RtTensor::Allocate(DataType::kFloat16, dims);
    REQUIRE(ew::Evaluate(program, {&x, &scale, &bias}, {&y, &copy, &half}).ok());
    INFO("x " << DimsToString(shapes.x) << " scale " << DimsToString(shapes.scale) << " bias "
              << DimsToString(shapes.bias));
    int64_t wrong = 0;
    for (int64_t i = 0; i < y.NumElements(); ++i) {
      double expected = BroadcastValue(x, dims, i) * BroadcastValue(scale, dims, i) + BroadcastValue(bias, dims, i);
      wrong += y.data<float>()[i] != expected || copy.data<float>()[i] != expected ||
               HalfToFloat(half.data<uint16_t>()[i]) != expected;
    }
    REQUIRE(wrong == 0);
  }
}

TEST_CASE("inputs stored as other types than their lanes are converted per row", "[cpu]") {
  // int32 and float16 inputs cannot be read in place and a float16 output cannot be written in
  // place; the bool condition and the float input can. out = Where(cond, Cast(k) + h, x) in
  // float16, and its float copy.
  ew::ProgramBuilder builder({DataType::kInt32, DataType::kFloat16, DataType::kBool, DataType::kFloat});
  int k = builder.Convert(0, DataType::kFloat16).value();
  int sum = builder.Emit(ew::Op::kAdd, {k, 1}).value();
  int x = builder.Convert(3, DataType::kFloat16).value();
  int selected = builder.Emit(ew::Op::kWhere, {2, sum, x}).value();
  builder.AddOutput(selected);
  builder.AddOutput(builder.Convert(selected, DataType::kFloat).value());
  ew::Program program = builder.Finish("fused(Cast,Add,Where)");
  const std::vector<std::vector<std::vector<int64_t>>> cases = {
      {{6, 700}, {6, 1}, {700}, {6, 700}},     // one row per tile
      {{300, 20}, {300, 1}, {20}, {300, 20}},  // several rows per tile
      {{4, 9}, {1}, {4, 1}, {9}},              // every input broadcast somewhere
  };
  for (const auto& shapes : cases) {
    RtTensor ints = Filled(DataType::kInt32, shapes[0], [](int64_t i) { return Quarter(i, 3) * 4; });
    RtTensor halves = Filled(DataType::kFloat16, shapes[1], [](int64_t i) { return Quarter(i, 7); });
    RtTensor cond = Filled(DataType::kBool, shapes[2], [](int64_t i) { return (i * 7) % 3 != 0; });
    RtTensor floats = Filled(DataType::kFloat, shapes[3], [](int64_t i) { return Quarter(i, 1) + 0.125; });
    std::vector<int64_t> dims = ew::BroadcastDims({&ints, &halves, &cond, &floats}).value();
    RtTensor out = RtTensor::Allocate(DataType::kFloat16, dims);
    RtTensor widened = RtTensor::Allocate(DataType::kFloat, dims);
    REQUIRE(ew::Evaluate(program, {&ints, &halves, &cond, &floats}, {&out, &widened}).ok());
    INFO("output " << DimsToString(dims));
    int64_t wrong = 0;
    for (int64_t i = 0; i < out.NumElements(); ++i) {
      double expected = BroadcastValue(cond, dims, i) != 0
                            ? BroadcastValue(ints, dims, i) + BroadcastValue(halves, dims, i)
                            : BroadcastValue(floats, dims, i);
      wrong += HalfToFloat(out.data<uint16_t>()[i]) != expected || widened.data<float>()[i] != expected;
    }
    REQUIRE(wrong == 0);
  }
}

TEST_CASE("constants are filled once per thread and still reach their outputs", "[cpu]") {
  // 0.5 * x + 3 over row tiles, plus the constant 3 itself as a float output (computed into the
  // output every tile) and as a float16 output (kept in a register and stored).
  ew::ProgramBuilder builder({DataType::kFloat});
  int half = builder.Fill(0.5, DataType::kFloat).value();
  int three = builder.Fill(3.0, DataType::kFloat).value();
  int scaled = builder.Emit(ew::Op::kMul, {0, half}).value();
  builder.AddOutput(builder.Emit(ew::Op::kAdd, {scaled, three}).value());
  builder.AddOutput(three);
  builder.AddOutput(builder.Fill(3.0, DataType::kFloat16).value());
  ew::Program program = builder.Finish("fused(Mul,Add)");
  RtTensor x = Filled(DataType::kFloat, {3, 1300}, [](int64_t i) { return Quarter(i, 2); });
  RtTensor y = RtTensor::Allocate(DataType::kFloat, {3, 1300});
  RtTensor constant = RtTensor::Allocate(DataType::kFloat, {3, 1300});
  RtTensor constant16 = RtTensor::Allocate(DataType::kFloat16, {3, 1300});
  REQUIRE(ew::Evaluate(program, {&x}, {&y, &constant, &constant16}).ok());
  int64_t wrong = 0;
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    wrong += y.data<float>()[i] != x.data<float>()[i] * 0.5f + 3.0f || constant.data<float>()[i] != 3.0f ||
             constant16.data<uint16_t>()[i] != FloatToHalf(3.0f);
  }
  REQUIRE(wrong == 0);
}

TEST_CASE("results do not depend on the thread count", "[cpu]") {
  // Tanh(x * scale + bias) over layouts large enough to run in parallel; one thread and two
  // must agree bit for bit, and with the reference.
  ew::ProgramBuilder builder({DataType::kFloat, DataType::kFloat, DataType::kFloat});
  int product = builder.Emit(ew::Op::kMul, {0, 1}).value();
  builder.AddOutput(builder.Emit(ew::Op::kTanh, {builder.Emit(ew::Op::kAdd, {product, 2}).value()}).value());
  ew::Program program = builder.Finish("fused(Mul,Add,Tanh)");
  const std::vector<BroadcastCase> cases = {
      {{3, 40001}, {40001}, {3, 1}}, {{4099, 24}, {24}, {4099, 1}}, {{5, 77, 130}, {5, 1, 130}, {1, 77, 1}}};
  const int threads = omp_get_max_threads();
  for (const BroadcastCase& shapes : cases) {
    RtTensor x = Filled(DataType::kFloat, shapes.x, [](int64_t i) { return Quarter(i, 0) * 0.3; });
    RtTensor scale = Filled(DataType::kFloat, shapes.scale, [](int64_t i) { return Quarter(i, 5); });
    RtTensor bias = Filled(DataType::kFloat, shapes.bias, [](int64_t i) { return Quarter(i, 11); });
    std::vector<int64_t> dims = ew::BroadcastDims({&x, &scale, &bias}).value();
    REQUIRE(x.NumElements() >= (int64_t{1} << 15));
    RtTensor one = RtTensor::Allocate(DataType::kFloat, dims);
    RtTensor two = RtTensor::Allocate(DataType::kFloat, dims);
    omp_set_num_threads(1);
    REQUIRE(ew::Evaluate(program, {&x, &scale, &bias}, {&one}).ok());
    omp_set_num_threads(2);
    REQUIRE(ew::Evaluate(program, {&x, &scale, &bias}, {&two}).ok());
    omp_set_num_threads(threads);
    INFO("x " << DimsToString(shapes.x));
    REQUIRE(std::memcmp(one.raw(), two.raw(), one.nbytes()) == 0);
    int64_t wrong = 0;
    for (int64_t i = 0; i < one.NumElements(); ++i) {
      float inner = static_cast<float>(BroadcastValue(x, dims, i) * BroadcastValue(scale, dims, i)) +
                    static_cast<float>(BroadcastValue(bias, dims, i));
      wrong += one.data<float>()[i] != std::tanh(inner);
    }
    REQUIRE(wrong == 0);
  }
}

namespace {

// i·step for i in [-steps, steps], then `extras`, then +inf, -inf and NaN (the last three).
std::vector<float> GridThenInfinitiesAndNaN(int steps, float step, std::initializer_list<float> extras) {
  std::vector<float> values;
  for (int i = -steps; i <= steps; ++i) values.push_back(static_cast<float>(i) * step);
  values.insert(values.end(), extras);
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(-std::numeric_limits<float>::infinity());
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  return values;
}

}  // namespace

TEST_CASE("float Erf stays within 4e-7 of the exact erf everywhere, NaN and infinities included", "[cpu]") {
  // A dense grid over [-5, 5] plus tiny values, where relative error is hardest to keep.
  std::vector<float> values = GridThenInfinitiesAndNaN(50000, 1e-4f, {1e-30f, 1e-12f, 3e-8f, -2e-6f});
  RtTensor x = Floats<float>({static_cast<int64_t>(values.size())}, values);
  auto outputs = Run(R"(
ir_version 8
opset "" 20
graph t (float[N] %x) -> (float[N] %y, float[N] %g)
{
  %y = Erf(%x)
  %g = Gelu(%x)
}
)",
                     {{"x", x}});
  const float* y = outputs[0].tensor.data<float>();
  const float* g = outputs[1].tensor.data<float>();
  double worst = 0;
  for (size_t i = 0; i + 3 < values.size(); ++i) {
    const double exact = std::erf(static_cast<double>(values[i]));
    if (exact != 0) worst = std::max(worst, std::abs(y[i] - exact) / std::abs(exact));
    const double gelu = 0.5 * values[i] * (1 + std::erf(values[i] / std::sqrt(2.0)));
    // 1 + erf(x/√2) cancels for negative x: float32 keeps it to about an ulp of 1, times x/2.
    CHECK(std::abs(g[i] - gelu) <= 4e-7 * std::abs(gelu) + 2e-7 * std::abs(values[i]));
  }
  CHECK(worst <= 4e-7);
  CHECK(y[values.size() - 3] == 1.0f);
  CHECK(y[values.size() - 2] == -1.0f);
  CHECK(std::isnan(y[values.size() - 1]));
}

TEST_CASE("float Sigmoid and tanh-form GELU stay within 1e-6 of exact (GELU: plus its conditioning), NaN and infinities included", "[cpu]") {
  // A grid over [-100, 100] (beyond ±88 the exponential saturates), tiny values, and the edges.
  std::vector<float> values =
      GridThenInfinitiesAndNaN(100000, 1e-3f, {1e-30f, 1e-12f, 3e-8f, -2e-6f, 88.5f, -87.5f, 88.75f, -89.0f});
  RtTensor x = Floats<float>({static_cast<int64_t>(values.size())}, values);
  auto outputs = Run(R"(
ir_version 8
opset "" 20
graph t (float[N] %x) -> (float[N] %s, float[N] %g)
{
  %s = Sigmoid(%x)
  %g = Gelu(%x) {approximate: "tanh"}
}
)",
                     {{"x", x}});
  const float* s = outputs[0].tensor.data<float>();
  const float* g = outputs[1].tensor.data<float>();
  double worst_sigmoid = 0, worst_gelu = 0;
  for (size_t i = 0; i + 3 < values.size(); ++i) {
    const double v = values[i];
    const double sigmoid = 1 / (1 + std::exp(-v));
    // Results below FLT_MIN may flush to 0: compared absolutely (to 1e-30) there.
    worst_sigmoid = std::max(worst_sigmoid, std::abs(s[i] - sigmoid) / std::max(sigmoid, 1e-30));
    const double u = 0.79788456080286535588 * (v + 0.044715 * v * v * v);
    const double gelu = v / (1 + std::exp(-2 * u));  // = 0.5·v·(1 + tanh(u)), without its cancellation
    // For negative x GELU is about x·e^(2u): float's rounding of u (four operations, about 2 ulp) moves it
    // by 2|u| times that — the conditioning of the function, not an error of the kernel. The
    // old 0.5·x·(1 + tanh(u)) lost far more there (1 + tanh(u) cancels).
    const double bound = 1e-6 + 2.4e-7 * std::abs(2 * u);
    worst_gelu = std::max(worst_gelu, std::abs(g[i] - gelu) / std::max(std::abs(gelu), 1e-30) / bound);
  }
  CHECK(worst_sigmoid <= 1e-6);
  CHECK(worst_gelu <= 1.0);
  const size_t inf = values.size() - 3;
  CHECK(s[inf] == 1.0f);
  CHECK(s[inf + 1] == 0.0f);
  CHECK(std::isnan(s[inf + 2]));
  CHECK(g[inf] == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(g[inf + 2]));  // -inf · sigmoid(-inf) is -inf · 0
}

TEST_CASE("Mul(x, Sigmoid(x)) becomes one Swish instruction within 1e-6 of exact, NaN and infinities included", "[cpu]") {
  std::vector<float> values = GridThenInfinitiesAndNaN(100000, 1e-3f, {1e-30f, -3e-8f, 88.5f, -87.5f, -89.0f});
  RtTensor x = Floats<float>({static_cast<int64_t>(values.size())}, values);
  for (bool sigmoid_first : {true, false}) {
    ew::ProgramBuilder builder({DataType::kFloat});
    const int sigmoid = builder.Emit(ew::Op::kSigmoid, {0}).value();
    builder.AddOutput(builder.Emit(ew::Op::kMul, sigmoid_first ? std::vector<int>{sigmoid, 0}
                                                               : std::vector<int>{0, sigmoid}).value());
    ew::Program program = builder.Finish("silu");
    REQUIRE(program.code.size() == 1);
    REQUIRE(program.code[0].op == ew::Op::kSwish);
    RtTensor y = RtTensor::Allocate(DataType::kFloat, x.dims());
    REQUIRE(ew::Evaluate(program, {&x}, {&y}).ok());
    const float* silu = y.data<float>();
    double worst = 0;
    for (size_t i = 0; i + 3 < values.size(); ++i) {
      const double v = values[i], exact = v / (1 + std::exp(-v));
      // Results below FLT_MIN may flush to 0: compared absolutely (to 1e-30) there.
      worst = std::max(worst, std::abs(silu[i] - exact) / std::max(std::abs(exact), 1e-30));
    }
    CHECK(worst <= 1e-6);
    const size_t inf = values.size() - 3;
    CHECK(silu[inf] == std::numeric_limits<float>::infinity());
    CHECK(std::isnan(silu[inf + 1]));  // -inf · sigmoid(-inf), as Mul computes it
    CHECK(std::isnan(silu[inf + 2]));
  }
}

TEST_CASE("the Swish fold leaves a sigmoid something else reads, other operands and float16 registers alone", "[cpu]") {
  {  // the sigmoid is an output too
    ew::ProgramBuilder builder({DataType::kFloat});
    const int sigmoid = builder.Emit(ew::Op::kSigmoid, {0}).value();
    builder.AddOutput(builder.Emit(ew::Op::kMul, {0, sigmoid}).value());
    builder.AddOutput(sigmoid);
    CHECK(builder.Finish("shared").code.size() == 2);
  }
  {  // the sigmoid of another value
    ew::ProgramBuilder builder({DataType::kFloat, DataType::kFloat});
    const int sigmoid = builder.Emit(ew::Op::kSigmoid, {1}).value();
    builder.AddOutput(builder.Emit(ew::Op::kMul, {0, sigmoid}).value());
    CHECK(builder.Finish("gate").code.size() == 2);
  }
  {  // float16 registers: the body rounds the sigmoid before the product
    ew::ProgramBuilder builder({DataType::kFloat16});
    const int sigmoid = builder.Emit(ew::Op::kSigmoid, {0}).value();
    builder.AddOutput(builder.Emit(ew::Op::kMul, {0, sigmoid}).value());
    CHECK(builder.Finish("half").code.size() == 2);
  }
}

namespace {

// Each wide build against the baseline, where the CPU has it.
void RequireWideBuildEqualsBaseline(VectorIsa wide_lanes) {
  const VectorIsa original = ActiveVectorIsa();
  // Every float unary op with a defined domain here, two binaries and a select-free chain, on
  // float, double and float16 registers (float16 runs on float lanes and rounds on store).
  const std::vector<ew::Op> unary = {ew::Op::kNeg,  ew::Op::kAbs,      ew::Op::kSqrt,     ew::Op::kExp,
                                     ew::Op::kLog,  ew::Op::kErf,      ew::Op::kTanh,     ew::Op::kSigmoid,
                                     ew::Op::kRelu, ew::Op::kGeluErf,  ew::Op::kGeluTanh, ew::Op::kSoftplus,
                                     ew::Op::kFloor, ew::Op::kHardSwish, ew::Op::kMish,   ew::Op::kSoftsign,
                                     ew::Op::kSwish};
  const std::vector<float> grid = GridThenInfinitiesAndNaN(20000, 0.0047f, {1e-30f, -1e-30f, 88.0f, -90.0f});
  for (DataType dtype : {DataType::kFloat, DataType::kDouble, DataType::kFloat16}) {
    for (ew::Op op : unary) {
      ew::ProgramBuilder builder({dtype, dtype});
      const int scaled = builder.Emit(ew::Op::kMul, {0, 1}).value();
      builder.AddOutput(builder.Emit(op, {scaled}, op == ew::Op::kSwish ? 1.0f : 0.0f).value());
      ew::Program program = builder.Finish("lanes");
      RtTensor x = Filled(dtype, {static_cast<int64_t>(grid.size())}, [&](int64_t i) { return grid[i]; });
      RtTensor scale = Filled(dtype, {1}, [](int64_t) { return 1.5; });
      RtTensor baseline = RtTensor::Allocate(dtype, x.dims());
      RtTensor wide = RtTensor::Allocate(dtype, x.dims());
      REQUIRE(UseVectorIsa(VectorIsa::kBaseline));
      REQUIRE(ew::Evaluate(program, {&x, &scale}, {&baseline}).ok());
      REQUIRE(UseVectorIsa(wide_lanes));
      REQUIRE(ew::Evaluate(program, {&x, &scale}, {&wide}).ok());
      INFO(VectorIsaName(wide_lanes) << ": op " << static_cast<int>(op) << " dtype " << NameOf(dtype));
      REQUIRE(std::memcmp(baseline.raw(), wide.raw(), baseline.nbytes()) == 0);
    }
  }
  REQUIRE(UseVectorIsa(original));
}

}  // namespace

TEST_CASE("the AVX2 and AVX-512 builds of the elementwise ops equal the baseline build bit for bit", "[cpu]") {
  const VectorIsa original = ActiveVectorIsa();
  int compared = 0;
  for (VectorIsa wide : {VectorIsa::kAvx2, VectorIsa::kAvx512}) {
    if (!UseVectorIsa(wide)) {
      WARN("skipped the " << VectorIsaName(wide) << " build: this CPU does not have it");
      continue;
    }
    RequireWideBuildEqualsBaseline(wide);
    ++compared;
  }
  REQUIRE(UseVectorIsa(original));
  if (compared == 0) WARN("no wide build to compare on this CPU");
}

TEST_CASE("the row kernels' exp gives the same bits on every vector instruction set", "[cpu]") {
  const VectorIsa original = ActiveVectorIsa();
  // Lengths that leave tails of every width; arguments from 0 down past the -87 clamp, and NaN.
  std::vector<float> input(1000 + 13);
  for (size_t i = 0; i < input.size(); ++i) input[i] = -0.0931f * static_cast<float>(i);
  input[7] = std::numeric_limits<float>::quiet_NaN();
  input[8] = -std::numeric_limits<float>::infinity();
  REQUIRE(UseVectorIsa(VectorIsa::kBaseline));
  std::vector<float> baseline(input.size());
  reduction::ExpShifted(input.data(), 0.25f, baseline.data(), static_cast<int64_t>(input.size()));
  CHECK(baseline[0] == Approx(std::exp(-0.25f)).epsilon(2e-7));
  CHECK(std::isnan(baseline[7]));
  CHECK(baseline[8] == 0.0f);
  int compared = 0;
  for (VectorIsa wide : {VectorIsa::kAvx2, VectorIsa::kAvx512}) {
    if (!UseVectorIsa(wide)) continue;
    for (int64_t length : {int64_t{1}, int64_t{5}, int64_t{15}, int64_t{17}, static_cast<int64_t>(input.size())}) {
      std::vector<float> result(static_cast<size_t>(length), -1.0f);
      reduction::ExpShifted(input.data(), 0.25f, result.data(), length);
      INFO(VectorIsaName(wide) << ", " << length << " values");
      REQUIRE(std::memcmp(result.data(), baseline.data(), result.size() * sizeof(float)) == 0);
    }
    ++compared;
  }
  REQUIRE(UseVectorIsa(original));
  if (compared == 0) WARN("no wide instruction set to compare on this CPU");
}

TEST_CASE("a DequantizeLinear right after a QuantizeLinear reads the rounded floats, bit for bit the integer path",
          "[cpu][quantized]") {
  // x → Q (uint8, zero point 128; int8, zero point -3) → DQ: the program keeps no integer
  // register unless the 8-bit value is stored too, and gives what the integer path gives.
  const std::vector<float> values = {-1e9f, -6.4f, -0.125f, -0.0625f, 0.0f, 0.0625f, 0.1875f, 3.3f, 6.35f, 1e9f,
                                     std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()};
  RtTensor x = Floats({static_cast<int64_t>(values.size())}, values);
  RtTensor scale = Floats({}, {0.125f});
  for (const DataType type : {DataType::kUint8, DataType::kInt8}) {
    for (const bool store_quantized : {false, true}) {
      INFO(NameOf(type) << (store_quantized ? ", the 8-bit value stored too" : ""));
      const double zero = type == DataType::kUint8 ? 128 : -3;
      RtTensor zero_point = RtTensor::Allocate(type, {});
      if (type == DataType::kUint8) zero_point.data<uint8_t>()[0] = 128;
      else zero_point.data<int8_t>()[0] = -3;
      ew::ProgramBuilder builder({DataType::kFloat, DataType::kFloat, type});
      const int quantized = QuantizeExpr(type, IntegerRange(type), DataType::kFloat)(builder, {0, 1, 2}).value();
      const int real = DequantizeExpr(DataType::kFloat)(builder, {quantized, 1, 2}).value();
      builder.AddOutput(real);
      if (store_quantized) builder.AddOutput(quantized);
      const ew::Program program = builder.Finish("q,dq");
      size_t integer_results = 0;
      for (const ew::Instr& instr : program.code) {
        integer_results += IsInteger(program.register_dtypes[static_cast<size_t>(instr.dst)]);
      }
      CHECK(integer_results == (store_quantized ? 1u : 0u));  // the Convert of the stored value
      RtTensor y = RtTensor::Allocate(DataType::kFloat, x.dims());
      RtTensor q = RtTensor::Allocate(type, x.dims());
      std::vector<RtTensor*> outputs = {&y};
      if (store_quantized) outputs.push_back(&q);
      REQUIRE(ew::Evaluate(program, {&x, &scale, &zero_point}, outputs).ok());
      const double lo = type == DataType::kUint8 ? 0 : -128, hi = type == DataType::kUint8 ? 255 : 127;
      for (size_t i = 0; i < values.size(); ++i) {
        const double rounded = std::isnan(values[i]) ? lo : std::clamp(std::nearbyint(values[i] / 0.125) + zero, lo, hi);
        const float expected = static_cast<float>(static_cast<int64_t>(rounded) - static_cast<int64_t>(zero)) * 0.125f;
        INFO("x = " << values[i]);
        CHECK(std::memcmp(&y.data<float>()[i], &expected, sizeof(float)) == 0);
        if (store_quantized) CHECK(q.ValueAsDouble(static_cast<int64_t>(i)) == rounded);
      }
    }
  }
}

TEST_CASE("a byte table looks up every byte alike on every loop the host has", "[cpu][quantized]") {
  // Lengths around the 64-byte step (the rests included); every index value; a table of
  // distinct bytes, so a wrong row, half or lane shows.
  std::vector<uint8_t> table(256);
  for (int i = 0; i < 256; ++i) table[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 167 + 13) % 256);
  for (const int64_t count : {0, 1, 31, 32, 33, 63, 64, 65, 127, 256, 1000, 4099}) {
    std::vector<uint8_t> index(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) index[static_cast<size_t>(i)] = static_cast<uint8_t>((i * 101 + 7) % 256);
    std::vector<uint8_t> expected(index.size());
    for (size_t i = 0; i < index.size(); ++i) expected[i] = table[index[i]];
    for (const ew::ByteTableLoop loop : {ew::ByteTableLoop::kScalar, ew::ByteTableLoop::kAvx512Bw,
                                         ew::ByteTableLoop::kVbmi}) {
      if (!ew::HostRunsByteTableLoop(loop)) continue;
      INFO(count << " bytes, loop " << static_cast<int>(loop));
      std::vector<uint8_t> out(index.size() + 1, 0xA5);  // one guard byte after the end
      ew::LookUpBytesWith(loop, table.data(), index.data(), out.data(), count);
      CHECK(std::equal(expected.begin(), expected.end(), out.begin()));
      CHECK(out.back() == 0xA5);
    }
  }
  // The active loop follows the vector ISA: none wider than it allows.
  const VectorIsa original = ActiveVectorIsa();
  REQUIRE(UseVectorIsa(VectorIsa::kBaseline));
  CHECK(ew::ActiveByteTableLoop() == ew::ByteTableLoop::kScalar);
  if (UseVectorIsa(VectorIsa::kAvx2)) CHECK(ew::ActiveByteTableLoop() == ew::ByteTableLoop::kScalar);
  REQUIRE(UseVectorIsa(original));
}
