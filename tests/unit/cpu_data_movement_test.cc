#include <catch2/catch.hpp>

#include "cpu_runtime/engine/session.h"
#include "cpu_test_support.h"
#include "text_format/text_format.h"

using namespace fusionopt;
using namespace fusionopt::cpu;
using namespace fusionopt::cpu_test;

namespace {

RtTensor Int64s(std::vector<int64_t> dims, const std::vector<int64_t>& values) {
  return Make(DataType::kInt64, std::move(dims), values);
}

// A one-graph model: `signature` is "inputs) -> (outputs", `body` the node lines.
std::string Text(int opset, const std::string& signature, const std::string& body, const std::string& inits = "") {
  return "ir_version 8\nopset \"\" " + std::to_string(opset) + "\ngraph g (" + signature + ")\n" + inits + "{\n" +
         body + "\n}\n";
}

// One float input %x, one output %y of `node`.
RtTensor RunUnary(int opset, const std::string& node, const RtTensor& x, const std::string& inits = "") {
  return Run(Text(opset, "float %x) -> (%y", "  %y = " + node, inits), {{"x", x}})[0].tensor;
}

}  // namespace

TEST_CASE("views share storage and launch nothing", "[cpu]") {
  RtTensor x = Iota({2, 3, 4});
  RunStats stats;
  auto out = Run(Text(14, "float %x) -> (%r, %f, %s, %u, %i",
                      "  %r = Reshape(%x, %shape)\n  %f = Flatten(%x) {axis: -1}\n"
                      "  %u = Unsqueeze(%x, %axes)\n  %s = Squeeze(%u, %axes)\n  %i = Identity(%x)",
                      "  init int64[3] %shape = [0, -1, 2]\n  init int64[2] %axes = [0, -1]\n"),
                 {{"x", x}}, &stats);
  REQUIRE(out[0].tensor.dims() == std::vector<int64_t>{2, 6, 2});
  REQUIRE(out[1].tensor.dims() == std::vector<int64_t>{6, 4});
  REQUIRE(out[2].tensor.dims() == std::vector<int64_t>{2, 3, 4});
  REQUIRE(out[3].tensor.dims() == std::vector<int64_t>{1, 2, 3, 4, 1});
  for (const auto& output : out) REQUIRE(output.tensor.raw() == x.raw());
  REQUIRE(stats.kernels_launched == 0);
  REQUIRE(stats.nodes_executed == 5);
}

TEST_CASE("Reshape resolves 0 and -1, honours allowzero, and rejects impossible shapes", "[cpu]") {
  RtTensor x = Iota({2, 0, 3});
  auto text = [](int opset, const std::string& shape, int allow_zero) {
    return Text(opset, "float %x) -> (%y", "  %y = Reshape(%x, %s) {allowzero: " + std::to_string(allow_zero) + "}",
                "  init int64[" + std::to_string(std::count(shape.begin(), shape.end(), ',') + 1) + "] %s = [" +
                    shape + "]\n");
  };
  REQUIRE(Run(text(14, "0, 3, -1", 0), {{"x", x}})[0].tensor.dims() == std::vector<int64_t>{2, 3, 0});
  REQUIRE(Run(text(14, "0, 3, 0", 1), {{"x", x}})[0].tensor.dims() == std::vector<int64_t>{0, 3, 0});
  // Before opset 14 allowzero does not exist: 0 copies the input dim.
  REQUIRE(Run(text(13, "3, 0, 2", 1), {{"x", x}})[0].tensor.dims() == std::vector<int64_t>{3, 0, 2});
  RtTensor y = Iota({2, 3});
  REQUIRE(Run(text(13, "-1, 2", 0), {{"x", y}})[0].tensor.dims() == std::vector<int64_t>{3, 2});
  REQUIRE_THAT(TryRun(text(13, "-1, -1", 0), {{"x", y}}).status().message(), Catch::Contains("more than one -1"));
  REQUIRE_THAT(TryRun(text(13, "4, -1", 0), {{"x", y}}).status().message(), Catch::Contains("cannot reshape [2,3]"));
  REQUIRE_THAT(TryRun(text(13, "5", 0), {{"x", y}}).status().message(), Catch::Contains("cannot reshape"));
}

