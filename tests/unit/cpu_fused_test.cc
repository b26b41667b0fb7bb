// Nodes calling model-local functions on the CPU: fused elementwise programs, bodies run op by
// op (the generic path and the reference), user functions, and the errors for calls that
// cannot run. Contractions and row kernels: cpu_fused_kernels_test.cc.
#include "cpu_fused_test_helpers.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::fused_test;

namespace {

// y = Relu((x * s + b) * 0.5) with s broadcast along the last axis and b along the middle one;
// the sum u is also read outside the group, so the fused node has two outputs.
constexpr const char* kChain = R"(
ir_version 8
opset "" 17
graph main (float[2,3,4] %x, float[4] %s, float[3,1] %b) -> (float[2,3,4] %y, float[2,3,4] %u)
  init float[] %half = [0.5]
{
  %t = Mul(%x, %s) @mul
  %u = Add(%t, %b) @add
  %v = Mul(%u, %half) @scale
  %y = Relu(%v) @relu
}
)";

std::vector<NamedTensor> ChainFeeds(DataType dtype) {
  return {{"x", Random(dtype, {2, 3, 4}, 1)}, {"s", Random(dtype, {4}, 2)}, {"b", Random(dtype, {3, 1}, 3)}};
}

}  // namespace

TEST_CASE("an elementwise group runs as one kernel with broadcasting and two outputs", "[cpu][fused]") {
  Comparison runs = Compare(kChain, {"mul", "add", "scale", "relu"}, ChainFeeds(DataType::kFloat));
  REQUIRE(runs.unfused.stats.kernels_launched == 4);
  REQUIRE(runs.fused.stats.kernels_launched == 1);
  REQUIRE(runs.fused.stats.nodes_executed == 1);
  // Op by op: the call plus its four body nodes (the inlined constant is computed when the
  // body is prepared, not on every run).
  REQUIRE(runs.op_by_op.stats.kernels_launched == 4);
  REQUIRE(runs.op_by_op.stats.nodes_executed == 5);
  // Spot-check one element against the formula.
  const RtTensor x = ChainFeeds(DataType::kFloat)[0].tensor, s = ChainFeeds(DataType::kFloat)[1].tensor;
  const RtTensor b = ChainFeeds(DataType::kFloat)[2].tensor;
  const float expected = std::max(0.0f, (x.data<float>()[23] * s.data<float>()[3] + b.data<float>()[2]) * 0.5f);
  REQUIRE(runs.fused.outputs[0].tensor.data<float>()[23] == Approx(expected));
}

TEST_CASE("a float16 elementwise group rounds like the op-by-op run", "[cpu][fused]") {
  std::string text = kChain;
  for (std::string from : {"float[", "float "}) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + 8)) {
      text.replace(at, from.size(), "float16" + from.substr(5));
    }
  }
  Comparison runs = Compare(text, {"mul", "add", "scale", "relu"}, ChainFeeds(DataType::kFloat16), 1e-3, 1e-3);
  REQUIRE(runs.fused.outputs[0].tensor.dtype() == DataType::kFloat16);
  REQUIRE(runs.fused.stats.kernels_launched == 1);
}

TEST_CASE("decomposed GELU and SiLU run as one elementwise program", "[cpu][fused]") {
  const std::string text = R"(
ir_version 8
opset "" 17
graph main (float[4,9] %x) -> (float[4,9] %gelu, float[4,9] %silu)
  init float[] %sqrt2 = [1.4142135381698608]
  init float[] %one = [1.0]
  init float[] %half = [0.5]
{
  %d = Div(%x, %sqrt2) @div
  %e = Erf(%d) @erf
  %f = Add(%e, %one) @add
  %g = Mul(%x, %f) @mul
  %gelu = Mul(%g, %half) @half
  %s = Sigmoid(%x) @sigmoid
  %silu = Mul(%x, %s) @swish
}
)";
  std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {4, 9}, 8, -4.0f, 4.0f)}};
  REQUIRE(Compare(text, {"div", "erf", "add", "mul", "half"}, feeds).fused.stats.kernels_launched == 3);
  REQUIRE(Compare(text, {"sigmoid", "swish"}, feeds).fused.stats.kernels_launched == 6);
}

