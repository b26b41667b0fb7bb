// fuse-horizontal-contractions: contractions that read one input with constant weights become
// one contraction + Split, their common epilogue moved below the Split; incompatible,
// non-constant and grouped members stay, with reasons.
#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "fuse-horizontal-contractions";

// Q/K/V-style projections of %x: MatMul by a constant [4, n_i] then a bias Add each.
std::string Projections(const std::string& x_type, int opset = 17) {
  return "ir_version 8\nopset \"\" " + std::to_string(opset) + "\ngraph main (" + x_type +
         R"( %x) -> (float %q, float %k, float %v)
  init float[4,3] %wq = )" + Spread(12, 1) + R"(
  init float[4,3] %wk = )" + Spread(12, 2) + R"(
  init float[4,2] %wv = )" + Spread(8, 3) + R"(
  init float[3] %bq = [0.5, -0.25, 1.0]
  init float[3] %bk = [0.125, 0.0, -1.0]
  init float[2] %bv = [2.0, -2.0]
{
  %mq = MatMul(%x, %wq) @q_matmul
  %mk = MatMul(%x, %wk) @k_matmul
  %mv = MatMul(%x, %wv) @v_matmul
  %q = Add(%mq, %bq) @q_add
  %k = Add(%bk, %mk) @k_add
  %v = Add(%mv, %bv) @v_add
}
)";
}

// Three 1×1 convolutions of %x with bias, each followed by `activations[i]`.
std::string ParallelConvs(const std::vector<std::string>& activations, const std::string& second_attributes = "") {
  std::string text = R"(ir_version 8
opset "" 17
graph main (float[1,4,5,5] %x) -> (float %a, float %b, float %c)
  init float[2,4,1,1] %w0 = )" + Spread(8, 1) + R"(
  init float[3,4,1,1] %w1 = )" + Spread(12, 2) + R"(
  init float[2,4,1,1] %w2 = )" + Spread(8, 3) + R"(
  init float[2] %b0 = [0.5, -0.5]
  init float[3] %b1 = [0.25, 0.0, -0.25]
{
  %c0 = Conv(%x, %w0, %b0) @conv0
  %c1 = Conv(%x, %w1, %b1))" + second_attributes + R"( @conv1
  %c2 = Conv(%x, %w2) @conv2
)";
  const char* outputs[] = {"a", "b", "c"};
  for (int i = 0; i < 3; ++i) {
    text += "  %" + std::string(outputs[i]) + " = " + activations[i] + "(%c" + std::to_string(i) + ") @act" +
            std::to_string(i) + "\n";
  }
  return text + "}\n";
}

}  // namespace

TEST_CASE("fuse-horizontal-contractions merges Q/K/V projections and their bias Adds", "[passes]") {
  for (const char* x_type : {"float[2,5,4]", "float[B,S,4]"}) {
    INFO(x_type);
    auto model = ExpectRewriteOps(Projections(x_type), kPass, {"MatMul", "Add", "Split"}).model;
    const Node& matmul = *model->graph->nodes().front();
    // The merged weight is the three side by side: [4, 3 + 3 + 2].
    CHECK(matmul.input(1)->shape() == Shape{Dim::Known(4), Dim::Known(8)});
    const Node& split = *model->graph->nodes().back();
    CHECK(split.GetInt("axis", -1) == 2);
    std::vector<std::string> outputs;
    for (const Value* output : split.outputs()) outputs.push_back(output->name());
    CHECK(outputs == std::vector<std::string>{"q", "k", "v"});  // the graph outputs keep their names
  }
  Rewritten rewritten = Rewrite(Projections("float[2,5,4]"), kPass);
  CHECK(rewritten.Counter("contractions_merged") == 3);
  CHECK(rewritten.Counter("epilogue_nodes_moved") == 3);
  // The old weights and biases are gone; the merged ones remain.
  CHECK(rewritten.model->graph->initializers().size() == 3);
}

TEST_CASE("fuse-horizontal-contractions writes Split's sizes as an attribute before opset 13", "[passes]") {
  auto model = ExpectRewriteOps(Projections("float[2,5,4]", 11), kPass, {"MatMul", "Add", "Split"}).model;
  const Node& split = *model->graph->nodes().back();
  CHECK(split.inputs().size() == 1);
  CHECK(split.GetInts("split") == std::vector<int64_t>{3, 3, 2});
}

TEST_CASE("fuse-horizontal-contractions respects max_members", "[passes]") {
  auto model = ExpectRewriteOps(Projections("float[2,5,4]"), kPass, {"MatMul", "Add", "Split", "MatMul", "Add"},
                                {.options = {{"max_members", "2"}}})
                   .model;
  CHECK(model->graph->nodes().front()->input(1)->shape() == Shape{Dim::Known(4), Dim::Known(6)});
}