TEST_CASE("Squeeze and Unsqueeze read axes from attributes before 13 and inputs after", "[cpu]") {
  RtTensor x = Iota({1, 3, 1});
  REQUIRE(RunUnary(11, "Squeeze(%x) {axes: [-1]}", x).dims() == std::vector<int64_t>{1, 3});
  REQUIRE(RunUnary(11, "Squeeze(%x)", x).dims() == std::vector<int64_t>{3});
  REQUIRE(RunUnary(11, "Unsqueeze(%x) {axes: [1, 0]}", x).dims() == std::vector<int64_t>{1, 1, 1, 3, 1});
  REQUIRE(RunUnary(13, "Unsqueeze(%x, %a)", x, "  init int64[1] %a = [-1]\n").dims() ==
          std::vector<int64_t>{1, 3, 1, 1});
  auto squeeze_3 = Text(13, "float %x) -> (%y", "  %y = Squeeze(%x, %a)", "  init int64[1] %a = [1]\n");
  REQUIRE_THAT(TryRun(squeeze_3, {{"x", x}}).status().message(), Catch::Contains("cannot squeeze axis 1 of size 3"));
  auto twice = Text(11, "float %x) -> (%y", "  %y = Unsqueeze(%x) {axes: [0, -5]}");
  REQUIRE_THAT(TryRun(twice, {{"x", x}}).status().message(), Catch::Contains("names axis 0 twice"));
  REQUIRE_THAT(CreateStatus(Text(13, "float %x) -> (%y", "  %y = Unsqueeze(%x)")).message(),
               Catch::Contains("axes are required"));
}

TEST_CASE("Dropout at inference is a view with an all-true mask; random training is refused", "[cpu]") {
  RtTensor x = Floats({2}, {1.5f, -2});
  auto out = Run(Text(13, "float %x) -> (%y, %m", "  %y, %m = Dropout(%x)"), {{"x", x}});
  REQUIRE(out[0].tensor.raw() == x.raw());
  REQUIRE(out[1].tensor.dtype() == DataType::kBool);
  REQUIRE(Values(out[1].tensor) == std::vector<double>{1, 1});
  // Opsets 7-9 give the mask the input's type.
  auto old = Run(Text(7, "float %x) -> (%y, %m", "  %y, %m = Dropout(%x) {ratio: 0.3}"), {{"x", x}});
  REQUIRE(old[1].tensor.dtype() == DataType::kFloat);
  REQUIRE(Values(old[1].tensor) == std::vector<double>{1, 1});
  auto training = [](const std::string& ratio) {
    return Text(13, "float %x) -> (%y", "  %y = Dropout(%x, %r, %t)",
                "  init float[] %r = [" + ratio + "]\n  init bool[] %t = [1]\n");
  };
  Status random = CreateStatus(training("0.5"));
  REQUIRE(random.code() == ErrorCode::kUnsupported);
  REQUIRE_THAT(random.message(), Catch::Contains("training mode"));
  REQUIRE(Values(Run(training("0.0"), {{"x", x}})[0].tensor) == std::vector<double>{1.5, -2});
}

TEST_CASE("Shape slices with start/end at 15 and Size counts, both on the host", "[cpu]") {
  RtTensor x = Iota({2, 3, 5, 7});
  RunStats stats;
  auto out = Run(Text(15, "float %x) -> (%a, %b, %c, %n",
                      "  %a = Shape(%x)\n  %b = Shape(%x) {start: 1, end: -1}\n"
                      "  %c = Shape(%x) {start: -10, end: 100}\n  %n = Size(%x)"),
                 {{"x", x}}, &stats);
  REQUIRE(Values(out[0].tensor) == std::vector<double>{2, 3, 5, 7});
  REQUIRE(Values(out[1].tensor) == std::vector<double>{3, 5});
  REQUIRE(Values(out[2].tensor) == std::vector<double>{2, 3, 5, 7});
  REQUIRE(out[3].tensor.dims().empty());
  REQUIRE(Values(out[3].tensor) == std::vector<double>{210});
  REQUIRE(stats.kernels_launched == 0);
}

// Naive transpose for checking the tiled and strided paths.
std::vector<double> ReferenceTranspose(const RtTensor& x, const std::vector<int64_t>& perm) {
  const auto& dims = x.dims();
  std::vector<int64_t> out_dims, strides(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) strides[k - 1] = strides[k] * dims[k];
  for (int64_t axis : perm) out_dims.push_back(dims[axis]);
  std::vector<double> out;
  std::vector<int64_t> index(dims.size(), 0);
  for (int64_t n = 0; n < x.NumElements(); ++n) {
    int64_t offset = 0;
    for (size_t k = 0; k < perm.size(); ++k) offset += index[k] * strides[perm[k]];
    out.push_back(x.ValueAsDouble(offset));
    for (size_t k = dims.size(); k-- > 0;) {
      if (++index[k] < out_dims[k]) break;
      index[k] = 0;
    }
  }
  return out;
}

