#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <limits>

#include "cpu_runtime/reduction/math.h"
#include "cpu_runtime/reduction/plan.h"
#include "cpu_runtime/engine/session.h"
#include "cpu_test_support.h"
#include "ir/float16.h"
#include "text_format/text_format.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::cpu_test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::string ModelText(int opset, const std::string& signature, const std::string& body) {
  return "ir_version 8\nopset \"\" " + std::to_string(opset) + "\ngraph t " + signature + "\n{\n" + body + "\n}\n";
}

void RequireClose(const std::vector<double>& actual, const std::vector<double>& expected, double margin = 1e-6) {
  INFO("actual " << Catch::Detail::stringify(actual) << " expected " << Catch::Detail::stringify(expected));
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    if (std::isnan(expected[i])) {
      REQUIRE(std::isnan(actual[i]));
    } else if (std::isinf(expected[i])) {
      REQUIRE(actual[i] == expected[i]);
    } else {
      REQUIRE(actual[i] == Approx(expected[i]).margin(margin).epsilon(1e-6));
    }
  }
}

// Runs `op` (opset 18, axes as an input) over x [2,3] = [[1,-2,3],[4,5,-6]] along axis 1.
std::vector<double> ReduceRows(const std::string& op, const std::vector<double>& x = {1, -2, 3, 4, 5, -6}) {
  std::string text = ModelText(18, "(float[2,3] %x) -> (float[2] %y)\n  init int64[1] %axes = [1]",
                               "  %y = " + op + "(%x, %axes) {keepdims: 0}");
  return Values(Run(text, {{"x", Floats({2, 3}, x)}})[0].tensor);
}

}  // namespace

TEST_CASE("reduce plans collapse axes into outer, reduced and inner blocks", "[cpu]") {
  using namespace fusionopt::cpu::reduction;
  ReducePlan middle = PlanReduction({2, 3, 4}, {1}, true);
  REQUIRE(middle.output_dims == std::vector<int64_t>{2, 1, 4});
  REQUIRE((middle.outer == 2 && middle.run == 3 && middle.inner == 4 && middle.segments() == 1));

  // Axes 0 and 2 of [2,3,2] are not adjacent: two segments 6 apart, rows 2 apart.
  ReducePlan split = PlanReduction({2, 3, 2}, {0, 2}, false);
  REQUIRE(split.output_dims == std::vector<int64_t>{3});
  REQUIRE((split.outer == 3 && split.inner == 1 && split.run == 2));
  REQUIRE(split.segment_offsets == std::vector<int64_t>{0, 6});
  REQUIRE((split.RowOffset(2) == 4 && split.reduced() == 4));

  // Size-1 dims vanish, so reducing one leaves a plain copy of contiguous rows.
  ReducePlan unit = PlanReduction({2, 1, 3}, {1}, true);
  REQUIRE((unit.outer == 1 && unit.inner == 6 && unit.reduced() == 1));

  ReducePlan empty = PlanReduction({2, 0, 3}, {1}, false);
  REQUIRE((empty.reduced() == 0 && empty.output_size() == 6));
}

TEST_CASE("reduction axes are validated and normalized", "[cpu]") {
  using namespace fusionopt::cpu::reduction;
  REQUIRE(NormalizeAxes({-1, 0}, 3).value() == std::vector<int64_t>{0, 2});
  REQUIRE_THAT(NormalizeAxes({3}, 3).status().message(), Catch::Contains("axis 3 is out of range for rank 3"));
  REQUIRE_THAT(NormalizeAxes({1, -2}, 3).status().message(), Catch::Contains("same axis twice"));
  REQUIRE_FALSE(NormalizeAxes({0}, 0).ok());
}

TEST_CASE("the vectorized exp of non-positive arguments is within two ulp of std::exp", "[cpu]") {
  std::vector<float> arguments;
  for (double x = -86.9; x <= 0; x += 0.0137) arguments.push_back(static_cast<float>(x));
  arguments.push_back(0.0f);
  std::vector<float> values = arguments;
  fusionopt::cpu::reduction::ExpNonPositiveInPlace(values.data(), static_cast<int64_t>(values.size()));
  for (size_t i = 0; i < values.size(); ++i) {
    const float exact = static_cast<float>(std::exp(static_cast<double>(arguments[i])));
    const float ulp = std::nextafter(exact, 1.0f) - exact;
    INFO("exp(" << arguments[i] << ") = " << values[i] << ", expected " << exact);
    REQUIRE(std::fabs(values[i] - exact) <= 2 * ulp);
  }
  REQUIRE(values.back() == 1.0f);
  // Special values, in a tail shorter than a vector.
  std::vector<float> special = {-std::numeric_limits<float>::infinity(), NAN, -100.0f};
  fusionopt::cpu::reduction::ExpNonPositiveInPlace(special.data(), 3);
  REQUIRE(special[0] == 0.0f);
  REQUIRE(std::isnan(special[1]));
  REQUIRE(special[2] == 0.0f);
}

