// The small helpers the ORT lowering's files share (passes/conversion/ort/support.h): outcomes
// written or kept, the kernel float types and the reason against others, ops written before a
// node, body operands as graph values, Add partners, formal arguments, and provably equal dims.
#include <catch2/catch.hpp>

#include "pass_test_support.h"
#include "passes/conversion/ort/support.h"

namespace fusionopt {
namespace {

using namespace passes::ort_lowering;
using pass_test::FindNode;
using pass_test::ParseInferred;

const char* const kGraph = R"(ir_version 8
opset "" 17
opset "com.microsoft" 1
graph main (float[2,N] %x, float16[2] %h, bfloat16[2] %b, double[2] %d, float %r)
         -> (float[2,N] %sum, float[2,N] %diff, float[2,N] %ms, float[2,N] %out)
{
  %t = Relu(%x) @relu
  %sum = Add(%t, %x) @add
  %diff = Sub(%t, %x) @sub
  %ms = com.microsoft::Add(%t, %x) @ms_add
  %out = Neg(%sum) @neg
}
)";

TEST_CASE("ort support: Written and Kept outcomes", "[passes]") {
  Outcome written = Written("SkipLayerNormalization", "fused_1", "provider cpu");
  CHECK(written.written == "SkipLayerNormalization");
  CHECK(written.absorbed == "fused_1");
  CHECK(written.because == "provider cpu");
  CHECK_FALSE(written.kept_because);
  Outcome kept = Kept("not float32 or float16");
  CHECK(kept.written.empty());
  CHECK(kept.kept_because.reason() == "not float32 or float16");
}

TEST_CASE("ort support: float32 and float16 are the kernels' types", "[passes]") {
  auto model = ParseInferred(kGraph);
  Graph& graph = *model->graph;
  CHECK(IsFloat32(graph.FindValue("x")));
  CHECK_FALSE(IsFloat32(graph.FindValue("h")));
  CHECK(IsKernelFloat(graph.FindValue("x")));
  CHECK(IsKernelFloat(graph.FindValue("h")));
  CHECK_FALSE(IsKernelFloat(graph.FindValue("b")));
  CHECK_FALSE(IsKernelFloat(graph.FindValue("d")));
  CHECK_FALSE(IsKernelFloat(nullptr));
  CHECK_FALSE(WhyNotKernelFloat(graph.FindValue("h")));
  CHECK(WhyNotKernelFloat(graph.FindValue("b")).reason() == "not float32 or float16");
  CHECK(WhyNotKernelFloat(nullptr).reason() == "not float32 or float16");
}

TEST_CASE("ort support: WriteOpBefore and ArgumentFor", "[passes]") {
  auto model = ParseInferred(kGraph);
  Graph& graph = *model->graph;
  Node& neg = *FindNode(graph, "neg");
  Node* cast = WriteOpBefore(graph, neg, "Cast", {graph.FindValue("sum")}, "cast", DataType::kFloat16,
                             Shape{Dim::Known(2), Dim::Symbol("N")});
  CHECK(graph.NodeBefore(&neg) == cast);
  CHECK(cast->op_type() == "Cast");
  CHECK(cast->domain().empty());
  CHECK(cast->name() == "cast");
  CHECK(cast->input(0) == graph.FindValue("sum"));
  Value* result = cast->output(0);
  CHECK(result->name() == "cast");
  CHECK(result->dtype() == DataType::kFloat16);
  CHECK(result->shape() == std::optional<Shape>(Shape{Dim::Known(2), Dim::Symbol("N")}));
  Node* again = WriteOpBefore(graph, neg, "Identity", {result}, "cast", DataType::kFloat16);
  CHECK(again->name() == "cast_1");
  CHECK(again->output(0)->name() == "cast_1");
  CHECK_FALSE(again->output(0)->shape().has_value());  // left to inference
  CHECK(graph.NodeBefore(&neg) == again);
  CHECK(graph.NodeBefore(again) == cast);

  Node& add = *FindNode(graph, "add");
  auto epsilon = std::make_shared<Tensor>(Tensor::FromValues<float>(DataType::kFloat, {}, {1e-5f}));
  CHECK(ArgumentFor(graph, add, 1, epsilon, "eps") == graph.FindValue("x"));  // the call's argument
  Value* constant = ArgumentFor(graph, add, -1, epsilon, "eps");             // the body's constant
  REQUIRE(constant != nullptr);
  CHECK(constant->name() == "eps");
  CHECK(constant->initializer() == epsilon);
  CHECK(ArgumentFor(graph, add, -1, nullptr, "eps") == nullptr);
}

TEST_CASE("ort support: OtherAddend and ArgumentOfFormal", "[passes]") {
  auto model = ParseInferred(kGraph);
  Graph& graph = *model->graph;
  Node& add = *FindNode(graph, "add");
  CHECK(OtherAddend(add, graph.FindValue("t")) == graph.FindValue("x"));
  CHECK(OtherAddend(add, graph.FindValue("x")) == graph.FindValue("t"));
  CHECK(OtherAddend(add, graph.FindValue("h")) == nullptr);
  CHECK(OtherAddend(*FindNode(graph, "sub"), graph.FindValue("t")) == nullptr);     // not an Add
  CHECK(OtherAddend(*FindNode(graph, "ms_add"), graph.FindValue("t")) == nullptr);  // not the standard Add

  Function function;
  function.body = std::make_unique<Graph>();
  Value* first = function.body->CreateValue("a");
  Value* second = function.body->CreateValue("b");
  function.body->AddInput(first);
  function.body->AddInput(second);
  CHECK(ArgumentOfFormal(function, add, second) == graph.FindValue("x"));
  CHECK(ArgumentOfFormal(function, add, first) == graph.FindValue("t"));
  CHECK(ArgumentOfFormal(function, add, graph.FindValue("t")) == nullptr);  // no formal
  // A call with fewer arguments than formals has none for the last.
  CHECK(ArgumentOfFormal(function, *FindNode(graph, "relu"), second) == nullptr);
}

TEST_CASE("ort support: SameDim and DimOf", "[passes]") {
  CHECK(SameDim(Dim::Known(3), Dim::Known(3)));
  CHECK_FALSE(SameDim(Dim::Known(3), Dim::Known(4)));
  CHECK(SameDim(Dim::Symbol("S"), Dim::Symbol("S")));
  CHECK_FALSE(SameDim(Dim::Symbol("S"), Dim::Symbol("T")));
  CHECK_FALSE(SameDim(Dim::Unknown(), Dim::Unknown()));  // equal, but nothing is proved
  CHECK_FALSE(SameDim(Dim::Known(3), Dim::Symbol("S")));

  auto model = ParseInferred(kGraph);
  Graph& graph = *model->graph;
  CHECK(DimOf(graph.FindValue("x"), 0) == std::optional<Dim>(Dim::Known(2)));
  CHECK(DimOf(graph.FindValue("x"), 1) == std::optional<Dim>(Dim::Symbol("N")));
  CHECK_FALSE(DimOf(graph.FindValue("x"), 2).has_value());
  CHECK_FALSE(DimOf(graph.FindValue("r"), 0).has_value());  // rank unknown
  CHECK_FALSE(DimOf(nullptr, 0).has_value());
}

}  // namespace
}  // namespace fusionopt
