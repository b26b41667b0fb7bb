// unflatten-batch-matmuls: BLOOM's flattened-heads attention ([B·H,S,D] bmm, the ALiBi bias
// added at [B·H,1,S], Reshapes to 4-D and back) and nn.MultiheadAttention's need_weights form
// ([L,B,E] viewed as [L,B·H,D]) run on the unflattened tensors, with the same numbers; regions
// that are not closed, entries that split differently, and regions without a batched MatMul stay.
#include "pass_harness.h"
#include "text_format/text_format.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "unflatten-batch-matmuls";

std::string Replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// Three batches: broadcasting over B would hide behind B = 1.
const OpenDims kThreeBatches{.symbols = {{"B", 3}}};

// BLOOM's eager attention on [B,2,3,4] heads; `tail` follows the context %o3 [B·2,3,4]. The
// scores' 4-D shape is declared as the exporter declares it (a -1 over B·2 proves no B).
std::string Bloom(const std::string& tail = "  %y = Reshape(%o3, %heads_out) @context_heads\n",
                  const std::string& k_type = "float[B,2,3,4] %k") {
  return R"(ir_version 8
opset "" 18
graph main (float[B,2,3,4] %q, )" + k_type + R"(, float[B,2,3,4] %v, float[B,2,3] %alibi, float[B,1,3,3] %mask) -> (float %y)
  init int64[3] %flat = [-1, 3, 4]
  init int64[3] %flat_bias = [-1, 1, 3]
  init int64[4] %heads = [-1, 2, 3, 3]
  init int64[3] %flat_scores = [-1, 3, 3]
  init int64[4] %heads_out = [-1, 2, 3, 4]
  init float[] %alpha = [0.5]
  value float[B,2,3,3] %s4
{
  %q3 = Reshape(%q, %flat) @q_flat
  %k3 = Reshape(%k, %flat) @k_flat
  %v3 = Reshape(%v, %flat) @v_flat
  %b3 = Reshape(%alibi, %flat_bias) @alibi_flat
  %kt = Transpose(%k3) {perm: [0, 2, 1]} @k_transposed
  %s = MatMul(%q3, %kt) @scores
  %a = Mul(%s, %alpha) @scale
  %sb = Add(%a, %b3) @baddbmm
  %s4 = Reshape(%sb, %heads) @scores_heads
  %m = Add(%s4, %mask) @mask_add
  %p = Softmax(%m) {axis: -1} @softmax
  %p3 = Reshape(%p, %flat_scores) @probs_flat
  %o3 = MatMul(%p3, %v3) @context
)" + tail + "}\n";
}

}  // namespace

TEST_CASE("unflatten-batch-matmuls runs BLOOM's flattened-heads attention on the 4-D heads", "[passes]") {
  // The Reshapes back to 4-D are no-ops now and go; the ALiBi bias [B,2,3] is unsqueezed to
  // [B,2,1,3] (exact at every size, B = 0 included), and the flattened Q, K, V, bias and
  // probabilities are read by nothing.
  auto model =
      ExpectRewriteOps(Bloom(), kPass, {"Transpose", "MatMul", "Mul", "Unsqueeze", "Add", "Add", "Softmax", "MatMul"})
          .model;
  Rewritten rewritten = Rewrite(Bloom(), kPass);
  CHECK(rewritten.Counter("regions_unflattened") == 2);
  ExpectSameOutputs(*rewritten.original, *rewritten.model, kThreeBatches, {1e-5, 1e-6});
  const std::string text = PrintGraph(*rewritten.model->graph);
  INFO(text);
  CHECK(text.find("perm: [0, 1, 3, 2]") != std::string::npos);
  CHECK(text.find("Unsqueeze(%alibi, %b3_unflattened_axes)") != std::string::npos);
  CHECK(text.find("%b3_unflattened_axes = [2]") != std::string::npos);
  CHECK(text.find("Softmax(%m) {axis: -1}") != std::string::npos);  // the 4-D Softmax was never flattened
}