TEST_CASE("each Reduce op computes its formula along an axis", "[cpu]") {
  RequireClose(ReduceRows("ReduceSum"), {2, 3});
  RequireClose(ReduceRows("ReduceMean"), {2.0 / 3.0, 1});
  RequireClose(ReduceRows("ReduceMax"), {3, 5});
  RequireClose(ReduceRows("ReduceMin"), {-2, -6});
  RequireClose(ReduceRows("ReduceProd"), {-6, -120});
  RequireClose(ReduceRows("ReduceL1"), {6, 15});
  RequireClose(ReduceRows("ReduceL2"), {std::sqrt(14.0), std::sqrt(77.0)});
  RequireClose(ReduceRows("ReduceSumSquare"), {14, 77});
  RequireClose(ReduceRows("ReduceLogSum", {1, 2, 3, 4, 5, 6}), {std::log(6.0), std::log(15.0)});
  RequireClose(ReduceRows("ReduceLogSumExp"), {std::log(std::exp(1.0) + std::exp(-2.0) + std::exp(3.0)),
                                               std::log(std::exp(4.0) + std::exp(5.0) + std::exp(-6.0))});
  // max-subtraction keeps exp from overflowing float
  RequireClose(ReduceRows("ReduceLogSumExp", {1000, 1000, 1000, -1000, 0, 88.5}),
               {1000 + std::log(3.0), std::log(std::exp(0.0) + std::exp(88.5))}, 1e-4);
}

TEST_CASE("axes move from attribute to input at opset 13 for ReduceSum and 18 for the others", "[cpu]") {
  RtTensor x = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto attribute = Run(ModelText(11, "(float[2,3] %x) -> (float[2,1] %y)", "  %y = ReduceMean(%x) {axes: [-1]}"),
                       {{"x", x}});
  REQUIRE(attribute[0].tensor.dims() == std::vector<int64_t>{2, 1});
  RequireClose(Values(attribute[0].tensor), {2, 5});

  auto input = Run(ModelText(13, "(float[2,3] %x, int64[1] %axes) -> (float[3] %y)",
                             "  %y = ReduceSum(%x, %axes) {keepdims: 0}"),
                   {{"x", x}, {"axes", Filled(DataType::kInt64, {1}, {0})}});
  RequireClose(Values(input[0].tensor), {5, 7, 9});

  Status stale = CreateStatus(ModelText(13, "(float[2,3] %x) -> (float %y)", "  %y = ReduceSum(%x) {axes: [1]}"));
  REQUIRE(stale.code() == ErrorCode::kInvalidModel);
  REQUIRE_THAT(stale.message(), Catch::Contains("axes is an input") && Catch::Contains("ReduceSum"));
}

TEST_CASE("empty axes reduce everything unless noop_with_empty_axes is set", "[cpu]") {
  RtTensor x = Floats({2, 2}, {1, -2, 3, 4});
  auto all = Run(ModelText(18, "(float[2,2] %x) -> (float %y)", "  %y = ReduceSumSquare(%x)"), {{"x", x}});
  REQUIRE(all[0].tensor.dims() == std::vector<int64_t>{1, 1});
  RequireClose(Values(all[0].tensor), {30});

  auto none = Run(ModelText(18, "(float[2,2] %x) -> (float %y, float %l2, float %sum)\n  init int64[0] %axes = []",
                            "  %y = ReduceSumSquare(%x, %axes) {noop_with_empty_axes: 1}\n"
                            "  %l2 = ReduceL2(%x) {noop_with_empty_axes: 1}\n"
                            "  %sum = ReduceSum(%x, %axes) {noop_with_empty_axes: 0, keepdims: 0}"),
                  {{"x", x}});
  // No reduction, but the element-wise steps still run: square, and sqrt(square) = |x|.
  REQUIRE(none[0].tensor.dims() == std::vector<int64_t>{2, 2});
  RequireClose(Values(none[0].tensor), {1, 4, 9, 16});
  RequireClose(Values(none[1].tensor), {1, 2, 3, 4});
  REQUIRE(none[2].tensor.dims().empty());
  RequireClose(Values(none[2].tensor), {6});
}