TEST_CASE("a group of part of the graph fuses only that part", "[cpu][fused]") {
  Comparison runs = Compare(kChain, {"scale", "relu"}, ChainFeeds(DataType::kFloat));
  REQUIRE(runs.fused.stats.kernels_launched == 3);
  REQUIRE(runs.op_by_op.stats.kernels_launched == 4);
}

TEST_CASE("an output smaller than the others' broadcast falls back to the body", "[cpu][fused]") {
  // t = Neg(x) is [3]; y = t + z is [2,3]: one pass over [2,3] cannot write t.
  const std::string text = R"(
ir_version 8
opset "" 17
graph main (float[3] %x, float[2,3] %z) -> (float[3] %t, float[2,3] %y)
{
  %t = Neg(%x) @neg
  %y = Add(%t, %z) @add
}
)";
  std::vector<NamedTensor> feeds = {{"x", Random(DataType::kFloat, {3}, 4)},
                                    {"z", Random(DataType::kFloat, {2, 3}, 5)}};
  Comparison runs = Compare(text, {"neg", "add"}, feeds);
  REQUIRE(runs.fused.outputs[0].tensor.dims() == std::vector<int64_t>{3});
  REQUIRE(runs.fused.stats.kernels_launched == 2);  // honest: the body ran op by op

  // With z of shape [3] both outputs are [3] and the same body runs fused.
  std::string same = text;
  same.replace(same.find("float[2,3] %z"), 13, "float[3] %z");
  feeds[1].tensor = Random(DataType::kFloat, {3}, 6);
  REQUIRE(Compare(same, {"neg", "add"}, feeds).fused.stats.kernels_launched == 1);
}

TEST_CASE("a body's scalar constants broadcast with their own rank", "[cpu][fused]") {
  // The [1]-shaped constants make the rank-0 inputs' results [1].
  const std::string text = R"(
ir_version 8
opset "" 17
opset "ai.fusionopt" 1
graph main (float[] %x, int64[] %i) -> (%y, %j)
{
  %y, %j = ai.fusionopt::AddOne(%x, %i)
}

function ai.fusionopt::AddOne (%a, %n) -> (%b, %m) opset "" 17 {
  %one = Constant() {value: tensor float[1] [1.0]}
  %big = Constant() {value: tensor int64[1] [9007199254740993]}
  %b = Add(%a, %one)
  %m = Add(%n, %big)
}
)";
  auto model = Parse(text);
  RtTensor x = RtTensor::Allocate(DataType::kFloat, {});
  x.data<float>()[0] = 2.5f;
  RtTensor i = RtTensor::Allocate(DataType::kInt64, {});
  i.data<int64_t>()[0] = -1;
  Outcome fused = Run(*model, {{"x", x}, {"i", i}});
  Outcome op_by_op = Run(*model, {{"x", x}, {"i", i}}, false);
  REQUIRE(fused.stats.kernels_launched == 1);
  REQUIRE(op_by_op.stats.kernels_launched == 2);
  RequireIdentical(fused.outputs, op_by_op.outputs);
  REQUIRE(fused.outputs[0].tensor.dims() == std::vector<int64_t>{1});
  REQUIRE(fused.outputs[0].tensor.data<float>()[0] == 3.5f);
  // int64 constants are exact, beyond what a double holds.
  REQUIRE(fused.outputs[1].tensor.dims() == std::vector<int64_t>{1});
  REQUIRE(fused.outputs[1].tensor.data<int64_t>()[0] == 9007199254740992LL);
}

