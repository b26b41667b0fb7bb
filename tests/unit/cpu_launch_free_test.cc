// What a session computes ahead (from constants alone) and what it counts as a launch.
#include <catch2/catch.hpp>

#include "cpu_runtime/engine/session.h"
#include "cpu_test_support.h"
#include "ir/op_class.h"
#include "shape_inference/shape_inference.h"
#include "text_format/text_format.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::cpu_test;

namespace {

constexpr const char* kModel = R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x, float[3] %bias) -> (float[2,3] %y, int64[2] %shape2)
  init int64[1] %dims = [3]
  init int64[] %zero = [0]
  init int64[1] %one = [1]
  init float[3] %bias = [1.0, 2.0, 3.0]
{
  %weight = ConstantOfShape(%dims) {value: tensor float[1] [0.5]}
  %shape = Shape(%x)
  %rows = Gather(%shape, %zero)
  %rows1 = Unsqueeze(%rows, %zero)
  %shape2 = Concat(%rows1, %one) {axis: 0}
  %scaled = Mul(%x, %weight)
  %y = Add(%scaled, %bias)
}
)";

}  // namespace

TEST_CASE("constant-only nodes run once when prepared; shape arithmetic launches nothing", "[cpu]") {
  auto model = ParseModel(kModel);
  REQUIRE(model.ok());
  InferShapes(**model);  // as the loader does: host arithmetic is recognised by its int64 results
  auto session = Session::Create(**model);
  REQUIRE(session.ok());
  RunStats stats;
  auto outputs = (*session)->Run({{"x", Floats({2, 3}, {1, 2, 3, 4, 5, 6})}}, &stats);
  REQUIRE(outputs.ok());
  // ConstantOfShape was computed at Create; Shape/Gather/Unsqueeze/Concat run on the host;
  // Mul and Add are the only launches. %bias may be fed (IR 8), so it is not folded in.
  REQUIRE(stats.kernels_launched == 2);
  REQUIRE(stats.nodes_executed == 6);
  const float* y = (*outputs)[0].tensor.data<float>();
  REQUIRE(std::vector<float>(y, y + 6) == std::vector<float>{1.5, 3, 4.5, 3, 4.5, 6});
  const int64_t* shape = (*outputs)[1].tensor.data<int64_t>();
  REQUIRE(std::vector<int64_t>(shape, shape + 2) == std::vector<int64_t>{2, 1});

  // A fed %bias replaces the initializer's value.
  auto fed = (*session)->Run({{"x", Floats({2, 3}, {1, 2, 3, 4, 5, 6})}, {"bias", Floats({3}, {0, 0, 0})}}, &stats);
  REQUIRE(fed.ok());
  REQUIRE((*fed)[0].tensor.data<float>()[0] == 0.5f);
}

TEST_CASE("a constant node that cannot be computed ahead fails when it runs, naming it", "[cpu]") {
  // Gather with an out-of-range constant index fails ahead of time; the error must come from
  // the run (the node might have sat in a branch that never runs), not from Create.
  auto model = ParseModel(R"(
ir_version 8
opset "" 17
graph main (float[2] %x) -> (float[2] %y)
  init float[2] %table = [1.0, 2.0]
  init int64[1] %index = [5]
{
  %g = Gather(%table, %index) @bad_gather
  %y = Add(%x, %g)
}
)");
  REQUIRE(model.ok());
  auto session = Session::Create(**model);
  REQUIRE(session.ok());
  auto outputs = (*session)->Run({{"x", Floats({2}, {1, 2})}});
  REQUIRE_FALSE(outputs.ok());
  REQUIRE_THAT(outputs.status().message(), Catch::Contains("bad_gather"));
}

