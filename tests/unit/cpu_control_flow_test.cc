// If, Loop and Scan on the CPU runtime: branch and iteration semantics, outer-scope reads,
// kernel counts per iteration, and the errors of malformed or unsupported bodies.
#include <catch2/catch.hpp>

#include "cpu_runtime/engine/session.h"
#include "cpu_test_support.h"
#include "text_format/text_format.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::cpu_test;

namespace {

RtTensor Int64Scalar(int64_t value) { return Make<int64_t>(DataType::kInt64, {}, {value}); }
RtTensor Bool(bool value, std::vector<int64_t> dims = {}) {
  return Make<uint8_t>(DataType::kBool, std::move(dims), {static_cast<uint8_t>(value)});
}

std::string ModelText(int opset, const std::string& graph) {
  return "ir_version 8\nopset \"\" " + std::to_string(opset) + "\n" + graph;
}

// %t is read only inside the branches: the runtime must keep it alive until the If has run.
const std::string kIfWithOuterReads = ModelText(16, R"(graph g (bool[] %c, float[3] %x) -> (float[3] %y) {
  %t = Relu(%x)
  %y = If(%c) {then_branch: graph then_b () -> (float[3] %a) {
    %a = Add(%t, %x)
  }, else_branch: graph else_b () -> (float[3] %b) {
    %b = Neg(%t)
  }} @choose
})");

// Sums the iteration numbers into %acc and scans each partial sum; `inputs` are the Loop's M
// and cond slots (either may be empty).
std::string SumLoop(const std::string& signature, const std::string& inputs) {
  return ModelText(16, "graph g (" + signature + R"() -> (float[1] %total, float[N,1] %partials)
  init float[1] %start = [0.5]
{
  %total, %partials = Loop()" + inputs + R"(, %start) {body: graph body (int64[] %i, bool[] %c, float[1] %acc) -> (bool[] %c_out, float[1] %acc_out, float[1] %partial) {
    %c_out = Identity(%c)
    %i_float = Cast(%i) {to: 1}
    %acc_out = Add(%acc, %i_float)
    %partial = Identity(%acc_out)
  }} @sum_loop
})");
}

}  // namespace

TEST_CASE("If runs the taken branch, reading outer values the branches alone use", "[cpu][control-flow]") {
  RtTensor x = Floats({3}, {-1, 2, 3});
  auto taken = Run(kIfWithOuterReads, {{"c", Bool(true)}, {"x", x}});
  CHECK(Values(taken[0].tensor) == std::vector<double>{-1, 4, 6});
  auto not_taken = Run(kIfWithOuterReads, {{"c", Bool(false)}, {"x", x}});
  CHECK(Values(not_taken[0].tensor) == std::vector<double>{0, -2, -3});
  // A one-element [1] condition is accepted too.
  std::string one_element_text = kIfWithOuterReads;
  one_element_text.replace(one_element_text.find("bool[] %c"), 9, "bool[1] %c");
  auto one_element = Run(one_element_text, {{"c", Bool(true, {1})}, {"x", x}});
  CHECK(Values(one_element[0].tensor) == std::vector<double>{-1, 4, 6});
}

TEST_CASE("If branches may give outputs of different shapes", "[cpu][control-flow]") {
  std::string text = ModelText(16, R"(graph g (bool[] %c, float[2,3] %x) -> (float %y) {
  %y = If(%c) {then_branch: graph then_b () -> (float[2] %a) {
    %a = Constant() {value: tensor float[2] [7.0, 8.0]}
  }, else_branch: graph else_b () -> (float[3,2] %b) {
    %b = Transpose(%x)
  }}
})");
  auto then_out = Run(text, {{"c", Bool(true)}, {"x", Iota({2, 3})}})[0].tensor;
  CHECK(then_out.dims() == std::vector<int64_t>{2});
  CHECK(Values(then_out) == std::vector<double>{7, 8});
  auto else_out = Run(text, {{"c", Bool(false)}, {"x", Iota({2, 3})}})[0].tensor;
  CHECK(else_out.dims() == std::vector<int64_t>{3, 2});
  CHECK(Values(else_out) == std::vector<double>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("If refuses a condition that is not a bool, naming the node", "[cpu][control-flow]") {
  std::string declared = ModelText(16, R"(graph g (float[] %c, float[3] %x) -> (float[3] %y) {
  %y = If(%c) {then_branch: graph then_b () -> (float[3] %a) {
    %a = Relu(%x)
  }, else_branch: graph else_b () -> (float[3] %b) {
    %b = Neg(%x)
  }} @choose
})");
  Status status = CreateStatus(declared);
  REQUIRE(status.code() == ErrorCode::kInvalidModel);
  CHECK_THAT(status.message(), Catch::Contains("node 'choose' (If)") && Catch::Contains("must be bool"));

  // Undeclared at preparation, so the run finds out.
  std::string undeclared = declared;
  undeclared.replace(undeclared.find("float[] %c"), 10, "%c");
  auto run = TryRun(undeclared, {{"c", Floats({}, {1})}, {"x", Iota({3})}});
  REQUIRE(!run.ok());
  CHECK_THAT(run.status().message(),
             Catch::Contains("node 'choose' (If)") && Catch::Contains("bool tensor of one element"));
  auto two_conditions = TryRun(undeclared, {{"c", Make<uint8_t>(DataType::kBool, {2}, {1, 0})}, {"x", Iota({3})}});
  CHECK_THAT(two_conditions.status().message(), Catch::Contains("got bool[2]"));
}