TEST_CASE("Transpose: default reversal, tiled inner-axis moves and strided copies match a naive loop", "[cpu]") {
  RtTensor small = Iota({2, 3});
  RtTensor y = RunUnary(13, "Transpose(%x)", small);
  REQUIRE(y.dims() == std::vector<int64_t>{3, 2});
  REQUIRE(Values(y) == std::vector<double>{0, 3, 1, 4, 2, 5});
  struct Case {
    std::vector<int64_t> dims, perm;
  };
  for (const Case& c :
       {Case{{3, 67, 131}, {0, 2, 1}}, Case{{2, 33, 17, 65}, {0, 2, 3, 1}}, Case{{2, 33, 17, 65}, {3, 1, 0, 2}},
        Case{{4, 5, 6, 7}, {1, 0, 2, 3}}, Case{{4, 5, 6, 7}, {0, 1, 2, 3}}, Case{{300, 301}, {1, 0}}}) {
    RtTensor x = Iota(c.dims);
    std::string perm = "[" + std::to_string(c.perm[0]);
    for (size_t k = 1; k < c.perm.size(); ++k) perm += ", " + std::to_string(c.perm[k]);
    INFO("perm " << perm << "]");
    RtTensor out = RunUnary(13, "Transpose(%x) {perm: " + perm + "]}", x);
    REQUIRE(Values(out) == ReferenceTranspose(x, c.perm));
  }
  REQUIRE_THAT(CreateStatus(Text(13, "float %x) -> (%y", "  %y = Transpose(%x) {perm: [0, 0]}")).message(),
               Catch::Contains("not a permutation"));
  auto rank_mismatch = Text(13, "float %x) -> (%y", "  %y = Transpose(%x) {perm: [1, 0]}");
  REQUIRE_THAT(TryRun(rank_mismatch, {{"x", Iota({2, 2, 2})}}).status().message(), Catch::Contains("input rank 3"));
}

TEST_CASE("data movement copies any element type by its size", "[cpu]") {
  RtTensor bytes = Make<int8_t>(DataType::kInt8, {2, 2}, {1, -2, 3, -4});
  auto text = Text(13, "int8 %x, double %d, float16 %h) -> (%a, %b, %c",
                   "  %a = Transpose(%x)\n  %b = Slice(%d, %s, %e)\n  %c = Concat(%h, %h) {axis: 0}",
                   "  init int64[1] %s = [1]\n  init int64[1] %e = [3]\n");
  RtTensor doubles = Make<double>(DataType::kDouble, {3}, {0.25, 1e300, -7});
  RtTensor halves = Make<uint16_t>(DataType::kFloat16, {1}, {0x3c00});  // 1.0
  auto out = Run(text, {{"x", bytes}, {"d", doubles}, {"h", halves}});
  REQUIRE(Values(out[0].tensor) == std::vector<double>{1, 3, -2, -4});
  REQUIRE(Values(out[1].tensor) == std::vector<double>{1e300, -7});
  REQUIRE(out[2].tensor.dtype() == DataType::kFloat16);
  REQUIRE(Values(out[2].tensor) == std::vector<double>{1, 1});
}

TEST_CASE("Concat joins rows and checks shapes; Split cuts by sizes, equally, or by num_outputs", "[cpu]") {
  auto concat = Text(13, "float %a, float %b) -> (%y", "  %y = Concat(%a, %b) {axis: -1}");
  auto joined = Run(concat, {{"a", Iota({2, 1})}, {"b", Floats({2, 2}, {10, 11, 12, 13})}})[0].tensor;
  REQUIRE(Values(joined) == std::vector<double>{0, 10, 11, 1, 12, 13});
  REQUIRE_THAT(TryRun(concat, {{"a", Iota({2, 1})}, {"b", Iota({3, 1})}}).status().message(),
               Catch::Contains("cannot be concatenated"));
  REQUIRE_THAT(CreateStatus(Text(13, "float %a) -> (%y", "  %y = Concat(%a)")).message(),
               Catch::Contains("axis attribute is required"));

  RtTensor x = Iota({2, 6});
  auto parts = Run(Text(11, "float %x) -> (%p, %q", "  %p, %q = Split(%x) {axis: 1, split: [2, 4]}"), {{"x", x}});
  REQUIRE(Values(parts[0].tensor) == std::vector<double>{0, 1, 6, 7});
  REQUIRE(Values(parts[1].tensor) == std::vector<double>{2, 3, 4, 5, 8, 9, 10, 11});
  auto equal = Run(Text(13, "float %x) -> (%p, %q, %r", "  %p, %q, %r = Split(%x) {axis: -1}"), {{"x", x}});
  REQUIRE(Values(equal[2].tensor) == std::vector<double>{4, 5, 10, 11});
  auto uneven =
      Run(Text(18, "float %x) -> (%p, %q, %r, %s", "  %p, %q, %r, %s = Split(%x) {axis: 1, num_outputs: 4}"),
          {{"x", Iota({1, 7})}});
  REQUIRE(Values(uneven[3].tensor) == std::vector<double>{6});
  REQUIRE(uneven[0].tensor.dims() == std::vector<int64_t>{1, 2});
  auto by_input = Text(13, "float %x, int64 %s) -> (%p, %q", "  %p, %q = Split(%x, %s) {axis: 1}");
  auto halves = Run(by_input, {{"x", x}, {"s", Int64s({2}, {5, 1})}});
  REQUIRE(Values(halves[1].tensor) == std::vector<double>{5, 11});
  REQUIRE_THAT(TryRun(by_input, {{"x", x}, {"s", Int64s({2}, {2, 2})}}).status().message(),
               Catch::Contains("do not split dim 6"));
  REQUIRE_THAT(TryRun(Text(13, "float %x) -> (%p, %q, %r, %s", "  %p, %q, %r, %s = Split(%x) {axis: 1}"), {{"x", x}})
                   .status()
                   .message(),
               Catch::Contains("cannot be split into 4 equal parts"));
}