TEST_CASE("non-contiguous axes reduce without a transpose", "[cpu]") {
  std::vector<double> ramp(24);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<double>(i);
  auto rows = Run(ModelText(18, "(float[2,3,2] %x) -> (float %sum, float %max)\n  init int64[2] %axes = [0, 2]",
                            "  %sum = ReduceSum(%x, %axes)\n  %max = ReduceMax(%x, %axes)"),
                  {{"x", Floats({2, 3, 2}, std::vector<double>(ramp.begin(), ramp.begin() + 12))}});
  REQUIRE(rows[0].tensor.dims() == std::vector<int64_t>{1, 3, 1});
  RequireClose(Values(rows[0].tensor), {14, 22, 30});
  RequireClose(Values(rows[1].tensor), {7, 9, 11});

  // [2,3,2,2] over axes 0 and 2: the kept last axis makes contiguous columns.
  auto columns = Run(ModelText(18, "(float[2,3,2,2] %x) -> (float %sum)\n  init int64[2] %axes = [0, -2]",
                               "  %sum = ReduceSum(%x, %axes) {keepdims: 0}"),
                     {{"x", Floats({2, 3, 2, 2}, ramp)}});
  REQUIRE(columns[0].tensor.dims() == std::vector<int64_t>{3, 2});
  RequireClose(Values(columns[0].tensor), {28, 32, 44, 48, 60, 64});
}

TEST_CASE("reductions over an empty set give each op's identity", "[cpu]") {
  RtTensor empty = Floats({2, 0}, {});
  auto outputs = Run(
      ModelText(18, "(float[2,0] %x) -> (float %sum, float %prod, float %max, float %min, float %lse, float %mean)\n"
                    "  init int64[1] %axes = [1]",
                "  %sum = ReduceSum(%x, %axes) {keepdims: 0}\n  %prod = ReduceProd(%x, %axes) {keepdims: 0}\n"
                "  %max = ReduceMax(%x, %axes) {keepdims: 0}\n  %min = ReduceMin(%x, %axes) {keepdims: 0}\n"
                "  %lse = ReduceLogSumExp(%x, %axes) {keepdims: 0}\n  %mean = ReduceMean(%x, %axes) {keepdims: 0}"),
      {{"x", empty}});
  RequireClose(Values(outputs[0].tensor), {0, 0});
  RequireClose(Values(outputs[1].tensor), {1, 1});
  RequireClose(Values(outputs[2].tensor), {-kInf, -kInf});
  RequireClose(Values(outputs[3].tensor), {kInf, kInf});
  RequireClose(Values(outputs[4].tensor), {-kInf, -kInf});
  RequireClose(Values(outputs[5].tensor), {NAN, NAN});

  auto ints = Run(ModelText(18, "(int32[2,0] %x) -> (int32 %max)\n  init int64[1] %axes = [1]",
                            "  %max = ReduceMax(%x, %axes)"),
                  {{"x", Filled(DataType::kInt32, {2, 0}, {})}});
  RequireClose(Values(ints[0].tensor), {-2147483648.0, -2147483648.0});
}

