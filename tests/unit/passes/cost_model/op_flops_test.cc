// The cost model's per-op arithmetic (passes/cost_model/op_flops.h), asked directly: ShapeLookup
// sizes values from their dims, sized symbols and (only where a dim is unknown) inference at
// those sizes, and says why when it cannot; InputBytes of subset readers; StandardFlops per op class.
#include <catch2/catch.hpp>

#include "pass_test_support.h"
#include "passes/cost_model/op_flops.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using namespace fusionopt::passes::cost;
using pass_test::FindNode;
using pass_test::ParseInferred;

namespace {

const char* const kValues = R"(ir_version 8
opset "" 17
graph main (float[batch,3] %x, float[?,3] %u, float %r, string[2] %s, float16[4] %h, int64[2] %shape)
         -> (float[batch,3] %y)
{
  %y = Relu(%x) @relu
}
)";

double Known(const Amount& amount) {
  INFO(amount.why);
  REQUIRE(amount.known);
  return amount.value;
}

std::string Why(const Amount& amount) {
  REQUIRE_FALSE(amount.known);
  return amount.why;
}

}  // namespace

TEST_CASE("ShapeLookup: dims, sized symbols and bytes", "[cost]") {
  auto model = ParseInferred(kValues);
  const Graph& graph = *model->graph;
  const SymbolSizes symbols = {{"batch", 4}};
  int asked = 0;
  ShapeLookup shapes(symbols, &graph, [&]() -> const ConcreteValues* { ++asked; return nullptr; });
  const Value* x = graph.FindValue("x");
  CHECK(Known(shapes.Elements(x)) == 12);
  CHECK(Known(shapes.Bytes(x)) == 48);
  CHECK(Known(shapes.Dim(x, 0)) == 4);
  CHECK(Known(shapes.Dim(x, -1)) == 3);
  CHECK(Known(shapes.DimsFrom(x, 1)) == 3);
  CHECK(Known(shapes.Bytes(graph.FindValue("h"))) == 8);  // float16: two bytes each
  CHECK(asked == 0);  // every dim known or sized: inference is never asked

  const SymbolSizes none;
  ShapeLookup unsized(none, &graph, nullptr);
  CHECK(Known(unsized.Elements(x)) == 3);  // an unlisted symbol is 1

  CHECK(Why(shapes.Dim(x, 2)) == "value 'x' has too few dims");
  CHECK(Why(shapes.Elements(graph.FindValue("u"))) == "value 'u' has an unknown dim");
  CHECK(Why(shapes.Elements(graph.FindValue("r"))) == "value 'r' has an unknown rank");
  CHECK(shapes.ShapeOf(*graph.FindValue("r")) == nullptr);
  CHECK(Why(shapes.Bytes(graph.FindValue("s"))) == "value 's' has no fixed-size dtype");
  CHECK(Why(shapes.Elements(nullptr)) == "an operand is missing");
}

TEST_CASE("ShapeLookup: what inference found at the symbols' sizes fills unknown dims", "[cost]") {
  auto model = ParseInferred(kValues);
  const Graph& graph = *model->graph;
  ConcreteValues concrete;
  concrete.shapes["u"] = Shape{fusionopt::Dim::Known(5), fusionopt::Dim::Known(3)};
  concrete.shapes["x"] = Shape{fusionopt::Dim::Known(4), fusionopt::Dim::Known(3)};
  concrete.integers["shape"] = KnownIntegers{false, {4, 3}};
  const SymbolSizes symbols = {{"batch", 4}};
  ShapeLookup shapes(symbols, &graph, [&]() -> const ConcreteValues* { return &concrete; });

  CHECK(Known(shapes.Elements(graph.FindValue("u"))) == 15);
  const Value* x = graph.FindValue("x");
  CHECK(shapes.ShapeOf(*x) == &*x->shape());  // its own [batch,3] is resolved
  CHECK(shapes.SizedShapeOf(*x) == &concrete.shapes["x"]);  // every dim known at these sizes
  const KnownIntegers* integers = shapes.IntegersOf(*graph.FindValue("shape"));
  REQUIRE(integers != nullptr);
  CHECK(integers->values == std::vector<int64_t>{4, 3});
  CHECK(shapes.IntegersOf(*x) == nullptr);

  // A value outside the main graph is never looked up by name.
  ShapeLookup elsewhere(symbols, nullptr, [&]() -> const ConcreteValues* { return &concrete; });
  CHECK_FALSE(elsewhere.Elements(graph.FindValue("u")).known);
  CHECK(elsewhere.IntegersOf(*graph.FindValue("shape")) == nullptr);
}