TEST_CASE("an unsupported op inside a branch fails when the session is created", "[cpu][control-flow]") {
  std::string text = ModelText(16, R"(graph g (bool[] %c, float[3] %x) -> (float[3] %y) {
  %y = If(%c) {then_branch: graph then_b () -> (float[3] %a) {
    %a = "my.domain"::Mystery(%x) @inner
  }, else_branch: graph else_b () -> (float[3] %b) {
    %b = Neg(%x)
  }} @choose
})");
  Status status = CreateStatus(text);
  REQUIRE(status.code() == ErrorCode::kUnsupported);
  CHECK_THAT(status.message(), Catch::Contains("node 'choose' (If), then_branch") &&
                                   Catch::Contains("node 'inner' (my.domain::Mystery)"));
}

TEST_CASE("sequence and optional values at a control-flow boundary are Unsupported", "[cpu][control-flow]") {
  // 22060a040a020801: TypeProto{sequence_type{elem_type{tensor_type{elem_type: FLOAT}}}}.
  std::string text = ModelText(16, R"(graph g (bool[] %c, float[3] %x) -> (opaque "22060a040a020801" %s) {
  %s = If(%c) {then_branch: graph then_b () -> (opaque "22060a040a020801" %a) {
    %a = SequenceConstruct(%x)
  }, else_branch: graph else_b () -> (opaque "22060a040a020801" %b) {
    %b = SequenceConstruct(%x, %x)
  }} @make_sequence
})");
  Status status = CreateStatus(text);
  REQUIRE(status.code() == ErrorCode::kUnsupported);
  CHECK_THAT(status.message(), Catch::Contains("node 'make_sequence' (If)") && Catch::Contains("sequence"));
}

TEST_CASE("Loop with only M runs M iterations and stacks the scan outputs", "[cpu][control-flow]") {
  std::string text = SumLoop("int64[] %M", "%M, ");
  auto out = Run(text, {{"M", Int64Scalar(4)}});
  CHECK(Values(out[0].tensor) == std::vector<double>{6.5});
  CHECK(out[1].tensor.dims() == std::vector<int64_t>{4, 1});
  CHECK(Values(out[1].tensor) == std::vector<double>{0.5, 1.5, 3.5, 6.5});
}

TEST_CASE("Loop with M and cond stops at whichever ends first", "[cpu][control-flow]") {
  std::string text = SumLoop("int64[] %M, bool[] %cond", "%M, %cond");
  auto full = Run(text, {{"M", Int64Scalar(3)}, {"cond", Bool(true)}});
  CHECK(Values(full[1].tensor) == std::vector<double>{0.5, 1.5, 3.5});
  // A false condition runs nothing: the carried value comes back unchanged.
  auto none = Run(text, {{"M", Int64Scalar(3)}, {"cond", Bool(false)}});
  CHECK(Values(none[0].tensor) == std::vector<double>{0.5});
  CHECK(none[1].tensor.dims() == std::vector<int64_t>{0, 1});
  // An undeclared M is checked when the loop starts.
  std::string undeclared = SumLoop("%M, bool[] %cond", "%M, %cond");
  REQUIRE_THAT(TryRun(undeclared, {{"M", Floats({}, {3})}, {"cond", Bool(true)}}).status().message(),
               Catch::Contains("node 'sum_loop' (Loop)") && Catch::Contains("trip count M must be an int64"));
}

TEST_CASE("Loop with only cond runs while the body's condition holds; carried shapes may grow",
          "[cpu][control-flow]") {
  // Doubles %x until it reaches %limit; %trail collects every value seen, one longer each time.
  std::string text = ModelText(16, R"(graph g (bool[] %cond, float[1] %x, float[] %limit) -> (float[1] %last, float %trail, float[N,1] %seen)
  init float[1] %two = [2.0]
{
  %last, %trail, %seen = Loop(, %cond, %x, %x) {body: graph body (int64[] %i, bool[] %c, float[1] %v, float %path) -> (bool[] %c_out, float[1] %next, float %longer, float[1] %scan) {
    %next = Mul(%v, %two)
    %c_out = Less(%next, %limit)
    %longer = Concat(%path, %next) {axis: 0}
    %scan = Identity(%next)
  }}
})");
  auto out = Run(text, {{"cond", Bool(true)}, {"x", Floats({1}, {1})}, {"limit", Floats({}, {20})}});
  CHECK(Values(out[0].tensor) == std::vector<double>{32});
  CHECK(Values(out[1].tensor) == std::vector<double>{1, 2, 4, 8, 16, 32});
  CHECK(out[2].tensor.dims() == std::vector<int64_t>{5, 1});
  CHECK(Values(out[2].tensor) == std::vector<double>{2, 4, 8, 16, 32});
}