TEST_CASE("integer, bool and float16 reductions keep their element type", "[cpu]") {
  auto outputs = Run(
      ModelText(20, "(int64[2,2] %a, int32[3] %b, bool[2,2] %c, float16[4] %h) -> "
                    "(int64 %sum, int32 %prod, bool %any, bool %all, float16 %mean)\n  init int64[1] %axes = [1]",
                "  %sum = ReduceSum(%a, %axes) {keepdims: 0}\n  %prod = ReduceProd(%b)\n"
                "  %any = ReduceMax(%c, %axes) {keepdims: 0}\n  %all = ReduceMin(%c, %axes) {keepdims: 0}\n"
                "  %mean = ReduceMean(%h)"),
      {{"a", Filled(DataType::kInt64, {2, 2}, {4000000000.0, 5, -7, 2})},
       {"b", Filled(DataType::kInt32, {3}, {-3, 5, 7})},
       {"c", Filled(DataType::kBool, {2, 2}, {0, 1, 1, 1})},
       {"h", Filled(DataType::kFloat16, {4}, {0.5, 1.5, 2.5, 3.5})}});
  REQUIRE(outputs[0].tensor.dtype() == DataType::kInt64);
  REQUIRE(outputs[0].tensor.data<int64_t>()[0] == 4000000005);
  REQUIRE(outputs[0].tensor.data<int64_t>()[1] == -5);
  REQUIRE(outputs[1].tensor.data<int32_t>()[0] == -105);
  REQUIRE(outputs[2].tensor.dtype() == DataType::kBool);
  REQUIRE(Values(outputs[2].tensor) == std::vector<double>{1, 1});
  REQUIRE(Values(outputs[3].tensor) == std::vector<double>{0, 1});
  REQUIRE(outputs[4].tensor.dtype() == DataType::kFloat16);
  REQUIRE(Values(outputs[4].tensor) == std::vector<double>{2});

  Status log_of_int = CreateStatus(ModelText(18, "(int32[3] %x) -> (int32 %y)", "  %y = ReduceLogSum(%x)"));
  REQUIRE(log_of_int.code() == ErrorCode::kUnsupported);
  REQUIRE_THAT(log_of_int.message(), Catch::Contains("int32"));
}

TEST_CASE("long and wide reductions are exact where they can be and thread-count independent", "[cpu]") {
  const int64_t n = 1000003;  // not a multiple of any block
  std::vector<double> values(n);
  double expected = 0;
  for (int64_t i = 0; i < n; ++i) {
    values[i] = static_cast<float>((i % 1000) * 0.001);
    expected += values[i];
  }
  std::string text = ModelText(18, "(float[1,1000003] %x) -> (float %y)", "  %y = ReduceSum(%x)");
  RtTensor x = Floats({1, n}, values);
  const int threads = omp_get_max_threads();
  float single = Run(text, {{"x", x}}, SessionOptions{.threads = 1})[0].tensor.data<float>()[0];
  float several = Run(text, {{"x", x}}, SessionOptions{.threads = 4})[0].tensor.data<float>()[0];
  omp_set_num_threads(threads);
  REQUIRE(single == several);
  REQUIRE(single == Approx(expected).epsilon(1e-5));

  // Columns wider than one tile: 300 outputs, each summing 3 rows.
  std::vector<double> wide(900);
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 300; ++c) wide[r * 300 + c] = static_cast<double>(r * 1000 + c);
  }
  auto columns = Run(ModelText(13, "(float[3,300] %x) -> (float %y)\n  init int64[1] %axes = [0]",
                               "  %y = ReduceSum(%x, %axes) {keepdims: 0}"),
                     {{"x", Floats({3, 300}, wide)}});
  std::vector<double> column_sums = Values(columns[0].tensor);
  REQUIRE(column_sums.size() == 300);
  for (int64_t c = 0; c < 300; ++c) REQUIRE(column_sums[c] == 3000 + 3 * c);
}

TEST_CASE("reduce ops reject bad axes at prepare time or at run time", "[cpu]") {
  Status out_of_range =
      CreateStatus(ModelText(11, "(float[2,2] %x) -> (float %y)", "  %y = ReduceMean(%x) {axes: [2]}"));
  REQUIRE(out_of_range.code() == ErrorCode::kInvalidModel);
  REQUIRE_THAT(out_of_range.message(), Catch::Contains("ReduceMean") && Catch::Contains("axis 2 is out of range"));

  // Rank unknown until run time: the error names the node when the data arrives.
  auto late = TryRun(ModelText(18, "(float %x, int64[2] %axes) -> (float %y)", "  %y = ReduceL1(%x, %axes) @l1"),
                     {{"x", Floats({2, 2}, {1, 2, 3, 4})}, {"axes", Filled(DataType::kInt64, {2}, {1, -1})}});
  REQUIRE_FALSE(late.ok());
  REQUIRE_THAT(late.status().message(), Catch::Contains("'l1'") && Catch::Contains("same axis twice"));
}