TEST_CASE("InputBytes: Gather and Slice read only what they copy", "[cost]") {
  auto model = ParseInferred(R"(ir_version 8
opset "" 17
graph main (float[10,4] %data, int64[2] %indices) -> (float[2,4] %rows, float[10,4] %sum)
{
  %rows = Gather(%data, %indices) {axis: 0} @gather
  %sum = Add(%data, %data) @add
}
)");
  const Graph& graph = *model->graph;
  const SymbolSizes symbols;
  ShapeLookup shapes(symbols, &graph, nullptr);
  CHECK(Known(InputBytes(*FindNode(graph, "gather"), 0, shapes)) == 32);  // the [2,4] rows, not 160
  CHECK(Known(InputBytes(*FindNode(graph, "gather"), 1, shapes)) == 16);
  CHECK(Known(InputBytes(*FindNode(graph, "add"), 0, shapes)) == 160);
}

TEST_CASE("StandardFlops: the formula of each op class", "[cost]") {
  auto model = ParseInferred(R"(ir_version 8
opset "" 17
opset "com.example" 1
graph main (float[2,3] %a, float[3,4] %b, float[4] %c, float[1,2,4,4] %img, float[3,2,3,3] %w, float[3] %bias,
            int8[4] %q, float[] %scale)
         -> (float[2,3] %add, float[2,3] %div, float[2,3] %tanh, float[2,3] %sum3, float[2,3] %softmax,
             float[2,4] %matmul, float[2,4] %gemm, float[1,3,2,2] %conv, float[1,3,2,2] %convb,
             float[1,2,2,2] %pool, float[2,4] %einsum, float[3,2] %transposed, float[4] %dq, float[2,3] %foo)
{
  %add = Add(%a, %a) @add
  %div = Div(%a, %a) @div
  %tanh = Tanh(%a) @tanh
  %sum3 = Sum(%a, %a, %a) @sum3
  %softmax = Softmax(%a) @softmax
  %matmul = MatMul(%a, %b) @matmul
  %gemm = Gemm(%a, %b, %c) @gemm
  %conv = Conv(%img, %w) @conv
  %convb = Conv(%img, %w, %bias) @convb
  %pool = MaxPool(%img) {kernel_shape: [2, 2], strides: [2, 2]} @pool
  %einsum = Einsum(%a, %b) {equation: "ij,jk->ik"} @einsum
  %transposed = Transpose(%a) @transpose
  %dq = DequantizeLinear(%q, %scale) @dq
  %foo = com.example::Foo(%a) @foo
}
)");
  const Graph& graph = *model->graph;
  const SymbolSizes symbols;
  ShapeLookup shapes(symbols, &graph, nullptr);
  auto flops = [&](const char* name) { return StandardFlops(*FindNode(graph, name), shapes); };
  CHECK(Known(flops("add")) == 6);
  CHECK(Known(flops("div")) == 24);     // 4 per element
  CHECK(Known(flops("tanh")) == 48);    // 8 per element
  CHECK(Known(flops("sum3")) == 12);    // two additions per element
  CHECK(Known(flops("softmax")) == 72);  // 12 per input element
  CHECK(Known(flops("matmul")) == 2 * 8 * 3);
  CHECK(Known(flops("gemm")) == 2 * 8 * 3 + 8);
  CHECK(Known(flops("conv")) == 2 * 12 * (2 * 3 * 3));
  CHECK(Known(flops("convb")) == 2 * 12 * (2 * 3 * 3) + 12);
  CHECK(Known(flops("pool")) == 8 * 4);  // the 2x2 window per output element
  CHECK(Known(flops("einsum")) == 2 * 2 * 3 * 4);
  CHECK(Known(flops("transpose")) == 0);
  CHECK(Known(flops("dq")) == 8);  // a shift and a scale per element
  CHECK(Why(flops("foo")) == "no FLOP formula for com.example::Foo");
}