TEST_CASE("Slice clamps, steps backwards, and reads attributes before opset 10", "[cpu]") {
  RtTensor x = Iota({3, 4});
  REQUIRE(Values(RunUnary(9, "Slice(%x) {starts: [1, -3], ends: [1000, -1], axes: [0, 1]}", x)) ==
          std::vector<double>{5, 6, 9, 10});
  auto sliced = [&](const std::string& starts, const std::string& ends, const std::string& axes,
                    const std::string& steps) {
    return RunUnary(13, "Slice(%x, %s, %e, %a, %t)", x,
                    "  init int64[" + std::to_string(std::count(starts.begin(), starts.end(), ',') + 1) + "] %s = [" +
                        starts + "]\n  init int64[1] %e = [" + ends + "]\n  init int64[1] %a = [" + axes +
                        "]\n  init int64[1] %t = [" + steps + "]\n");
  };
  REQUIRE(Values(sliced("-1", "-9223372036854775808", "1", "-2")) == std::vector<double>{3, 1, 7, 5, 11, 9});
  REQUIRE(Values(sliced("0", "9223372036854775807", "0", "2")) == std::vector<double>{0, 1, 2, 3, 8, 9, 10, 11});
  REQUIRE(sliced("3", "1", "1", "1").dims() == std::vector<int64_t>{3, 0});
  REQUIRE_THAT(TryRun(Text(13, "float %x) -> (%y", "  %y = Slice(%x, %s, %s, %s, %z)",
                           "  init int64[1] %s = [0]\n  init int64[1] %z = [0]\n"),
                      {{"x", x}})
                   .status()
                   .message(),
               Catch::Contains("step is 0"));
}

TEST_CASE("Gather, GatherElements and GatherND normalise negative indices and reject bad ones", "[cpu]") {
  RtTensor data = Iota({3, 4});
  auto gather = Text(13, "float %x, int64 %i) -> (%y", "  %y = Gather(%x, %i) {axis: 1}");
  RtTensor y = Run(gather, {{"x", data}, {"i", Int64s({2}, {-1, 0})}})[0].tensor;
  REQUIRE(y.dims() == std::vector<int64_t>{3, 2});
  REQUIRE(Values(y) == std::vector<double>{3, 0, 7, 4, 11, 8});
  RtTensor rows = Run(Text(13, "float %x, int32 %i) -> (%y", "  %y = Gather(%x, %i)"),
                      {{"x", data}, {"i", Make<int32_t>(DataType::kInt32, {}, {2})}})[0]
                      .tensor;
  REQUIRE(Values(rows) == std::vector<double>{8, 9, 10, 11});
  REQUIRE_THAT(TryRun(gather, {{"x", data}, {"i", Int64s({1}, {4})}}).status().message(),
               Catch::Contains("index 4 is out of range"));

  auto elements = Text(13, "float %x, int64 %i) -> (%y", "  %y = GatherElements(%x, %i) {axis: 0}");
  RtTensor picked = Run(elements, {{"x", data}, {"i", Int64s({2, 2}, {2, -3, 1, 0})}})[0].tensor;
  REQUIRE(Values(picked) == std::vector<double>{8, 1, 4, 1});

  auto nd = Text(13, "float %x, int64 %i) -> (%y", "  %y = GatherND(%x, %i) {batch_dims: 1}");
  RtTensor batched = Run(nd, {{"x", Iota({2, 2, 2})}, {"i", Int64s({2, 1}, {1, 0})}})[0].tensor;
  REQUIRE(batched.dims() == std::vector<int64_t>{2, 2});
  REQUIRE(Values(batched) == std::vector<double>{2, 3, 4, 5});
  REQUIRE_THAT(TryRun(nd, {{"x", Iota({2, 2, 2})}, {"i", Int64s({2, 3}, {0, 0, 0, 0, 0, 0})}}).status().message(),
               Catch::Contains("3 entries"));
}