TEST_CASE("ArgMax and ArgMin break ties by first or last index", "[cpu]") {
  RtTensor x = Floats({2, 4}, {1, 3, 3, 2, 5, 5, 0, 5});
  auto outputs = Run(ModelText(13, "(float[2,4] %x) -> (int64 %first, int64 %last, int64 %min)",
                               "  %first = ArgMax(%x) {axis: 1}\n"
                               "  %last = ArgMax(%x) {axis: -1, select_last_index: 1}\n"
                               "  %min = ArgMin(%x) {axis: 0, keepdims: 0}"),
                     {{"x", x}});
  REQUIRE(outputs[0].tensor.dtype() == DataType::kInt64);
  REQUIRE(outputs[0].tensor.dims() == std::vector<int64_t>{2, 1});
  REQUIRE(Values(outputs[0].tensor) == std::vector<double>{1, 0});
  REQUIRE(Values(outputs[1].tensor) == std::vector<double>{2, 3});
  REQUIRE(outputs[2].tensor.dims() == std::vector<int64_t>{4});
  REQUIRE(Values(outputs[2].tensor) == std::vector<double>{0, 0, 1, 0});

  auto nan = Run(ModelText(13, "(float[4] %x) -> (int64 %first, int64 %last)",
                           "  %first = ArgMax(%x)\n  %last = ArgMax(%x) {select_last_index: 1}"),
                 {{"x", Floats({4}, {1, NAN, 3, NAN})}});
  REQUIRE(Values(nan[0].tensor) == std::vector<double>{1});  // NaN wins, as in numpy
  REQUIRE(Values(nan[1].tensor) == std::vector<double>{3});

  Status bad_axis = CreateStatus(ModelText(13, "(float[2,4] %x) -> (int64 %y)", "  %y = ArgMin(%x) {axis: -3}"));
  REQUIRE_THAT(bad_axis.message(), Catch::Contains("ArgMin") && Catch::Contains("out of range"));
  auto empty = TryRun(ModelText(13, "(float[2,0] %x) -> (int64 %y)", "  %y = ArgMax(%x) {axis: 1}"),
                      {{"x", Floats({2, 0}, {})}});
  REQUIRE_THAT(empty.status().message(), Catch::Contains("empty axis"));
}

TEST_CASE("Softmax and LogSoftmax are max-subtracted along an axis", "[cpu]") {
  const double ln3 = std::log(3.0);
  auto outputs = Run(ModelText(13, "(float[2,3] %x, float[2,3] %c, float[3] %big) -> (float %s, float %col, float %l)",
                               "  %s = Softmax(%x)\n  %col = Softmax(%c) {axis: 0}\n  %l = LogSoftmax(%big)"),
                     {{"x", Floats({2, 3}, {1, 2, 3, 1, 1, 1})},
                      {"c", Floats({2, 3}, {0, 0, ln3, ln3, 0, 0})},
                      {"big", Floats({3}, {1000, 1000, 1000})}});
  const double sum = std::exp(-2.0) + std::exp(-1.0) + 1;
  RequireClose(Values(outputs[0].tensor),
               {std::exp(-2.0) / sum, std::exp(-1.0) / sum, 1 / sum, 1 / 3.0, 1 / 3.0, 1 / 3.0});
  RequireClose(Values(outputs[1].tensor), {0.25, 0.5, 0.75, 0.75, 0.5, 0.25});
  RequireClose(Values(outputs[2].tensor), {-ln3, -ln3, -ln3});
}

TEST_CASE("Softmax before opset 13 coerces the input to 2-D at axis", "[cpu]") {
  const double ln3 = std::log(3.0);
  RtTensor x = Floats({1, 2, 2}, {0, ln3, ln3, 0});
  std::string body = "  %y = Softmax(%x) {axis: 1}";
  auto flattened = Run(ModelText(11, "(float[1,2,2] %x) -> (float %y)", body), {{"x", x}});
  RequireClose(Values(flattened[0].tensor), {0.125, 0.375, 0.375, 0.125});
  auto single_axis = Run(ModelText(13, "(float[1,2,2] %x) -> (float %y)", body), {{"x", x}});
  RequireClose(Values(single_axis[0].tensor), {0.25, 0.75, 0.75, 0.25});

  auto half = Run(ModelText(13, "(float16[2] %x) -> (float16 %y)", "  %y = Softmax(%x)"),
                  {{"x", Filled(DataType::kFloat16, {2}, {0, ln3})}});
  REQUIRE(half[0].tensor.dtype() == DataType::kFloat16);
  RequireClose(Values(half[0].tensor), {0.25, 0.75}, 1e-3);

  Status bad_axis = CreateStatus(ModelText(13, "(float[2,2] %x) -> (float %y)", "  %y = LogSoftmax(%x) {axis: 2}"));
  REQUIRE(bad_axis.code() == ErrorCode::kInvalidModel);
  REQUIRE_THAT(bad_axis.message(), Catch::Contains("LogSoftmax") && Catch::Contains("axis 2"));
}