TEST_CASE("a zero-trip Loop shapes its scan outputs from the body's declared type", "[cpu][control-flow]") {
  std::string text = SumLoop("int64[] %M", "%M, ");
  auto out = Run(text, {{"M", Int64Scalar(0)}});
  CHECK(Values(out[0].tensor) == std::vector<double>{0.5});
  CHECK(out[1].tensor.dtype() == DataType::kFloat);
  CHECK(out[1].tensor.dims() == std::vector<int64_t>{0, 1});

  std::string undeclared = text;
  undeclared.replace(undeclared.find("float[1] %partial)"), 18, "float[?] %partial)");
  REQUIRE(Values(Run(undeclared, {{"M", Int64Scalar(2)}})[1].tensor) == std::vector<double>{0.5, 1.5});
  auto empty = TryRun(undeclared, {{"M", Int64Scalar(0)}});
  REQUIRE(empty.status().code() == ErrorCode::kUnsupported);
  CHECK_THAT(empty.status().message(), Catch::Contains("node 'sum_loop' (Loop)") && Catch::Contains("'partial'") &&
                                           Catch::Contains("float[?]"));
}

TEST_CASE("kernel counts include every iteration of a body, and nothing for the Loop itself", "[cpu][control-flow]") {
  RunStats stats;
  Run(SumLoop("int64[] %M", "%M, "), {{"M", Int64Scalar(5)}}, &stats);
  // Each iteration launches Cast and Add; the two Identity nodes are views.
  CHECK(stats.kernels_launched == 10);
  CHECK(stats.nodes_executed == 1 + 5 * 4);
  CHECK(stats.peak_intermediate_bytes > 0);
  CHECK(stats.peak_intermediate_bytes < 4096);
}

TEST_CASE("a Loop body binds outer values for an If nested in it", "[cpu][control-flow]") {
  // Odd iterations add %step, even ones subtract it; %step is two scopes out.
  std::string text = ModelText(16, R"(graph g (int64[] %M, float[2] %step) -> (float[2] %result)
  init int64[] %two = [2]
  init int64[] %zero = [0]
{
  %result = Loop(%M, , %step) {body: graph body (int64[] %i, bool[] %c, float[2] %acc) -> (bool[] %c_out, float[2] %acc_out) {
    %c_out = Identity(%c)
    %parity = Mod(%i, %two)
    %even = Equal(%parity, %zero)
    %acc_out = If(%even) {then_branch: graph then_b () -> (float[2] %down) {
      %down = Sub(%acc, %step)
    }, else_branch: graph else_b () -> (float[2] %up) {
      %up = Add(%acc, %step)
    }}
  }}
})");
  auto out = Run(text, {{"M", Int64Scalar(3)}, {"step", Floats({2}, {1, 10})}});
  // start 1,10; i=0 subtracts, i=1 adds, i=2 subtracts.
  CHECK(Values(out[0].tensor) == std::vector<double>{0, 0});
}

TEST_CASE("Loop bodies must match the node's inputs and outputs", "[cpu][control-flow]") {
  std::string text = ModelText(16, R"(graph g (int64[] %M, float[1] %x) -> (float[1] %y) {
  %y = Loop(%M, , %x) {body: graph body (int64[] %i, bool[] %c) -> (bool[] %c_out, float[1] %v) {
    %c_out = Identity(%c)
    %v = Cast(%i) {to: 1}
  }} @bad_loop
})");
  Status status = CreateStatus(text);
  REQUIRE(status.code() == ErrorCode::kInvalidModel);
  CHECK_THAT(status.message(), Catch::Contains("node 'bad_loop' (Loop)") && Catch::Contains("must take 3"));
}