TEST_CASE("ScatterElements and ScatterND apply updates in order with their reductions", "[cpu]") {
  auto scatter = [](int opset, const std::string& reduction) {
    return Text(opset, "float %x, int64 %i, float %u) -> (%y",
                "  %y = ScatterElements(%x, %i, %u) {axis: 1, reduction: \"" + reduction + "\"}");
  };
  std::vector<NamedTensor> feeds{
      {"x", Floats({1, 3}, {1, 2, 3})}, {"i", Int64s({1, 3}, {0, -1, 0})}, {"u", Floats({1, 3}, {10, 20, 30})}};
  REQUIRE(Values(Run(scatter(13, "none"), feeds)[0].tensor) == std::vector<double>{30, 2, 20});
  REQUIRE(Values(Run(scatter(16, "add"), feeds)[0].tensor) == std::vector<double>{41, 2, 23});
  REQUIRE(Values(Run(scatter(16, "mul"), feeds)[0].tensor) == std::vector<double>{300, 2, 60});
  REQUIRE(Values(Run(scatter(18, "min"), feeds)[0].tensor) == std::vector<double>{1, 2, 3});
  REQUIRE(Values(Run(scatter(18, "max"), feeds)[0].tensor) == std::vector<double>{30, 2, 20});
  REQUIRE_THAT(CreateStatus(scatter(16, "max")).message(), Catch::Contains("unknown reduction 'max' at opset 16"));

  auto nd = Text(16, "float %x, int64 %i, float %u) -> (%y", "  %y = ScatterND(%x, %i, %u) {reduction: \"add\"}");
  auto out = Run(nd, {{"x", Iota({2, 2})}, {"i", Int64s({2, 1}, {1, 1})}, {"u", Floats({2, 2}, {1, 1, 10, 10})}});
  REQUIRE(Values(out[0].tensor) == std::vector<double>{0, 1, 13, 14});
  REQUIRE_THAT(
      TryRun(nd, {{"x", Iota({2, 2})}, {"i", Int64s({1, 1}, {0})}, {"u", Floats({1}, {1})}}).status().message(),
      Catch::Contains("should have shape [1,2]"));
}

TEST_CASE("Pad: constant, reflect, edge and wrap, negative pads crop, axes at 18", "[cpu]") {
  RtTensor x = Floats({1, 3}, {1, 2, 3});
  auto pad = [&](int opset, const std::string& mode, const std::string& pads) {
    return RunUnary(opset, "Pad(%x, %p, %v) {mode: \"" + mode + "\"}", x,
                    "  init int64[4] %p = [" + pads + "]\n  init float[] %v = [9.0]\n");
  };
  REQUIRE(Values(pad(13, "constant", "0, 2, 0, 1")) == std::vector<double>{9, 9, 1, 2, 3, 9});
  REQUIRE(Values(pad(13, "reflect", "0, 2, 0, 2")) == std::vector<double>{3, 2, 1, 2, 3, 2, 1});
  REQUIRE(Values(pad(13, "edge", "1, 1, 0, 0")) == std::vector<double>{1, 1, 2, 3, 1, 1, 2, 3});
  REQUIRE(Values(pad(19, "wrap", "0, 2, 0, 1")) == std::vector<double>{2, 3, 1, 2, 3, 1});
  REQUIRE(Values(pad(13, "constant", "0, -1, 1, 0")) == std::vector<double>{2, 3, 9, 9});
  REQUIRE(Values(RunUnary(10, "Pad(%x) {pads: [0, 1, 0, 0], value: 5.0}", x)) == std::vector<double>{5, 1, 2, 3});
  RtTensor by_axis = RunUnary(18, "Pad(%x, %p, , %a)", x, "  init int64[2] %p = [1, 1]\n  init int64[1] %a = [-1]\n");
  REQUIRE(Values(by_axis) == std::vector<double>{0, 1, 2, 3, 0});
  REQUIRE_THAT(CreateStatus(Text(18, "float %x, int64 %p) -> (%y", "  %y = Pad(%x, %p) {mode: \"wrap\"}")).message(),
               Catch::Contains("unknown mode 'wrap' at opset 18"));
  REQUIRE_THAT(TryRun(Text(13, "float %x) -> (%y", "  %y = Pad(%x, %p)", "  init int64[2] %p = [1, 1]\n"), {{"x", x}})
                   .status()
                   .message(),
               Catch::Contains("need 2 entries per axis"));
}