TEST_CASE("fuse-horizontal-contractions merges parallel convolutions and their activation", "[passes]") {
  // conv2 has no bias: the merged bias holds zeros for its channels.
  auto model = ExpectRewriteOps(ParallelConvs({"Relu", "Relu", "Relu"}), kPass, {"Conv", "Relu", "Split"}).model;
  const Node& conv = *model->graph->nodes().front();
  CHECK(conv.input(1)->shape() == Shape{Dim::Known(7), Dim::Known(4), Dim::Known(1), Dim::Known(1)});
  REQUIRE(conv.inputs().size() == 3);
  CHECK(conv.input(2)->shape() == Shape{Dim::Known(7)});
  CHECK(model->graph->nodes().back()->GetInt("axis", -1) == 1);

  // Members that continue differently stay apart: each keeps its activation as an epilogue
  // O2 fuses into it, which a Split between them would prevent.
  ExpectUnchanged(ParallelConvs({"Relu", "Sigmoid", "Relu"}), kPass,
                  "a member continues with Relu the others do not share (its epilogue fusion would be lost)");
  ExpectRewriteOps(ParallelConvs({"LeakyRelu", "LeakyRelu", "LeakyRelu"}), kPass, {"Conv", "LeakyRelu", "Split"});

  // convolutions=0 (what --runtime ort sets): the same convolutions stay apart, and say why;
  // MatMul members still merge.
  ExpectUnchanged(ParallelConvs({"Relu", "Relu", "Relu"}), kPass, "Conv members are off (convolutions=0)",
                  {{"convolutions", "0"}});
  ExpectRewriteOps(Projections("float[2,5,4]"), kPass, {"MatMul", "Add", "Split"},
                   {.options = {{"convolutions", "0"}}});
}

namespace {

// ParallelConvs with each convolution followed by SiLU written x · Sigmoid(x); `third_mul`
// replaces the third member's Mul (a near miss reads the Sigmoid twice).
std::string ParallelConvsSilu(const std::string& third_mul = "Mul(%c2, %s2)") {
  std::string text = ParallelConvs({"Identity", "Identity", "Identity"});
  text = text.substr(0, text.find("  %a = Identity"));
  return text + R"(  %s0 = Sigmoid(%c0) @sigmoid0
  %a = Mul(%c0, %s0) @silu0
  %s1 = Sigmoid(%c1) @sigmoid1
  %b = Mul(%s1, %c1) @silu1
  %s2 = Sigmoid(%c2) @sigmoid2
  %c = )" + third_mul + R"( @silu2
}
)";
}

}  // namespace

TEST_CASE("fuse-horizontal-contractions moves SiLU below the Split with the convolutions", "[passes]") {
  // YOLO's heads: left behind the Split, each SiLU would be a kernel of its own.
  ExpectRewriteOps(ParallelConvsSilu(), kPass, {"Conv", "Sigmoid", "Mul", "Split"});
  Rewritten rewritten = Rewrite(ParallelConvsSilu(), kPass);
  CHECK(rewritten.Counter("epilogue_nodes_moved") == 6);
  // A member whose Mul is no SiLU (Sigmoid(x) · Sigmoid(x)): no common epilogue, no merge.
  ExpectUnchanged(ParallelConvsSilu("Mul(%s2, %s2)"), kPass,
                  "a member continues with Sigmoid the others do not share (its epilogue fusion would be lost)");
}

TEST_CASE("fuse-horizontal-contractions leaves a member's graph output with the Split", "[passes]") {
  const std::string text = R"(ir_version 8
opset "" 17
graph main (float[2,4] %x) -> (float %m0, float %r0, float %r1)
  init float[4,3] %w0 = )" + Spread(12, 1) + R"(
  init float[4,3] %w1 = )" + Spread(12, 2) + R"(
{
  %m0 = MatMul(%x, %w0) @m0
  %m1 = MatMul(%x, %w1) @m1
  %r0 = Relu(%m0) @relu0
  %r1 = Relu(%m1) @relu1
}
)";
  // %m0 is a graph output, so the Relus cannot move below a Split: merged, each would lose the
  // epilogue fusion it has alone. The contractions stay apart.
  ExpectUnchanged(text, kPass, "a member continues with Relu the others do not share (its epilogue fusion would be lost)");
  // Read by no elementwise op, the tails stay behind the Split, which produces %m0 itself.
  std::string views = text;
  views.replace(views.find("%r0 = Relu(%m0)"), 15, "%r0 = Transpose(%m0)");
  views.replace(views.find("%r1 = Relu(%m1)"), 15, "%r1 = Transpose(%m1)");
  auto model = ExpectRewriteOps(views, kPass, {"MatMul", "Split", "Transpose", "Transpose"}).model;
  CHECK(model->graph->FindValue("m0")->producer()->op_type() == "Split");
}

