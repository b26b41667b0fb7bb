// sink-views: a Reshape between a contraction and the elementwise ops after it moves below them
// (GPT-2's Conv1D: Gemm, Reshape to 3-D, tanh GELU, Reshape back), with the same numbers; a
// Reshape also read by a non-elementwise op, a region reading another tensor, and one with
// neither a contraction before nor a view after stay.
#include <iterator>

#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "sink-views";

// Gemm [6,4]x[4,8], Reshape to [2,3,8], `region` (reading %v), then `tail` (reading %g).
std::string Conv1D(const std::string& region, const std::string& tail, const std::string& producer = "Gemm(%x, %w, %b)") {
  return R"(ir_version 8
opset "" 17
graph main (float[6,4] %x, float[2,3,8] %other) -> (float %y)
  init float[4,8] %w = )" + Spread(32, 1) + R"(
  init float[8] %b = )" + Spread(8, 2) + R"(
  init int64[3] %to3d = [2, 3, 8]
  init int64[2] %to2d = [-1, 8]
  init float[] %half = [0.5]
  init float[] %three = [3.0]
  init float[] %cube = [0.044715]
  init float[] %root = [0.7978846]
  init float[] %one = [1.0]
{
  %h = )" + producer + R"( @gemm
  %v = Reshape(%h, %to3d) @view
)" + region + tail + "}\n";
}

const std::string kTanhGelu = R"(  %m = Mul(%v, %half) @gelu_half
  %p = Pow(%v, %three) @gelu_pow
  %c = Mul(%p, %cube) @gelu_cube
  %a = Add(%v, %c) @gelu_add
  %r = Mul(%a, %root) @gelu_root
  %t = Tanh(%r) @gelu_tanh
  %a1 = Add(%t, %one) @gelu_one
  %g = Mul(%m, %a1) @gelu
)";

}  // namespace

TEST_CASE("sink-views moves a Reshape below the GELU after a Gemm", "[passes]") {
  auto model = ExpectRewriteOps(Conv1D(kTanhGelu, "  %y = Reshape(%g, %to2d) @view_back\n"), kPass,
                                {"Gemm", "Mul", "Pow", "Mul", "Add", "Mul", "Tanh", "Add", "Mul", "Reshape", "Reshape"})
                   .model;
  // The GELU now reads the Gemm's [6,8] output directly.
  const Node& half = **std::next(model->graph->nodes().begin());
  CHECK(half.input(0)->name() == "h");
  Rewritten rewritten = Rewrite(Conv1D(kTanhGelu, "  %y = Reshape(%g, %to2d) @view_back\n"), kPass);
  CHECK(rewritten.Counter("views_sunk") == 1);
}

TEST_CASE("sink-views leaves a Reshape read elsewhere, a region reading another tensor, and one worth nothing", "[passes]") {
  // Also read by a Transpose: the view stays.
  ExpectUnchanged(Conv1D(kTanhGelu + "  %tv = Transpose(%v) @transpose\n", "  %y = Add(%g, %tv) @sum\n"), kPass, "");
  // The region adds a tensor of the viewed shape: that tensor would need a view of its own.
  ExpectUnchanged(Conv1D("  %g = Add(%v, %other) @add\n", "  %y = Reshape(%g, %to2d) @view_back\n"), kPass, "");
  // Neither a contraction before the view nor a view after the region.
  ExpectUnchanged(Conv1D("  %g = Relu(%v) @relu\n", "  %y = Transpose(%g) @transpose\n", "Concat(%x, %x) {axis: 1}"), kPass,
                  "neither a contraction before it nor views after the elementwise ops");
}