TEST_CASE("Scan (opset 9+) reads along any axis in either direction and stacks outputs where asked",
          "[cpu][control-flow]") {
  // The running sum over the columns of %x, last column first.
  std::string text = ModelText(16, R"(graph g (float[2] %init, float[2,3] %x) -> (float[2] %sum, float[2,3] %sums, float[3,2] %columns) {
  %sum, %sums, %columns = Scan(%init, %x) {body: graph body (float[2] %s_in, float[2] %column) -> (float[2] %s_out, float[2] %s_scan, float[2] %doubled) {
    %s_out = Add(%s_in, %column)
    %s_scan = Identity(%s_out)
    %doubled = Add(%column, %column)
  }, num_scan_inputs: 1, scan_input_axes: [1], scan_input_directions: [1], scan_output_axes: [-1, 0], scan_output_directions: [1, 0]}
})");
  RunStats stats;
  auto out = Run(text, {{"init", Floats({2}, {10, 20})}, {"x", Iota({2, 3})}}, &stats);
  // Columns visited: [2,5], [1,4], [0,3]; sums [12,25], [13,29], [13,32].
  CHECK(Values(out[0].tensor) == std::vector<double>{13, 32});
  // Prepended along axis 1: the last iteration's sum comes first.
  CHECK(out[1].tensor.dims() == std::vector<int64_t>{2, 3});
  CHECK(Values(out[1].tensor) == std::vector<double>{13, 13, 12, 32, 29, 25});
  CHECK(out[2].tensor.dims() == std::vector<int64_t>{3, 2});
  CHECK(Values(out[2].tensor) == std::vector<double>{4, 10, 2, 8, 0, 6});
  CHECK(stats.kernels_launched == 3 * 2);
}

TEST_CASE("Scan checks its axes, directions and sequence lengths", "[cpu][control-flow]") {
  std::string text = ModelText(16, R"(graph g (float[2] %init, float %x, float %w) -> (float[2] %sum) {
  %sum = Scan(%init, %x, %w) {body: graph body (float[2] %s_in, float[2] %a, float[2] %b) -> (float[2] %s_out) {
    %ab = Mul(%a, %b)
    %s_out = Add(%s_in, %ab)
  }, num_scan_inputs: 2, scan_input_axes: [0, 1]} @zip
})");
  auto zipped = Run(text, {{"init", Floats({2}, {0, 0})}, {"x", Iota({3, 2})}, {"w", Iota({2, 3})}});
  // x rows [0,1],[2,3],[4,5] times w columns [0,3],[1,4],[2,5].
  CHECK(Values(zipped[0].tensor) == std::vector<double>{0 + 2 + 8, 3 + 12 + 25});
  auto mismatch = TryRun(text, {{"init", Floats({2}, {0, 0})}, {"x", Iota({3, 2})}, {"w", Iota({2, 4})}});
  CHECK_THAT(mismatch.status().message(), Catch::Contains("node 'zip' (Scan)") && Catch::Contains("3 and 4"));

  std::string bad_direction = text;
  bad_direction.replace(bad_direction.find("scan_input_axes: [0, 1]"), 23, "scan_input_directions: [0, 2]");
  CHECK_THAT(CreateStatus(bad_direction).message(), Catch::Contains("a direction is 0 or 1"));
  std::string bad_axis = text;
  bad_axis.replace(bad_axis.find("[0, 1]"), 6, "[0, 2]");
  auto out_of_range = TryRun(bad_axis, {{"init", Floats({2}, {0, 0})}, {"x", Iota({3, 2})}, {"w", Iota({2, 3})}});
  CHECK_THAT(out_of_range.status().message(), Catch::Contains("scan input axis 2 is out of range"));
}

TEST_CASE("Scan at opset 8 scans each batch element; short sequence_lens are Unsupported", "[cpu][control-flow]") {
  std::string text = ModelText(8, R"(graph g (int64 %lens, float[2,2] %init, float[2,3,2] %x) -> (float[2,2] %y, float[2,3,2] %z) {
  %y, %z = Scan(%lens, %init, %x) {body: graph body (float[2] %s_in, float[2] %row) -> (float[2] %s_out, float[2] %scan) {
    %s_out = Add(%s_in, %row)
    %scan = Identity(%s_out)
  }, num_scan_inputs: 1, directions: [1]}
})");
  RtTensor init = Floats({2, 2}, {0, 0, 100, 100});
  auto lens = Make<int64_t>(DataType::kInt64, {2}, {3, 3});
  auto out = Run(text, {{"lens", lens}, {"init", init}, {"x", Iota({2, 3, 2})}});
  CHECK(Values(out[0].tensor) == std::vector<double>{6, 9, 124, 127});
  CHECK(out[1].tensor.dims() == std::vector<int64_t>{2, 3, 2});
  CHECK(Values(out[1].tensor) == std::vector<double>{4, 5, 6, 8, 6, 9, 110, 111, 118, 120, 124, 127});

  auto short_lens = Make<int64_t>(DataType::kInt64, {2}, {3, 2});
  auto refused = TryRun(text, {{"lens", short_lens}, {"init", init}, {"x", Iota({2, 3, 2})}});
  REQUIRE(refused.status().code() == ErrorCode::kUnsupported);
  CHECK_THAT(refused.status().message(), Catch::Contains("sequence_lens holds 2"));
}