TEST_CASE("a body with an op the fused program cannot hold runs op by op", "[cpu][fused]") {
  // Transpose is data movement: the body is no elementwise program.
  const std::string text = R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x) -> (float[3,2] %y)
{
  %t = Relu(%x) @relu
  %y = Transpose(%t) {perm: [1, 0]} @transpose
}
)";
  Comparison runs = Compare(text, {"relu", "transpose"}, {{"x", Random(DataType::kFloat, {2, 3}, 7)}});
  REQUIRE(runs.fused.stats.kernels_launched == 2);
}

// ---------------------------------------------------------------- user functions

namespace {

// Leaky reads its caller's alpha; RowMean imports opset 18 (axes as an input) while the model
// imports 13; Outer calls Leaky from inside a body.
constexpr const char* kUserFunctions = R"(
ir_version 8
opset "" 13
opset "com.user" 1
graph main (float[2,3] %x) -> (float[2,3] %y, float[2,1] %m, float[2,3] %o)
{
  %y = com.user::Leaky(%x) {alpha: 0.25} @leaky
  %m = com.user::RowMean(%x) @rowmean
  %o = com.user::Outer(%x) @outer
}

function com.user::Leaky (%a) -> (%b) attributes [alpha] opset "" 17 {
  %b = LeakyRelu(%a) {alpha: ref float alpha}
}

function com.user::RowMean (%a) -> (%b) opset "" 18 {
  %axes = Constant() {value: tensor int64[1] [1]}
  %b = ReduceMean(%a, %axes)
}

function com.user::Outer (%a) -> (%b) opset "" 17 opset "com.user" 1 {
  %n = Neg(%a)
  %b = com.user::Leaky(%n) {alpha: 0.5}
}
)";

}  // namespace

TEST_CASE("a user's function runs its body under its own opsets and the caller's attributes", "[cpu][fused]") {
  auto model = Parse(kUserFunctions);
  RtTensor x = RtTensor::Allocate(DataType::kFloat, {2, 3});
  const std::vector<float> values = {-4, 2, 6, 1, -1, 3};
  std::copy(values.begin(), values.end(), x.data<float>());
  for (bool fused_kernels : {true, false}) {
    Outcome outcome = Run(*model, {{"x", x}}, fused_kernels);
    const float* y = outcome.outputs[0].tensor.data<float>();
    REQUIRE(y[0] == -1.0f);  // -4 * 0.25
    REQUIRE(y[1] == 2.0f);
    REQUIRE(outcome.outputs[1].tensor.dims() == std::vector<int64_t>{2, 1});
    REQUIRE(outcome.outputs[1].tensor.data<float>()[0] == Approx(4.0f / 3.0f));
    REQUIRE(outcome.outputs[1].tensor.data<float>()[1] == Approx(1.0f));
    const float* o = outcome.outputs[2].tensor.data<float>();
    REQUIRE(o[0] == 4.0f);   // -(-4)
    REQUIRE(o[1] == -1.0f);  // -2 * 0.5
  }
  // Leaky's body is one op either way; RowMean's is a reduction; Outer's holds a call, so it
  // runs op by op: Neg, then Leaky's op.
  REQUIRE(Run(*model, {{"x", x}}).stats.kernels_launched == 4);
  REQUIRE(Run(*model, {{"x", x}}, false).stats.kernels_launched == 4);
}

TEST_CASE("an argument a call omits is an omitted input inside the body", "[cpu][fused]") {
  const std::string text = R"(
ir_version 8
opset "" 17
opset "com.user" 1
graph main (float[4] %x, float[] %hi) -> (float[4] %y)
{
  %y = com.user::Clamp(%x, , %hi)
}

function com.user::Clamp (%a, %lo, %hi) -> (%b) opset "" 17 {
  %b = Clip(%a, %lo, %hi)
}
)";
  auto model = Parse(text);
  RtTensor x = RtTensor::Allocate(DataType::kFloat, {4});
  const std::vector<float> values = {-3, 0.5f, 1.5f, 7};
  std::copy(values.begin(), values.end(), x.data<float>());
  RtTensor hi = RtTensor::Allocate(DataType::kFloat, {});
  hi.data<float>()[0] = 1.0f;
  for (bool fused_kernels : {true, false}) {
    Outcome outcome = Run(*model, {{"x", x}, {"hi", hi}}, fused_kernels);
    const float* y = outcome.outputs[0].tensor.data<float>();
    REQUIRE(std::vector<float>(y, y + 4) == std::vector<float>{-3, 0.5f, 1, 1});
    REQUIRE(outcome.stats.kernels_launched == 1);
  }
}