TEST_CASE("Expand broadcasts, Tile repeats, both reject bad arguments", "[cpu]") {
  RtTensor column = Floats({2, 1}, {1, 2});
  RtTensor expanded = RunUnary(13, "Expand(%x, %s)", column, "  init int64[3] %s = [2, 1, 3]\n");
  REQUIRE(expanded.dims() == std::vector<int64_t>{2, 2, 3});
  REQUIRE(Values(expanded) == std::vector<double>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
  auto bad = Text(13, "float %x, int64 %s) -> (%y", "  %y = Expand(%x, %s)");
  REQUIRE_THAT(TryRun(bad, {{"x", Iota({2, 2})}, {"s", Int64s({1}, {3})}}).status().message(),
               Catch::Contains("cannot expand [2,2] to [3]"));
  REQUIRE_THAT(TryRun(bad, {{"x", Iota({1})}, {"s", Int64s({1}, {-2})}}).status().message(),
               Catch::Contains("cannot expand [1] to [-2]"));
  REQUIRE_THAT(CreateStatus(Text(13, "float %x) -> (%y", "  %y = Expand(%x, )")).message(),
               Catch::Contains("input 1 is required"));
  RtTensor tiled = RunUnary(13, "Tile(%x, %r)", column, "  init int64[2] %r = [2, 2]\n");
  REQUIRE(tiled.dims() == std::vector<int64_t>{4, 2});
  REQUIRE(Values(tiled) == std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2});
  auto short_repeats = Text(13, "float %x) -> (%y", "  %y = Tile(%x, %r)", "  init int64[1] %r = [2]\n");
  REQUIRE_THAT(TryRun(short_repeats, {{"x", column}}).status().message(), Catch::Contains("input rank 2"));
}

TEST_CASE("large copies take the threaded paths and still match", "[cpu]") {
  RtTensor x = Iota({3, 257, 301});  // > 64K elements
  RtTensor padded = RunUnary(19, "Pad(%x, %p) {mode: \"reflect\"}", x, "  init int64[6] %p = [0, 2, 1, 0, 1, 3]\n");
  REQUIRE(padded.dims() == std::vector<int64_t>{3, 260, 305});
  // out[c][h][w] = x[c][reflect(h - 2)][reflect(w - 1)]
  auto reflect = [](int64_t i, int64_t n) { return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i); };
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t h : {0, 1, 2, 150, 258, 259}) {
      for (int64_t w : {0, 1, 2, 200, 302, 304}) {
        double expected = (c * 257 + reflect(h - 2, 257)) * 301 + reflect(w - 1, 301);
        REQUIRE(padded.ValueAsDouble((c * 260 + h) * 305 + w) == expected);
      }
    }
  }
  RtTensor reversed = RunUnary(13, "Slice(%x, %s, %e, %a, %t)", x,
                               "  init int64[1] %s = [-1]\n  init int64[1] %e = [-1000]\n  init int64[1] %a = [2]\n"
                               "  init int64[1] %t = [-1]\n");
  REQUIRE(reversed.ValueAsDouble(0) == 300);
  REQUIRE(reversed.ValueAsDouble(3 * 257 * 301 - 1) == 3 * 257 * 301 - 301);
  // One long strided row is cut into pieces across threads.
  RtTensor strided = RunUnary(13, "Slice(%x, %s, %e, %a, %t)", Iota({300001}),
                              "  init int64[1] %s = [1]\n  init int64[1] %e = [300001]\n  init int64[1] %a = [0]\n"
                              "  init int64[1] %t = [3]\n");
  REQUIRE(strided.NumElements() == 100000);
  for (int64_t i : {0, 4095, 4096, 65535, 99999}) REQUIRE(strided.ValueAsDouble(i) == 1 + 3 * i);
  RtTensor gathered = Run(Text(13, "float %x, int64 %i) -> (%y", "  %y = Gather(%x, %i) {axis: 2}"),
                          {{"x", x}, {"i", Int64s({2}, {300, 0})}})[0]
                          .tensor;
  REQUIRE(gathered.ValueAsDouble(2 * 257 * 2 + 1) == 2 * 257 * 301);
}