TEST_CASE("a Split into contiguous slices hands out views and launches nothing", "[cpu]") {
  const std::string text = R"(
ir_version 8
opset "" 17
graph main (float[N,4,2] %x) -> (float %p, float %q)
  init int64[2] %sizes = [1, 3]
{
  %p, %q = Split(%x, %sizes) {axis: 1}
  %r = Relu(%q)
}
)";
  auto model = ParseModel(text);
  REQUIRE(model.ok());
  InferShapes(**model);
  auto session = Session::Create(**model);
  REQUIRE(session.ok());
  RtTensor x = Iota({1, 4, 2});
  RunStats stats;
  auto outputs = (*session)->Run({{"x", x}}, &stats);
  REQUIRE(outputs.ok());
  // One row before the axis: both parts are slices of x itself, no copy and no launch.
  CHECK(stats.kernels_launched == 1);  // the Relu
  CHECK(Values((*outputs)[0].tensor) == std::vector<double>{0, 1});
  CHECK(Values((*outputs)[1].tensor) == std::vector<double>{2, 3, 4, 5, 6, 7});
  CHECK((*outputs)[1].tensor.dims() == std::vector<int64_t>{1, 3, 2});

  // Two rows before the axis: the parts interleave in x, so the Split copies.
  auto copied = (*session)->Run({{"x", Iota({2, 4, 2})}}, &stats);
  REQUIRE(copied.ok());
  CHECK(stats.kernels_launched == 2);
  CHECK(Values((*copied)[0].tensor) == std::vector<double>{0, 1, 8, 9});
  CHECK(Values((*copied)[1].tensor) == std::vector<double>{2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15});

  // The IR estimate agrees once the batch is known to be 1, and counts the copy otherwise.
  CHECK(EstimateKernelLaunches(**model) == 2);
  auto known = ParseModel(std::string(text).replace(text.find("float[N,4,2]"), 12, "float[1,4,2]"));
  REQUIRE(known.ok());
  InferShapes(**known);
  CHECK(EstimateKernelLaunches(**known) == 1);
}

TEST_CASE("intermediate traffic counts the intermediates launched kernels write and read", "[cpu]") {
  const std::string chain = R"(
ir_version 8
opset "" 17
graph main (float[2,3,4] %x, float[4] %s) -> (float[2,3,4] %y)
{
  %t = Mul(%x, %s)
  %u = Add(%t, %s)
  %y = Relu(%u)
}
)";
  RunStats stats;
  Run(chain, {{"x", Iota({2, 3, 4})}, {"s", Floats({4}, {1, 2, 3, 4})}}, &stats);
  // %t written by Mul and read by Add, %u written by Add and read by Relu: 4 x 96 bytes.
  // The graph's inputs, its constant and its output are not intermediates.
  CHECK(stats.intermediate_traffic_bytes == 4 * 24 * sizeof(float));

  // A view moves nothing; the Relu still reads the slice it is given.
  const std::string split = R"(
ir_version 8
opset "" 17
graph main (float[1,4,2] %x) -> (float %y)
  init int64[2] %sizes = [1, 3]
{
  %p, %q = Split(%x, %sizes) {axis: 1}
  %y = Relu(%q)
}
)";
  Run(split, {{"x", Iota({1, 4, 2})}}, &stats);
  CHECK(stats.intermediate_traffic_bytes == 6 * sizeof(float));
}

namespace {

// A 1×1 Conv whose weights [out, in, 1, 1] come from ConstantOfShape: `in_channels` of the
// weights against 2 channels of %x.
std::string ConvWithComputedWeights(int in_channels) {
  return R"(
ir_version 8
opset "" 17
graph main (float[1,2,2,2] %x) -> (float[1,3,2,2] %y)
  init int64[4] %wdims = [3, )" + std::to_string(in_channels) + R"(, 1, 1]
{
  %w = ConstantOfShape(%wdims) {value: tensor float[1] [0.25]}
  %y = Conv(%x, %w)
}
)";
}

}  // namespace

TEST_CASE("kernels see values computed ahead as constants: weights checked and packed when prepared", "[cpu]") {
  SECTION("matching weights give the convolution's numbers") {
    auto model = ParseModel(ConvWithComputedWeights(2));
    REQUIRE(model.ok());
    auto session = Session::Create(**model);
    REQUIRE(session.ok());
    RunStats stats;
    auto outputs = (*session)->Run({{"x", Floats({1, 2, 2, 2}, {1, 2, 3, 4, 10, 20, 30, 40})}}, &stats);
    REQUIRE(outputs.ok());
    REQUIRE(stats.kernels_launched == 1);
    // Every output channel is 0.25 × (x[0] + x[1]) per pixel.
    const float* y = (*outputs)[0].tensor.data<float>();
    for (int channel = 0; channel < 3; ++channel) {
      REQUIRE(std::vector<float>(y + 4 * channel, y + 4 * channel + 4) == std::vector<float>{2.75f, 5.5f, 8.25f, 11});
    }
  }
  SECTION("a channel mismatch is refused when the session is created, not when it first runs") {
    auto model = ParseModel(ConvWithComputedWeights(5));
    REQUIRE(model.ok());
    auto session = Session::Create(**model);
    REQUIRE_FALSE(session.ok());
    REQUIRE_THAT(session.status().message(), Catch::Matchers::Contains("input has 2 channels but weights [3,5,1,1]"));
  }
}