TEST_CASE("Hardmax marks the first maximum along the axis", "[cpu]") {
  RtTensor x = Floats({2, 3}, {1, 3, 3, 2, 0, 1});
  auto outputs = Run(ModelText(13, "(float[2,3] %x) -> (float %rows, float %columns)",
                               "  %rows = Hardmax(%x)\n  %columns = Hardmax(%x) {axis: 0}"),
                     {{"x", x}});
  REQUIRE(Values(outputs[0].tensor) == std::vector<double>{0, 1, 0, 1, 0, 0});
  REQUIRE(Values(outputs[1].tensor) == std::vector<double>{0, 1, 1, 1, 0, 0});
}

TEST_CASE("LayerNormalization normalizes trailing axes and reports its statistics", "[cpu]") {
  auto outputs = Run(ModelText(17, "(float[2,2] %x) -> (float %y, float %mean, float %inv)\n"
                                   "  init float[2] %scale = [1, 2]\n  init float[2] %bias = [0.5, 0]",
                               "  %y, %mean, %inv = LayerNormalization(%x, %scale, %bias) {epsilon: 0.0}"),
                     {{"x", Floats({2, 2}, {1, 3, 2, 6})}});
  RequireClose(Values(outputs[0].tensor), {-0.5, 2, -0.5, 2});
  REQUIRE(outputs[1].tensor.dims() == std::vector<int64_t>{2, 1});
  RequireClose(Values(outputs[1].tensor), {2, 4});
  RequireClose(Values(outputs[2].tensor), {1, 0.5});

  // axis 0: one row over the whole tensor; a [1] scale broadcasts over it.
  auto whole = Run(ModelText(17, "(float[2,2] %x) -> (float %y)\n  init float[1] %scale = [2]",
                             "  %y = LayerNormalization(%x, %scale) {axis: 0, epsilon: 0.0}"),
                   {{"x", Floats({2, 2}, {1, 3, 5, 7})}});
  const double inv = 2 / std::sqrt(5.0);
  RequireClose(Values(whole[0].tensor), {-3 * inv, -inv, inv, 3 * inv});

  auto mismatch = TryRun(ModelText(17, "(float[2,2] %x) -> (float %y)\n  init float[3] %scale = [1, 1, 1]",
                                   "  %y = LayerNormalization(%x, %scale)"),
                         {{"x", Floats({2, 2}, {1, 3, 5, 7})}});
  REQUIRE_THAT(mismatch.status().message(), Catch::Contains("does not broadcast to the normalized shape [2]"));
  Status bad_axis = CreateStatus(ModelText(17, "(float[2,2] %x, float[2] %s) -> (float %y)",
                                           "  %y = LayerNormalization(%x, %s) {axis: 2}"));
  REQUIRE_THAT(bad_axis.message(), Catch::Contains("axis 2 is out of range"));
}

TEST_CASE("RMSNormalization and SimplifiedLayerNormalization scale by the inverse root mean square", "[cpu]") {
  // Row 0 {1,7}: mean square 25, inverse RMS 0.2. Row 1 {2,2}: mean square 4, inverse RMS 0.5.
  RtTensor x = Floats({2, 2}, {1, 7, 2, 2});
  auto outputs = Run(ModelText(23, "(float[2,2] %x) -> (float %rms, float %simplified, float %inv)\n"
                                   "  init float[2] %scale = [2, 1]",
                               "  %rms = RMSNormalization(%x, %scale) {epsilon: 0.0}\n"
                               "  %simplified, %inv = SimplifiedLayerNormalization(%x, %scale) {epsilon: 0.0}"),
                     {{"x", x}});
  RequireClose(Values(outputs[0].tensor), {0.4, 1.4, 2, 1});
  RequireClose(Values(outputs[1].tensor), {0.4, 1.4, 2, 1});
  REQUIRE(outputs[2].tensor.dims() == std::vector<int64_t>{2, 1});
  RequireClose(Values(outputs[2].tensor), {0.2, 0.5});

  Status too_old = CreateStatus(ModelText(22, "(float[2,2] %x, float[2] %s) -> (float %y)",
                                          "  %y = RMSNormalization(%x, %s)"));
  REQUIRE(too_old.code() == ErrorCode::kUnsupported);
}