TEST_CASE("ConstantOfShape, Range, EyeLike, OneHot and Trilu generate exact values", "[cpu]") {
  auto constants = Run(Text(13, "int64 %s) -> (%c, %d",
                            "  %c = ConstantOfShape(%s) {value: tensor int64[1] [7]}\n  %d = ConstantOfShape(%s)"),
                       {{"s", Int64s({2}, {2, 1})}});
  REQUIRE(constants[0].tensor.dtype() == DataType::kInt64);
  REQUIRE(Values(constants[0].tensor) == std::vector<double>{7, 7});
  REQUIRE(Values(constants[1].tensor) == std::vector<double>{0, 0});
  auto range = Text(13, "int64 %a, int64 %b, int64 %c) -> (%y", "  %y = Range(%a, %b, %c)");
  auto scalar = [](int64_t v) { return Int64s({}, {v}); };
  REQUIRE(Values(Run(range, {{"a", scalar(10)}, {"b", scalar(3)}, {"c", scalar(-3)}})[0].tensor) ==
          std::vector<double>{10, 7, 4});
  REQUIRE(Run(range, {{"a", scalar(1)}, {"b", scalar(1)}, {"c", scalar(2)}})[0].tensor.NumElements() == 0);
  REQUIRE_THAT(TryRun(range, {{"a", scalar(1)}, {"b", scalar(5)}, {"c", scalar(0)}}).status().message(),
               Catch::Contains("delta is 0"));
  RtTensor eye = RunUnary(13, "EyeLike(%x) {k: 1, dtype: 6}", Iota({2, 3}));
  REQUIRE(eye.dtype() == DataType::kInt32);
  REQUIRE(Values(eye) == std::vector<double>{0, 1, 0, 0, 0, 1});
  auto onehot = Text(13, "int64 %i, float %d, float %v) -> (%y", "  %y = OneHot(%i, %d, %v) {axis: 0}");
  RtTensor hot =
      Run(onehot, {{"i", Int64s({2}, {-1, 5})}, {"d", Floats({}, {3})}, {"v", Floats({2}, {0, 2})}})[0].tensor;
  REQUIRE(hot.dims() == std::vector<int64_t>{3, 2});
  REQUIRE(Values(hot) == std::vector<double>{0, 0, 0, 0, 2, 0});
  RtTensor x = Iota({3, 3});
  REQUIRE(Values(RunUnary(14, "Trilu(%x, %k)", x, "  init int64[] %k = [1]\n")) ==
          std::vector<double>{0, 1, 2, 0, 0, 5, 0, 0, 0});
  REQUIRE(Values(RunUnary(14, "Trilu(%x) {upper: 0}", x)) == std::vector<double>{0, 0, 0, 3, 4, 0, 6, 7, 8});
}

TEST_CASE("CumSum, NonZero and TopK scan along an axis", "[cpu]") {
  RtTensor x = Floats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto cumsum = [&](const std::string& attributes) {
    return Values(RunUnary(14, "CumSum(%x, %a) " + attributes, x, "  init int32[] %a = [1]\n"));
  };
  REQUIRE(cumsum("") == std::vector<double>{1, 3, 6, 4, 9, 15});
  REQUIRE(cumsum("{exclusive: 1, reverse: 1}") == std::vector<double>{5, 3, 0, 11, 6, 0});
  RtTensor nonzero =
      Run(Text(13, "float %x) -> (%y", "  %y = NonZero(%x)"), {{"x", Floats({2, 2}, {0, -0.0f, 3, 1})}})[0].tensor;
  REQUIRE(nonzero.dims() == std::vector<int64_t>{2, 2});
  REQUIRE(Values(nonzero) == std::vector<double>{1, 1, 0, 1});
  auto topk = [](int opset, const std::string& attributes) {
    return Text(opset, "float %x, int64 %k) -> (%v, %i", "  %v, %i = TopK(%x, %k) " + attributes);
  };
  std::vector<NamedTensor> feeds{{"x", Floats({1, 5}, {3, 1, 3, 2, 1})}, {"k", Int64s({1}, {3})}};
  auto largest = Run(topk(11, ""), feeds);
  REQUIRE(Values(largest[0].tensor) == std::vector<double>{3, 3, 2});
  REQUIRE(Values(largest[1].tensor) == std::vector<double>{0, 2, 3});
  auto smallest = Run(topk(11, "{largest: 0, axis: 1}"), feeds);
  REQUIRE(Values(smallest[1].tensor) == std::vector<double>{1, 4, 3});
  feeds[1].tensor = Int64s({1}, {6});
  REQUIRE_THAT(TryRun(topk(11, ""), feeds).status().message(), Catch::Contains("k 6 is outside [0, 5]"));
  auto attribute_k = Run(Text(9, "float %x) -> (%v, %i", "  %v, %i = TopK(%x) {k: 1}"), {feeds[0]});
  REQUIRE(Values(attribute_k[1].tensor) == std::vector<double>{0});
}

TEST_CASE("DepthToSpace (DCR and CRD) and SpaceToDepth rearrange blocks", "[cpu]") {
  RtTensor x = Iota({1, 4, 1, 2});
  REQUIRE(Values(RunUnary(13, "DepthToSpace(%x) {blocksize: 2}", x)) == std::vector<double>{0, 2, 1, 3, 4, 6, 5, 7});
  RtTensor crd = RunUnary(13, "DepthToSpace(%x) {blocksize: 2, mode: \"CRD\"}", Iota({1, 8, 1, 1}));
  REQUIRE(crd.dims() == std::vector<int64_t>{1, 2, 2, 2});
  REQUIRE(Values(crd) == std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7});
  RtTensor image = Iota({1, 1, 2, 2});
  RtTensor depth = RunUnary(13, "SpaceToDepth(%x) {blocksize: 2}", image);
  REQUIRE(depth.dims() == std::vector<int64_t>{1, 4, 1, 1});
  REQUIRE(Values(RunUnary(13, "DepthToSpace(%x) {blocksize: 2}", depth)) == Values(image));
  REQUIRE_THAT(
      TryRun(Text(13, "float %x) -> (%y", "  %y = DepthToSpace(%x) {blocksize: 2}"), {{"x", Iota({1, 3, 1, 1})}})
          .status()
          .message(),
      Catch::Contains("not divisible"));
}

