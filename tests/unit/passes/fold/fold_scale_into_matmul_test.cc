// fold-scale-into-matmul: a Mul by a per-column constant after MatMul by constant weights,
// directly or through its bias Add (Whisper's and CLIP's query scaling), folded into weights
// and bias with the numbers unchanged; a scale computed at run time, one that is not per
// column, one that raises the rank, and a MatMul read elsewhere stay.
#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "fold-scale-into-matmul";

// %x [2,5,4] · W [4,3], then `tail` reading %m.
std::string Projection(const std::string& tail, const std::string& extra_inputs = "") {
  return R"(ir_version 8
opset "" 17
graph main (float[2,5,4] %x)" + extra_inputs + R"() -> (float %y)
  init float[4,3] %w = )" + Spread(12, 1) + R"(
  init float[3] %b = [0.5, -0.25, 1.0]
  init float[] %s = [0.125]
  init float[3] %columns = [2.0, -1.0, 0.5]
  init float[5,1] %rows = [1.0, 2.0, 3.0, 4.0, 5.0]
  init float[1,1,1,3] %wide = [1.0, 1.0, 1.0]
{
  %m = MatMul(%x, %w) @matmul
)" + tail + "}\n";
}

}  // namespace

TEST_CASE("fold-scale-into-matmul folds a scale after the bias Add into weights and bias", "[passes]") {
  auto model =
      ExpectRewriteOps(Projection("  %a = Add(%m, %b) @bias\n  %y = Mul(%a, %s) @scale\n"), kPass, {"MatMul", "Add"})
          .model;
  const Node& add = *model->graph->nodes().back();
  CHECK(add.output(0)->name() == "y");  // the Mul's result keeps its name
  auto bias = add.input(1)->initializer()->values<float>();
  CHECK(std::vector<float>(bias.begin(), bias.end()) == std::vector<float>{0.0625f, -0.03125f, 0.125f});
  for (const char* gone : {"w", "b", "s"}) CHECK(model->graph->FindValue(gone) == nullptr);  // replaced, unread
  CHECK(Rewrite(Projection("  %a = Add(%m, %b) @bias\n  %y = Mul(%a, %s) @scale\n"), kPass).Counter("scales_folded") == 1);
}

TEST_CASE("fold-scale-into-matmul folds a per-column scale read straight off the MatMul", "[passes]") {
  ExpectRewriteOps(Projection("  %y = Mul(%columns, %m) @scale\n"), kPass, {"MatMul"});
}

TEST_CASE("fold-scale-into-matmul leaves scales it cannot fold", "[passes]") {
  ExpectUnchanged(Projection("  %y = Mul(%m, %t) @scale\n", ", float[] %t"), kPass, "non-constant scale");
  ExpectUnchanged(Projection("  %y = Mul(%m, %rows) @scale\n"), kPass, "the scale is not per column");
  ExpectUnchanged(Projection("  %y = Mul(%m, %wide) @scale\n"), kPass, "the scale is not per column");
  // Weights that are a ConstantOfShape splat would be materialised whole.
  ExpectUnchanged(R"(ir_version 8
opset "" 17
graph main (float[2,5,4] %x) -> (float %y)
  init int64[2] %dims = [4, 3]
  init float[] %s = [0.125]
{
  %w = ConstantOfShape(%dims) {value: tensor float[1] [0.5]} @splat
  %m = MatMul(%x, %w) @matmul
  %y = Mul(%m, %s) @scale
}
)",
                  kPass, "weights are a ConstantOfShape splat");
  // The MatMul's output is read by another node too: the unscaled value is still needed.
  ExpectUnchanged(Projection("  %p = Mul(%m, %s) @scale\n  %y = Add(%p, %m) @sum\n"), kPass, "");
}