TEST_CASE("GroupNormalization scales per group at opset 18 and per channel at 21", "[cpu]") {
  // Group 0 = channels 0,1 = {1,3,5,7}: mean 4, variance 5. Group 1 = {2,2,4,4}: mean 3, variance 1.
  RtTensor x = Floats({1, 4, 2}, {1, 3, 5, 7, 2, 2, 4, 4});
  const double r5 = 1 / std::sqrt(5.0);
  const std::vector<double> expected = {-3 * r5, -r5, r5, 3 * r5, -1, -1, 3, 3};
  auto per_group = Run(ModelText(18, "(float[1,4,2] %x) -> (float %y)\n  init float[2] %s = [1, 2]\n"
                                     "  init float[2] %b = [0, 1]",
                                 "  %y = GroupNormalization(%x, %s, %b) {num_groups: 2, epsilon: 0.0}"),
                       {{"x", x}});
  RequireClose(Values(per_group[0].tensor), expected);
  std::string per_channel_text = ModelText(21, "(float[1,4,2] %x) -> (float %y)\n  init float[4] %s = [1, 1, 2, 2]\n"
                                               "  init float[4] %b = [0, 0, 1, 1]",
                                           "  %y = GroupNormalization(%x, %s, %b) {num_groups: 2, epsilon: 0.0}");
  RequireClose(Values(Run(per_channel_text, {{"x", x}})[0].tensor), expected);

  auto stale_params = TryRun(ModelText(21, "(float[1,4,2] %x) -> (float %y)\n  init float[2] %s = [1, 2]\n"
                                           "  init float[2] %b = [0, 1]",
                                       "  %y = GroupNormalization(%x, %s, %b) {num_groups: 2}"),
                             {{"x", x}});
  REQUIRE_THAT(stale_params.status().message(), Catch::Contains("per channel (4)"));
  auto indivisible = TryRun(ModelText(18, "(float[1,4,2] %x) -> (float %y)\n  init float[3] %s = [1, 1, 1]\n"
                                          "  init float[3] %b = [0, 0, 0]",
                                      "  %y = GroupNormalization(%x, %s, %b) {num_groups: 3}"),
                            {{"x", x}});
  REQUIRE_THAT(indivisible.status().message(), Catch::Contains("4 channels do not split into 3 groups"));
  Status missing = CreateStatus(ModelText(18, "(float[1,4,2] %x, float[2] %s, float[2] %b) -> (float %y)",
                                          "  %y = GroupNormalization(%x, %s, %b)"));
  REQUIRE_THAT(missing.message(), Catch::Contains("num_groups attribute is required"));
}

TEST_CASE("MeanVarianceNormalization normalizes per channel over N, H and W by default", "[cpu]") {
  // Channel 0 holds {1,3,5,7} (mean 4, std sqrt 5), channel 1 {10,10,20,20} (mean 15, std 5).
  RtTensor x = Floats({2, 2, 1, 2}, {1, 3, 10, 10, 5, 7, 20, 20});
  auto outputs = Run(ModelText(13, "(float[2,2,1,2] %x) -> (float %y, float %instance)",
                               "  %y = MeanVarianceNormalization(%x)\n"
                               "  %instance = MeanVarianceNormalization(%x) {axes: [2, 3]}"),
                     {{"x", x}});
  const double r5 = 1 / std::sqrt(5.0);
  RequireClose(Values(outputs[0].tensor), {-3 * r5, -r5, -1, -1, r5, 3 * r5, 1, 1});
  // Per instance and channel: {1,3} -> [-1,1]; {10,10} has no spread and stays 0.
  RequireClose(Values(outputs[1].tensor), {-1, 1, 0, 0, -1, 1, 0, 0});

  Status bad_axes =
      CreateStatus(ModelText(13, "(float[2,2] %x) -> (float %y)", "  %y = MeanVarianceNormalization(%x)"));
  REQUIRE_THAT(bad_axes.message(), Catch::Contains("axis 2 is out of range for rank 2"));
}
