// Multi-node activations as epilogue steps (passes/fusion/util/epilogue_patterns.h): the erf
// GELU, SiLU and QuickGELU matched where they read %x, with their nodes and names; %x read
// elsewhere or a graph output is no match; SoleReader, OtherOperand and IsStandardOp.
#include <catch2/catch.hpp>

#include "pass_test_support.h"
#include "passes/fusion/util/epilogue_patterns.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::FindNode;
using pass_test::ParseInferred;

namespace {

// %g: erf GELU of %a; %s: SiLU of %b; %q: QuickGELU of %c; %r: SiLU of %d, which a Relu reads
// too; %o: SiLU of %e, which is a graph output.
const char* const kActivations = R"(ir_version 8
opset "" 17
graph main (float[4] %a, float[4] %b, float[4] %c, float[4] %d, float[4] %e)
         -> (float[4] %g, float[4] %s, float[4] %q, float[4] %r, float[4] %extra, float[4] %o, float[4] %e)
  init float[] %sqrt2 = [1.4142135]
  init float[] %one = [1.0]
  init float[] %half = [0.5]
  init float[] %k = [1.702]
{
  %ad = Div(%a, %sqrt2) @gelu_div
  %ae = Erf(%ad) @gelu_erf
  %ap = Add(%ae, %one) @gelu_plus_one
  %am = Mul(%a, %ap) @gelu_mul
  %g = Mul(%am, %half) @gelu_half
  %bs = Sigmoid(%b) @silu_sigmoid
  %s = Mul(%b, %bs) @silu_mul
  %ck = Mul(%c, %k) @quick_scale
  %cs = Sigmoid(%ck) @quick_sigmoid
  %q = Mul(%c, %cs) @quick_mul
  %ds = Sigmoid(%d) @shared_sigmoid
  %r = Mul(%d, %ds) @shared_mul
  %extra = Relu(%d) @shared_relu
  %es = Sigmoid(%e) @output_sigmoid
  %o = Mul(%e, %es) @output_mul
}
)";

std::vector<Node*> Named(const Graph& graph, const std::vector<std::string>& names) {
  std::vector<Node*> nodes;
  for (const std::string& name : names) nodes.push_back(FindNode(graph, name));
  return nodes;
}

}  // namespace

TEST_CASE("epilogue patterns: ActivationName by kind and alpha", "[passes]") {
  CompositeMatch match;
  match.kind = CompositeKind::kGelu;
  CHECK(ActivationName(match) == "Gelu");
  match.kind = CompositeKind::kSilu;
  CHECK(ActivationName(match) == "Silu");
  match.alpha = 1.702;
  CHECK(ActivationName(match) == "QuickGelu");
}

TEST_CASE("epilogue patterns: GELU, SiLU and QuickGELU reading %x", "[passes]") {
  auto model = ParseInferred(kActivations);
  Graph& graph = *model->graph;
  auto gelu = MatchActivationPattern(*graph.FindValue("a"), 17);
  REQUIRE(gelu.has_value());
  CHECK(gelu->name == "Gelu");
  CHECK(gelu->result == graph.FindValue("g"));
  CHECK(gelu->nodes == Named(graph, {"gelu_div", "gelu_erf", "gelu_plus_one", "gelu_mul", "gelu_half"}));

  auto silu = MatchActivationPattern(*graph.FindValue("b"), 17);
  REQUIRE(silu.has_value());
  CHECK(silu->name == "Silu");
  CHECK(silu->result == graph.FindValue("s"));
  CHECK(silu->nodes == Named(graph, {"silu_sigmoid", "silu_mul"}));

  auto quick = MatchActivationPattern(*graph.FindValue("c"), 17);
  REQUIRE(quick.has_value());
  CHECK(quick->name == "QuickGelu");
  CHECK(quick->nodes == Named(graph, {"quick_scale", "quick_sigmoid", "quick_mul"}));
}

TEST_CASE("epilogue patterns: no match when %x is read elsewhere, is an output, or is read once", "[passes]") {
  auto model = ParseInferred(kActivations);
  Graph& graph = *model->graph;
  CHECK_FALSE(MatchActivationPattern(*graph.FindValue("d"), 17).has_value());   // the Relu reads it too
  CHECK_FALSE(MatchActivationPattern(*graph.FindValue("e"), 17).has_value());   // a graph output
  CHECK_FALSE(MatchActivationPattern(*graph.FindValue("ck"), 17).has_value());  // read once only
}

TEST_CASE("epilogue patterns: SoleReader, OtherOperand and IsStandardOp", "[passes]") {
  auto model = ParseInferred(R"(ir_version 8
opset "" 17
opset "com.microsoft" 1
graph main (float[2] %x, float[2] %w, bool[] %cond) -> (float[2] %y, float[2] %o, float[2] %z)
{
  %t = Relu(%x) @relu
  %u = Add(%t, %w) @add
  %sq = Mul(%u, %u) @square
  %y = ai.onnx::Neg(%sq) @neg
  %v = com.microsoft::Gelu(%x) @ms_gelu
  %o = If(%cond) {then_branch: graph then_body () -> (float[2] %t1) {
    %t1 = Identity(%v)
  }, else_branch: graph else_body () -> (float[2] %e1) {
    %e1 = Identity(%w)
  }} @if
  %z = Sigmoid(%w) @sigmoid
}
)");
  Graph& graph = *model->graph;
  CHECK(SoleReader(*graph.FindValue("t")) == FindNode(graph, "add"));
  CHECK(SoleReader(*graph.FindValue("u")) == nullptr);   // read twice by the Mul
  CHECK(SoleReader(*graph.FindValue("x")) == nullptr);   // two readers
  CHECK(SoleReader(*graph.FindValue("y")) == nullptr);   // read by nothing (a graph output)
  CHECK(SoleReader(*graph.FindValue("v")) == nullptr);   // its one reader is inside a branch

  Node& add = *FindNode(graph, "add");
  CHECK(OtherOperand(add, *graph.FindValue("t")) == graph.FindValue("w"));
  CHECK(OtherOperand(add, *graph.FindValue("w")) == graph.FindValue("t"));
  CHECK(OtherOperand(add, *graph.FindValue("x")) == nullptr);
  CHECK(OtherOperand(*FindNode(graph, "square"), *graph.FindValue("u")) == nullptr);  // both operands
  CHECK(OtherOperand(*FindNode(graph, "relu"), *graph.FindValue("x")) == nullptr);    // one input

  CHECK(IsStandardOp(*FindNode(graph, "relu"), "Relu"));
  CHECK_FALSE(IsStandardOp(*FindNode(graph, "relu"), "Neg"));
  CHECK(IsStandardOp(*FindNode(graph, "neg"), "Neg"));  // "ai.onnx" is the default domain
  CHECK_FALSE(IsStandardOp(*FindNode(graph, "ms_gelu"), "Gelu"));
}