TEST_CASE("unflatten-batch-matmuls leaves regions it cannot close or split one way", "[passes]") {
  SECTION("a flattened score read by a reduction over the flattened axis") {
    const std::string text = Replaced(Bloom("  %y = Reshape(%o3, %heads_out) @context_heads\n  %seen = ReduceMax(%sb) @peek\n"),
                                      "-> (float %y)", "-> (float %y, float %seen)");
    Rewritten rewritten = Rewrite(text, kPass);
    // The context region still unflattens; the scores' region does not.
    CHECK(rewritten.Counter("regions_unflattened") == 1);
    CHECK(rewritten.run.statistics.rejections.count(
              "a value of the batched MatMul's region is read by an op that is neither a MatMul of two flattened "
              "operands, an elementwise op, a Transpose, a last-axis Softmax nor a Reshape") == 1);
    ExpectSameOutputs(*rewritten.original, *rewritten.model, kEveryOpenDimOne, {1e-5, 1e-6});
  }
  SECTION("K flattened as [2,B] while Q is [B,2]: the same flat axis, split another way") {
    const std::string text = Bloom("  %y = Reshape(%o3, %heads_out) @context_heads\n", "float[2,B,3,4] %k");
    Rewritten rewritten = Rewrite(text, kPass);
    CHECK(rewritten.Counter("regions_unflattened") == 1);  // the context's region only
    CHECK(PrintGraph(*rewritten.model->graph).find("Transpose(%k3) {perm: [0, 2, 1]}") != std::string::npos);
  }
  SECTION("a region without a MatMul of two flattened operands") {
    ExpectUnchanged(R"(ir_version 8
opset "" 18
graph main (float[B,2,3,4] %x, float[4,5] %w) -> (float %y)
  init int64[3] %flat = [-1, 3, 4]
  init int64[4] %heads = [-1, 2, 3, 5]
{
  %x3 = Reshape(%x, %flat) @flat
  %r = Relu(%x3) @relu
  %p = MatMul(%r, %w) @projection
  %y = Reshape(%p, %heads) @back
}
)",
                    kPass, "");
  }
}

TEST_CASE("unflatten-batch-matmuls splits nn.MultiheadAttention's [L,B·H,D] view of [L,B,E]", "[passes]") {
  // need_weights: Q, K and V [L,B,E] viewed as [L,B·H,D] and moved to [B·H,L,D]; the context
  // moved back and merged to [L·B,E].
  const std::string text = R"(ir_version 8
opset "" 18
graph main (float[3,B,8] %q, float[5,B,8] %k, float[5,B,8] %v) -> (float %y)
  init int64[3] %q_heads = [3, -1, 4]
  init int64[3] %kv_heads = [5, -1, 4]
  init int64[2] %merged = [-1, 8]
  init float[] %scale = [0.5]
{
  %q3 = Reshape(%q, %q_heads) @q_view
  %qt = Transpose(%q3) {perm: [1, 0, 2]} @q_batch_first
  %k3 = Reshape(%k, %kv_heads) @k_view
  %kt = Transpose(%k3) {perm: [1, 2, 0]} @k_transposed
  %v3 = Reshape(%v, %kv_heads) @v_view
  %vt = Transpose(%v3) {perm: [1, 0, 2]} @v_batch_first
  %qs = Mul(%qt, %scale) @q_scaled
  %s = MatMul(%qs, %kt) @bmm
  %p = Softmax(%s) {axis: -1} @softmax
  %o = MatMul(%p, %vt) @bmm_1
  %ot = Transpose(%o) {perm: [1, 0, 2]} @sequence_first
  %y = Reshape(%ot, %merged) @merge
}
)";
  auto model = ExpectRewriteOps(text, kPass,
                                {"Reshape", "Transpose", "Mul", "Reshape", "Transpose", "MatMul", "Softmax", "Reshape",
                                 "Transpose", "MatMul", "Transpose", "Reshape"})
                   .model;
  const std::string printed = PrintGraph(*model->graph);
  INFO(printed);
  CHECK(printed.find("perm: [1, 2, 0, 3]") != std::string::npos);  // [L,B,H,D] -> [B,H,L,D]
  CHECK(printed.find("perm: [1, 2, 3, 0]") != std::string::npos);  // K: [B,H,D,L]
  CHECK(printed.find("Softmax(%s_unflattened) {axis: 3}") != std::string::npos);
}