TEST_CASE("calls that cannot run are errors when the session is prepared", "[cpu][fused]") {
  const std::string header = "ir_version 8\nopset \"\" 17\nopset \"com.user\" 1\nopset \"ai.fusionopt\" 1\n";
  SECTION("a function that calls itself") {
    auto model = Parse(header + R"(graph main (float[2] %x) -> (float[2] %y)
{
  %y = com.user::Forever(%x) @call
}

function com.user::Forever (%a) -> (%b) opset "" 17 opset "com.user" 1 {
  %n = Neg(%a)
  %b = com.user::Forever(%n)
}
)");
    auto session = Session::Create(*model);
    REQUIRE(session.status().code() == ErrorCode::kInvalidModel);
    REQUIRE_THAT(session.status().message(),
                 Catch::Contains("calls itself: com.user::Forever -> com.user::Forever"));
  }
  SECTION("functions that call each other") {
    auto model = Parse(header + R"(graph main (float[2] %x) -> (float[2] %y)
{
  %y = com.user::Ping(%x) @call
}

function com.user::Ping (%a) -> (%b) opset "" 17 opset "com.user" 1 {
  %b = com.user::Pong(%a)
}

function com.user::Pong (%a) -> (%b) opset "" 17 opset "com.user" 1 {
  %b = com.user::Ping(%a)
}
)");
    auto session = Session::Create(*model);
    REQUIRE(session.status().code() == ErrorCode::kInvalidModel);
    REQUIRE_THAT(session.status().message(), Catch::Contains("com.user::Ping -> com.user::Pong -> com.user::Ping"));
  }
  SECTION("a fused node whose function the model does not define") {
    auto model = Parse(header + R"(graph main (float[2] %x) -> (float[2] %y)
{
  %y = ai.fusionopt::FusedMissing(%x) @lost
}
)");
    auto session = Session::Create(*model);
    REQUIRE(session.status().code() == ErrorCode::kUnsupported);
    REQUIRE_THAT(session.status().message(), Catch::Contains("node 'lost'"));
    REQUIRE_THAT(session.status().message(), Catch::Contains("ai.fusionopt::FusedMissing"));
  }
  SECTION("an unsupported op inside a body names the function and the op") {
    auto model = Parse(header + R"(graph main (float[2] %x) -> (float[2] %y)
{
  %y = com.user::Odd(%x) @call
}

function com.user::Odd (%a) -> (%b) opset "" 17 opset "com.other" 1 {
  %b = com.other::Unknown(%a)
}
)");
    auto session = Session::Create(*model);
    REQUIRE(session.status().code() == ErrorCode::kUnsupported);
    REQUIRE_THAT(session.status().message(), Catch::Contains("function 'com.user::Odd'"));
    REQUIRE_THAT(session.status().message(), Catch::Contains("Unknown"));
  }
  SECTION("a call with more arguments than the function takes") {
    auto model = Parse(header + R"(graph main (float[2] %x) -> (float[2] %y)
{
  %y = com.user::One(%x, %x) @call
}

function com.user::One (%a) -> (%b) opset "" 17 {
  %b = Neg(%a)
}
)");
    auto session = Session::Create(*model);
    REQUIRE(session.status().code() == ErrorCode::kInvalidModel);
    REQUIRE_THAT(session.status().message(), Catch::Contains("node 'call'"));
  }
}