TEST_CASE("Resize: nearest, linear, cubic, crop-and-resize, sizes with aspect policy, Upsample", "[cpu]") {
  RtTensor row = Floats({1, 1, 1, 2}, {1, 2});
  auto resize = [&](int opset, const std::string& attributes, const std::string& scales = "1.0, 1.0, 1.0, 2.0") {
    return Values(RunUnary(opset, "Resize(%x, , %s) " + attributes, row, "  init float[4] %s = [" + scales + "]\n"));
  };
  REQUIRE(resize(13, "{mode: \"linear\"}") == std::vector<double>{1, 1.25, 1.75, 2});
  std::vector<double> corners = resize(13, "{mode: \"linear\", coordinate_transformation_mode: \"align_corners\"}");
  REQUIRE(corners[1] == Approx(1 + 1.0 / 3));
  REQUIRE(corners[3] == 2);
  REQUIRE(resize(13, "{coordinate_transformation_mode: \"asymmetric\"}") == std::vector<double>{1, 1, 2, 2});
  std::vector<double> cubic = resize(13, "{mode: \"cubic\", coordinate_transformation_mode: \"asymmetric\"}");
  // x = 0.5 between 1 and 2 with edge clamping: weights (-0.09375, 0.59375, 0.59375, -0.09375).
  REQUIRE(cubic[1] == Approx(1.5));
  REQUIRE(cubic[3] == Approx(-0.09375 * 1 + 0.59375 * 2 + 0.59375 * 2 - 0.09375 * 2));

  RtTensor crop =
      RunUnary(13,
               "Resize(%x, %roi, %s) {coordinate_transformation_mode: \"tf_crop_and_resize\", "
               "mode: \"linear\", extrapolation_value: -1.0}",
               row, "  init float[8] %roi = [0, 0, 0, 0.5, 1, 1, 1, 1.5]\n  init float[4] %s = [1, 1, 1, 2]\n");
  REQUIRE(Values(crop)[0] == 1.5);
  REQUIRE(Values(crop)[1] == Approx(1 + 5.0 / 6));
  REQUIRE(Values(crop)[2] == -1);
  REQUIRE(Values(crop)[3] == -1);

  RtTensor image = Iota({1, 1, 2, 4});
  RtTensor fitted = RunUnary(18, "Resize(%x, , , %z) {axes: [2, 3], keep_aspect_ratio_policy: \"not_larger\"}", image,
                             "  init int64[2] %z = [4, 4]\n");
  REQUIRE(fitted.dims() == std::vector<int64_t>{1, 1, 2, 4});  // scale min(2, 1) = 1
  REQUIRE(Values(fitted) == Values(image));
  RtTensor bytes = Run(Text(9, "uint8 %x, float %s) -> (%y", "  %y = Upsample(%x, %s)"),
                       {{"x", Make<uint8_t>(DataType::kUint8, {2}, {7, 9})}, {"s", Floats({1}, {2})}})[0]
                       .tensor;
  REQUIRE(Values(bytes) == std::vector<double>{7, 7, 9, 9});
  RtTensor halves = Make<uint16_t>(DataType::kFloat16, {1, 1, 1, 2}, {0x3c00, 0x4000});  // 1, 2
  auto half_text = Text(13, "float16 %x) -> (%y", "  %y = Resize(%x, , %s) {mode: \"linear\"}",
                        "  init float[4] %s = [1, 1, 1, 2]\n");
  REQUIRE(Values(Run(half_text, {{"x", halves}})[0].tensor) == std::vector<double>{1, 1.25, 1.75, 2});

  auto both = Text(13, "float %x) -> (%y", "  %y = Resize(%x, , %s, %z)",
                   "  init float[4] %s = [1, 1, 1, 2]\n  init int64[4] %z = [1, 1, 1, 4]\n");
  REQUIRE_THAT(TryRun(both, {{"x", row}}).status().message(), Catch::Contains("exactly one of scales and sizes"));
  REQUIRE_THAT(
      CreateStatus(Text(10, "float %x, float %s) -> (%y", "  %y = Resize(%x, %s) {mode: \"cubic\"}")).message(),
      Catch::Contains("unknown mode 'cubic'"));
  REQUIRE_THAT(
      CreateStatus(Text(18, "float %x, float %s) -> (%y",
                        "  %y = Resize(%x, , %s) {coordinate_transformation_mode: \"half_pixel_symmetric\"}"))
          .message(),
      Catch::Contains("at opset 18"));
}