TEST_CASE("fuse-horizontal-contractions keeps what cannot share a kernel", "[passes]") {
  const char* incompatible = "no other contraction on the same input with compatible weights and attributes";
  // Different strides: not one convolution.
  auto strided = Rewrite(ParallelConvs({"Relu", "Relu", "Relu"}, " {strides: [2, 2]}"), kPass);
  CHECK(strided.run.statistics.changed);  // conv0 and conv2 still merge
  CHECK(OpTypes(*strided.model->graph) == std::vector<std::string>{"Conv", "Relu", "Split", "Conv", "Relu"});
  CHECK(strided.run.statistics.rejections.count(incompatible) == 1);
  ExpectSameOutputs(*strided.original, *strided.model, kEveryOpenDimOne, {1e-5, 1e-6});

  // A weight computed at run time.
  ExpectUnchanged(R"(ir_version 8
opset "" 17
graph main (float[2,4] %x, float[4,3] %w1) -> (float %a, float %b)
  init float[4,3] %w0 = )" + Spread(12, 1) + R"(
{
  %a = MatMul(%x, %w0) @m0
  %b = MatMul(%x, %w1) @m1
}
)",
                  kPass, "weight is not a floating-point constant");

  // Grouped convolutions.
  ExpectUnchanged(R"(ir_version 8
opset "" 17
graph main (float[1,4,3,3] %x) -> (float %a, float %b)
  init float[4,2,1,1] %w0 = )" + Spread(8, 1) + R"(
  init float[4,2,1,1] %w1 = )" + Spread(8, 2) + R"(
{
  %a = Conv(%x, %w0) {group: 2} @g0
  %b = Conv(%x, %w1) {group: 2} @g1
}
)",
                  kPass, "grouped or malformed Conv");

  // One contraction alone, and MatMuls sharing their B operand rather than A.
  ExpectUnchanged(R"(ir_version 8
opset "" 17
graph main (float[2,4] %x, float[2,4] %y) -> (float %a, float %b)
  init float[4,3] %w = )" + Spread(12, 1) + R"(
{
  %a = MatMul(%x, %w) @m0
  %b = MatMul(%y, %w) @m1
}
)",
                  kPass, "");
}

TEST_CASE("fuse-horizontal-contractions gives a MatMul without a bias zeros beside the others' biases", "[passes]") {
  // Whisper's projections: the key has no bias. Its output goes on to a Transpose (the head
  // split), not an elementwise op, so nothing of its own is lost by merging.
  const std::string whisper = R"(ir_version 8
opset "" 17
graph main (float[2,5,4] %x) -> (float %q, float %k, float %v)
  init float[4,3] %wq = )" + Spread(12, 1) + R"(
  init float[4,3] %wk = )" + Spread(12, 2) + R"(
  init float[4,2] %wv = )" + Spread(8, 3) + R"(
  init float[3] %bq = [0.5, -0.25, 1.0]
  init float[2] %bv = [2.0, -2.0]
{
  %mq = MatMul(%x, %wq) @q_matmul
  %mk = MatMul(%x, %wk) @k_matmul
  %mv = MatMul(%x, %wv) @v_matmul
  %q = Add(%mq, %bq) @q_add
  %k = Transpose(%mk) {perm: [0, 2, 1]} @k_heads
  %v = Add(%mv, %bv) @v_add
}
)";
  auto model = ExpectRewriteOps(whisper, kPass, {"MatMul", "Add", "Split", "Transpose"}).model;
  const Node& add = **std::next(model->graph->nodes().begin());
  auto bias = add.input(1)->initializer()->values<float>();
  CHECK(std::vector<float>(bias.begin(), bias.end()) == std::vector<float>{0.5f, -0.25f, 1.0f, 0, 0, 0, 2.0f, -2.0f});
  CHECK(Rewrite(whisper, kPass).Counter("epilogue_nodes_moved") == 2);

  // The key continuing with Relu instead: merging would cost it its epilogue fusion, so it
  // stays out (reported) and the query and value merge without it (Phi's fc1 beside Q, K, V).
  std::string relu = whisper;
  relu.replace(relu.find("Transpose(%mk) {perm: [0, 2, 1]} @k_heads"), 41, "Relu(%mk) @k_relu");
  ExpectRewriteOps(relu, kPass, {"MatMul", "Add", "Split", "MatMul", "Relu"});
  Rewritten dropped = Rewrite(relu, kPass);
  CHECK(dropped.run.Rejections("a member continues with Relu the others do not share (its epilogue fusion would be lost)") == 1);
  // With a second member losing its own epilogue, fewer than two remain: nothing merges.
  std::string both = relu;
  both.replace(both.find("Add(%mv, %bv) @v_add"), 20, "Sigmoid(%mv) @v_sig");
  ExpectUnchanged(both, kPass, "a member continues with Relu the others do not share (its epilogue fusion would be lost)");
}
