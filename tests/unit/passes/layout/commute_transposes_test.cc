// commute-transposes: a last-axis-keeping Transpose sinks below a MatMul by constant weights and
// its bias when layout ops read the result, and rises above a Gemm (via the Reshape after it)
// when a layout op computes the Gemm's input, with the same numbers; Transposes that would move
// the contracted axis, meet no layout op, or sit beside non-constant weights stay.
#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "commute-transposes";

// x[2,3,4] -> Transpose(perm) -> MatMul(%w[4,6]) -> `bias` -> `tail` (reading %q).
std::string InProjection(const std::string& perm, const std::string& bias, const std::string& tail,
                         const std::string& weight = "%w", const std::string& outputs = "float %y") {
  return R"(ir_version 8
opset "" 17
graph main (float[2,3,4] %x, float[4,6] %live) -> ()" + outputs + R"()
  init float[4,6] %w = )" + Spread(24, 1) + R"(
  init float[3,6] %w3 = )" + Spread(18, 5) + R"(
  init float[6] %b = )" + Spread(6, 2) + R"(
  init int64[4] %heads = [3, 2, 2, 3]
{
  %t = Transpose(%x) {perm: )" + perm + R"(} @batch_first
  %p = MatMul(%t, )" + weight + R"() @in_proj
)" + bias + tail + "}\n";
}

const std::string kBias = "  %q = Add(%b, %p) @in_bias\n";
const std::string kSplitHeads = "  %y = Reshape(%q, %heads) @split_heads\n";

// x[3,2,2,4] (the attention output as [S,B,H,D/H]) -> Reshape [6,8] -> `gemm` -> Reshape [3,2,5]
// -> Transpose(perm) -> `tail` (reading %o).
std::string OutProjection(const std::string& gemm, const std::string& tail,
                          const std::string& flatten = "  %a = Reshape(%x, %flat) @merge_heads\n") {
  return R"(ir_version 8
opset "" 17
graph main (float[3,2,2,4] %x) -> (float %y)
  init float[5,8] %w = )" + Spread(40, 3) + R"(
  init float[5] %b = )" + Spread(5, 4) + R"(
  init int64[2] %flat = [6, 8]
  init int64[3] %unflat = [3, 2, 5]
  init int64[2] %rows = [6, 5]
{
)" + flatten + "  %g = " + gemm + R"( @out_proj
  %r = Reshape(%g, %unflat) @unflatten
  %o = Transpose(%r) {perm: [1, 0, 2]} @batch_first
)" + tail + "}\n";
}

const std::string kGemm = "Gemm(%a, %w, %b) {transB: 1}";

}  // namespace

TEST_CASE("commute-transposes sinks a batch-first Transpose below the in-projection", "[passes]") {
  auto model =
      ExpectRewriteOps(InProjection("[1, 0, 2]", kBias, kSplitHeads), kPass, {"MatMul", "Add", "Transpose", "Reshape"})
          .model;
  const Node& matmul = *model->graph->nodes().front();
  CHECK(matmul.input(0)->name() == "x");
  CHECK(Rewrite(InProjection("[1, 0, 2]", kBias, kSplitHeads), kPass).Counter("transposes_sunk") == 1);

  SECTION("without a bias, and with a Shape of the transposed tensor read as a Gather of the input's") {
    ExpectRewriteOps(InProjection("[1, 0, 2]", "  %n = Shape(%t) {start: 1} @shape\n", "  %y = Reshape(%p, %heads) @split_heads\n", "%w", "float %y, int64 %n"),
                     kPass, {"Shape", "Gather", "MatMul", "Transpose", "Reshape"});
  }
}

TEST_CASE("commute-transposes leaves Transposes it cannot or need not sink", "[passes]") {
  // The contracted axis moves: MatMul would contract another axis.
  ExpectUnchanged(InProjection("[0, 2, 1]", "", "  %y = Transpose(%p) {perm: [1, 0, 2]}\n", "%w3"), kPass, "");
  // No layout op after the projection: the Transpose would only move.
  ExpectUnchanged(InProjection("[1, 0, 2]", kBias, "  %y = Relu(%q)\n"), kPass, "");
  // Weights computed at run time.
  ExpectUnchanged(InProjection("[1, 0, 2]", kBias, kSplitHeads, "%live"), kPass, "");
}

TEST_CASE("commute-transposes hoists a batch-first Transpose above the out-projection", "[passes]") {
  auto model = ExpectRewriteOps(OutProjection(kGemm, "  %y = Relu(%o)\n"), kPass,
                                {"Reshape", "Transpose", "MatMul", "Add", "Relu"})
                   .model;
  // Reshaped straight from the attention output, past the flattening view.
  const Node& reshape = *model->graph->nodes().front();
  CHECK(reshape.input(0)->name() == "x");
  CHECK(Rewrite(OutProjection(kGemm, "  %y = Relu(%o)\n"), kPass).Counter("transposes_hoisted") == 1);

  SECTION("a MatMul by a [8,5] matrix") {
    std::string text = OutProjection("MatMul(%a, %wt)", "  %y = Relu(%o)\n");
    text.replace(text.find("  init float[5] %b"), 0, "  init float[8,5] %wt = " + Spread(40, 5) + "\n");
    ExpectRewriteOps(text, kPass, {"Reshape", "Transpose", "MatMul", "Relu"});
  }
}

TEST_CASE("commute-transposes leaves out-projections it cannot or need not cross", "[passes]") {
  // A scaled Gemm is not a MatMul by its weights.
  ExpectUnchanged(OutProjection("Gemm(%a, %w, %b) {transB: 1, alpha: 2.0}", "  %y = Relu(%o)\n"), kPass, "");
  // The Gemm's input is not a layout op's output: the Transpose would only move.
  ExpectUnchanged(OutProjection(kGemm, "  %y = Relu(%o)\n", "  %f = Reshape(%x, %flat)\n  %a = Relu(%f)\n"), kPass, "");
  // Already next to a layout op.
  ExpectUnchanged(OutProjection(kGemm, "  %y = Reshape(%o, %rows)\n"), kPass, "");
}
