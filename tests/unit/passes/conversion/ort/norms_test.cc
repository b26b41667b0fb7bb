// lower-for-ort, norms (passes/conversion/ort/norms.cc): a fused LayerNorm or RMSNorm, or the
// standard LayerNormalization op, written as Skip(Simplified)LayerNormalization taking in the
// residual Add before it (of its group, of the fused contraction that feeds it, or a provable
// [B,S,H] + [B|1,S,H]); an RMSNorm without a residual spelled as ORT's fusion matches; and what
// stays, with the reason.
#include <catch2/catch.hpp>

#include "ort_test_support.h"
#include "passes/conversion/ort/lower_for_ort.h"
#include "passes/conversion/ort/support.h"

namespace fusionopt {
namespace {

using namespace ort_test;
using pass_test::OpTypes;
using pass_test::ParseInferred;

TEST_CASE("lower-for-ort: a residual LayerNorm becomes SkipLayerNormalization with both results", "[passes][ort]") {
  auto model = OptimizedAtO3(Header() + R"(graph main (float[N,4,8] %h, float[N,4,8] %w) -> (float[N,4,8] %out)
  init float[8] %g = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
  init float[8] %be = [0.1, -0.2, 0.3, 0.0, 0.5, -1.0, 0.25, 2.0]
{
  %proj = Mul(%h, %w) @proj
  %sum = Add(%proj, %h) @residual
  %ln = LayerNormalization(%sum, %g, %be) {axis: -1, epsilon: 1e-05} @ln
  %out = Add(%sum, %ln) @residual_2
}
)");
  auto report = passes::LowerForOrt(*model);
  REQUIRE(report.ok());
  REQUIRE(report->lowered.size() == 1);
  CHECK(report->lowered[0].written == "com.microsoft::SkipLayerNormalization");
  const Node& skip = Only(*model->graph, "SkipLayerNormalization");
  CHECK(skip.domain() == "com.microsoft");
  CHECK(skip.inputs().size() == 4);
  CHECK(skip.input(2)->name() == "g");
  CHECK(skip.input(3)->name() == "be");
  CHECK(skip.GetFloat("epsilon", 0) == Approx(1e-5));
  REQUIRE(skip.outputs().size() == 4);
  CHECK(skip.output(0)->name() == "ln");
  CHECK(skip.output(1) == nullptr);
  CHECK(skip.output(3)->name() == "sum");  // the residual stream, read on by residual_2
}

// An [8,8] output projection's weights.
std::string SquareWeights() {
  std::string weights;
  for (int i = 0; i < 64; ++i) weights += (i ? ", " : "") + std::to_string(((i * 5) % 11 - 5) / 8.0);
  return weights;
}

// A LLaMA-style block end: the output projection (with a bias here, as BERT's has) adds the
// residual stream, an RMSNorm (transformers' Reciprocal form) reads the sum, and the stream
// goes on. `residual` is the residual's type.
std::string ProjectionThenRmsNorm(const std::string& residual = "float[N,4,8]",
                                  const std::string& bias = "float[8] %b = [0.5, -0.5, 0.25, 0, 1, -1, 2, -2]") {
  return Header() + "graph main (float[N,4,8] %x, " + residual + R"( %r) -> (float[N,4,8] %y, float[N,4,8] %next)
  init float[8,8] %w = [)" + SquareWeights() + R"(]
  init )" + bias + R"(
  init float[8] %g = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
  init float[] %two = [2.0]
  init float[] %eps = [1e-06]
{
  %m = MatMul(%x, %w) @o_proj
  %biased = Add(%m, %b) @bias
  %sum = Add(%r, %biased) @residual
  %sq = Pow(%sum, %two) @pow
  %var = ReduceMean(%sq) {axes: [-1], keepdims: 1} @mean
  %shifted = Add(%var, %eps) @add_eps
  %root = Sqrt(%shifted) @sqrt
  %inv = Reciprocal(%root) @reciprocal
  %n = Mul(%sum, %inv) @normalize
  %y = Mul(%n, %g) @gamma
  %next = Add(%sum, %y) @next_residual
}
)";
}

TEST_CASE("lower-for-ort: an RMSNorm after a projection that adds the residual becomes MatMul + SkipSimplifiedLayerNormalization", "[passes][ort]") {
  auto model = OptimizedAtO3(ProjectionThenRmsNorm());
  const std::vector<std::string> optimized = OpTypes(*model->graph);
  CAPTURE(optimized);
  REQUIRE(Has(optimized, "ai.fusionopt::FusedRMSNorm"));
  auto report = passes::LowerForOrt(*model);
  REQUIRE(report.ok());
  REQUIRE(report->lowered.size() == 1);
  CHECK(report->lowered[0].written == "com.microsoft::SkipSimplifiedLayerNormalization");
  REQUIRE(report->lowered[0].absorbed.size() == 1);  // the fused projection
  const Node& skip = Only(*model->graph, "SkipSimplifiedLayerNormalization");
  REQUIRE(skip.inputs().size() == 4);
  CHECK(skip.input(0)->producer()->op_type() == "MatMul");
  CHECK(skip.input(0)->producer()->input(1)->name() == "w");
  CHECK(skip.input(1)->name() == "r");
  CHECK(skip.input(2)->name() == "g");
  CHECK(skip.input(3)->name() == "b");  // the projection's bias, added inside the kernel
  CHECK(skip.GetFloat("epsilon", 0) == Approx(1e-6));
  CHECK(skip.output(0)->name() == "y");
  CHECK(skip.output(3)->name() == "sum");  // read on by next_residual
  for (const auto& node : model->graph->nodes()) CHECK(node->domain() != "ai.fusionopt");
}

// A pre-norm ViT / CLIP / Whisper block end as the dynamo exporter writes it: the output
// projection adds its bias and the residual stream, and a standard LayerNormalization op (which
// -O3 leaves unfused) reads the sum. `statistics` names the op's extra outputs, `read` what the
// graph returns of them.
std::string ProjectionThenLayerNorm(const std::string& statistics = "", const std::string& read = "") {
  return Header() + "graph main (float[N,4,8] %x, float[N,4,8] %r) -> (float[N,4,8] %y, float[N,4,8] %next" + read +
         R"()
  init float[8,8] %w = [)" + SquareWeights() + R"(]
  init float[8] %b = [0.5, -0.5, 0.25, 0, 1, -1, 2, -2]
  init float[8] %g = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
  init float[8] %be = [0.1, -0.2, 0.3, 0.0, 0.5, -1.0, 0.25, 2.0]
{
  %m = MatMul(%x, %w) @out_proj
  %biased = Add(%m, %b) @bias
  %sum = Add(%r, %biased) @residual
  %y)" + statistics + R"( = LayerNormalization(%sum, %g, %be) {axis: -1, epsilon: 1e-06} @ln
  %next = Add(%sum, %y) @next_residual
}
)";
}

TEST_CASE("lower-for-ort: a standard LayerNormalization after a projection that adds the residual becomes MatMul + SkipLayerNormalization", "[passes][ort]") {
  auto model = OptimizedAtO3(ProjectionThenLayerNorm());
  const std::vector<std::string> optimized = OpTypes(*model->graph);
  CAPTURE(optimized);
  REQUIRE(Has(optimized, "LayerNormalization"));  // the op itself, not a fused group
  REQUIRE(Has(optimized, "ai.fusionopt::FusedMatMulAddAdd"));
  auto report = passes::LowerForOrt(*model);
  REQUIRE(report.ok());
  REQUIRE(report->lowered.size() == 1);
  CHECK(report->lowered[0].node == "ln");
  CHECK(report->lowered[0].function == "LayerNormalization");
  CHECK(report->lowered[0].written == "com.microsoft::SkipLayerNormalization");
  REQUIRE(report->lowered[0].absorbed.size() == 1);  // the fused projection, no longer listed as kept
  for (const passes::OrtKeptGroup& kept : report->kept) CHECK(kept.node != report->lowered[0].absorbed[0]);
  const Node& skip = Only(*model->graph, "SkipLayerNormalization");
  REQUIRE(skip.inputs().size() == 5);
  CHECK(skip.input(0)->producer()->op_type() == "MatMul");
  CHECK(skip.input(0)->producer()->input(1)->name() == "w");
  CHECK(skip.input(1)->name() == "r");
  CHECK(skip.input(2)->name() == "g");
  CHECK(skip.input(3)->name() == "be");
  CHECK(skip.input(4)->name() == "b");
  CHECK(skip.GetFloat("epsilon", 0) == Approx(1e-6));
  CHECK(skip.output(0)->name() == "y");
  CHECK(skip.output(3)->name() == "sum");
  const std::vector<std::string> lowered = OpTypes(*model->graph);
  CHECK_FALSE(Has(lowered, "LayerNormalization"));
  for (const auto& node : model->graph->nodes()) CHECK(node->domain() != "ai.fusionopt");
}

TEST_CASE("lower-for-ort: a standard LayerNormalization whose statistics are read, or with no contraction before it, stays", "[passes][ort]") {
  auto training = OptimizedAtO3(ProjectionThenLayerNorm(", %mean", ", float[N,4,1] %mean"));
  auto report = passes::LowerForOrt(*training);
  REQUIRE(report.ok());
  CHECK(report->lowered.empty());
  std::vector<std::string> reasons;
  for (const passes::OrtKeptGroup& kept : report->kept) {
    if (kept.node == "ln") reasons.push_back(kept.reason);
  }
  CAPTURE(reasons);
  // The pattern library's reason: the mean, returned by the graph, is not the norm's result.
  CHECK(reasons == std::vector<std::string>{"layernorm: a graph output is inside the pattern"});
  CHECK(Has(OpTypes(*training->graph), "LayerNormalization"));

  // A LayerNormalization reading a graph input: ORT's own fusions see everything before it.
  auto plain = OptimizedAtO3(Header() + R"(graph main (float[N,4,8] %x) -> (float[N,4,8] %y)
  init float[8] %g = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
{
  %y = LayerNormalization(%x, %g) {axis: -1} @ln
}
)");
  auto untouched = passes::LowerForOrt(*plain);
  REQUIRE(untouched.ok());
  CHECK(untouched->lowered.empty());
  CHECK(untouched->kept.empty());
  CHECK(OpTypes(*plain->graph) == std::vector<std::string>{"LayerNormalization"});
}

// ViT's / CLIP's embeddings: tokens plus [1,S,H] position embeddings, then the first
// LayerNormalization; the sum goes on as the residual stream. `position` is its type.
std::string PositionsThenLayerNorm(const std::string& position = "float[1,4,8]") {
  std::string values;
  for (int i = 0; i < 32; ++i) values += (i ? ", " : "") + std::to_string((i % 7 - 3) / 4.0);
  return Header() + "graph main (float[N,4,8] %tokens" + (position.starts_with("float[N") ? ", " + position + " %pos" : "") +
         R"() -> (float[N,4,8] %y, float[N,4,8] %next)
  init float[8] %g = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
  init float[8] %be = [0.1, -0.2, 0.3, 0.0, 0.5, -1.0, 0.25, 2.0]
)" + (position.starts_with("float[N") ? "" : "  init " + position + " %pos = [" + values + "]\n") + R"({
  %embedded = Add(%tokens, %pos) @add_positions
  %y = LayerNormalization(%embedded, %g, %be) {axis: -1, epsilon: 1e-06} @ln
  %next = Add(%embedded, %y) @next_residual
}
)";
}

TEST_CASE("lower-for-ort: a LayerNormalization after adding [1,S,H] position embeddings becomes SkipLayerNormalization", "[passes][ort]") {
  auto model = pass_test::ParseOptimized(PositionsThenLayerNorm(), 3);
  const std::vector<std::string> optimized = OpTypes(*model->graph);
  CAPTURE(optimized);
  REQUIRE(Has(optimized, "LayerNormalization"));
  REQUIRE(Has(optimized, "Add"));
  auto report = passes::LowerForOrt(*model);
  REQUIRE(report.ok());
  REQUIRE(report->lowered.size() == 1);
  CHECK(report->lowered[0].node == "ln");
  CHECK(report->lowered[0].written == "com.microsoft::SkipLayerNormalization");
  CHECK(report->lowered[0].absorbed.empty());
  const Node& skip = Only(*model->graph, "SkipLayerNormalization");
  REQUIRE(skip.inputs().size() == 4);
  CHECK(skip.input(0)->name() == "tokens");
  CHECK(skip.input(1)->name() == "pos");  // [1,4,8]: ORT's kernel broadcasts it over the batch
  CHECK(skip.output(0)->name() == "y");
  CHECK(skip.output(3)->name() == "embedded");  // read on by next_residual
  const std::vector<std::string> lowered = OpTypes(*model->graph);
  CHECK(std::count(lowered.begin(), lowered.end(), "Add") == 1);  // next_residual only

  // Equal shapes: -O3 fuses the Add into the norm itself, and that group is what is lowered.
  auto equal = pass_test::ParseOptimized(PositionsThenLayerNorm("float[N,4,8]"), 3);
  REQUIRE(Has(OpTypes(*equal->graph), "ai.fusionopt::FusedAddLayerNorm"));
  auto fused = passes::LowerForOrt(*equal);
  REQUIRE(fused.ok());
  REQUIRE(fused->lowered.size() == 1);
  CHECK(fused->lowered[0].function == "ai.fusionopt::FusedAddLayerNorm");
  // A [4,8] table broadcasts over the batch too, but only the [1,S,H] form was checked in ORT.
  auto two_d = pass_test::ParseOptimized(PositionsThenLayerNorm("float[4,8]"), 3);
  auto kept = passes::LowerForOrt(*two_d);
  REQUIRE(kept.ok());
  CHECK(kept->lowered.empty());
}

// A float16 residual stream, as GPT-2's fp16 export leaves it: -O3 fuses the residual Add and the
// float16 LayerNormalization op (stash_type 1) into one FusedAddLayerNorm.
std::string HalfResidualThenLayerNorm(const std::string& residual = "float16[N,4,8]") {
  return Header() + "graph main (float16[N,4,8] %a, " + residual + R"( %r) -> (float16[N,4,8] %y, float16[N,4,8] %next)
  init float16[8] %g = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
  init float16[8] %be = [0.1, -0.2, 0.3, 0.0, 0.5, -1.0, 0.25, 2.0]
{
  %sum = Add(%a, %r) @residual
  %y = LayerNormalization(%sum, %g, %be) {axis: -1, epsilon: 1e-05} @ln
  %next = Add(%sum, %y) @next_residual
}
)";
}

TEST_CASE("lower-for-ort: a LayerNormalization after a residual Add of one provable shape becomes SkipLayerNormalization", "[passes][ort]") {
  auto model = pass_test::ParseOptimized(HalfResidualThenLayerNorm(), 3);
  REQUIRE(Has(OpTypes(*model->graph), "ai.fusionopt::FusedAddLayerNorm"));
  auto report = passes::LowerForOrt(*model);
  REQUIRE(report.ok());
  REQUIRE(report->lowered.size() == 1);
  CHECK(report->lowered[0].written == "com.microsoft::SkipLayerNormalization");
  const Node& skip = Only(*model->graph, "SkipLayerNormalization");
  CHECK(skip.input(0)->name() == "a");
  CHECK(skip.input(1)->name() == "r");
  CHECK(skip.output(0)->name() == "y");
  CHECK(skip.output(3)->name() == "sum");  // read on by next_residual
  CHECK(skip.output(0)->dtype() == DataType::kFloat16);  // for the CUDA EP, the default target

  // For the CPU EP a float16 SkipLayerNormalization is slower than the ops: they stay, with why.
  auto cpu = pass_test::ParseOptimized(HalfResidualThenLayerNorm(), 3);
  auto on_cpu = passes::LowerForOrt(*cpu, {passes::OrtProvider::kCpu, {}});
  REQUIRE(on_cpu.ok());
  CHECK(on_cpu->lowered.empty());
  REQUIRE(on_cpu->kept.size() == 1);
  CHECK(on_cpu->kept[0].reason.starts_with("CPU EP: float16 Skip(Simplified)LayerNormalization is several times slower"));
  // Kept as the fused function, which ORT inlines back into the Add and the standard op.
  CHECK(Has(OpTypes(*cpu->graph), "ai.fusionopt::FusedAddLayerNorm"));

  // The residual's batch is another symbol: the shapes are not provably one, the group stays.
  auto other = pass_test::ParseOptimized(HalfResidualThenLayerNorm("float16[M,4,8]"), 3);
  auto kept = passes::LowerForOrt(*other);
  REQUIRE(kept.ok());
  CHECK(kept->lowered.empty());
  REQUIRE(kept->kept.size() == 1);
  CHECK(kept->kept[0].reason == "the input and the residual are not provably one [B,S,H] shape");
  CHECK_FALSE(Has(OpTypes(*other->graph), "com.microsoft::SkipLayerNormalization"));
}

TEST_CASE("lower-for-ort: an RMSNorm without a residual is spelled as ORT's SimplifiedLayerNormFusion matches", "[passes][ort]") {
  // The residual broadcasts ([1,4,8] against the [N,4,8] product), so the kernel cannot take
  // it in: the projection stays a function and the norm alone is rewritten.
  auto model = OptimizedAtO3(ProjectionThenRmsNorm("float[1,4,8]"));
  REQUIRE(Has(OpTypes(*model->graph), "ai.fusionopt::FusedRMSNorm"));
  auto report = passes::LowerForOrt(*model);
  REQUIRE(report.ok());
  REQUIRE(report->lowered.size() == 1);
  CHECK(report->lowered[0].written == "SimplifiedLayerNormalization (standard ops ORT fuses)");
  CHECK(report->lowered[0].absorbed.empty());
  std::vector<std::string> ops = OpTypes(*model->graph);
  CHECK(Has(ops, "Div"));
  CHECK_FALSE(Has(ops, "Reciprocal"));
  CHECK_FALSE(Has(ops, "com.microsoft::SkipSimplifiedLayerNormalization"));
  const Node& divide = Only(*model->graph, "Div");
  CHECK(divide.input(1)->producer()->op_type() == "Sqrt");
  CHECK(divide.output(0)->uses().front().node->output(0)->name() == "y");
  CHECK(std::count_if(ops.begin(), ops.end(), [](const std::string& op) { return op.starts_with("ai.fusionopt::"); }) >= 1);

  // A bias of one value that broadcasts over the channels: the kernel's bias input takes one per
  // channel (and the outliner keeps such a constant inside the body, where no argument names it),
  // so the projection keeps its Adds and only the norm is rewritten.
  auto scalar_bias = OptimizedAtO3(ProjectionThenRmsNorm("float[N,4,8]", "float[1] %b = [0.5]"));
  const std::vector<std::string> fused = OpTypes(*scalar_bias->graph);
  CAPTURE(fused);
  REQUIRE(Has(fused, "ai.fusionopt::FusedMatMulAddAdd"));  // the candidate the check refuses
  auto kept = passes::LowerForOrt(*scalar_bias);
  REQUIRE(kept.ok());
  REQUIRE(kept->lowered.size() == 1);
  CHECK(kept->lowered[0].written == "SimplifiedLayerNormalization (standard ops ORT fuses)");
  CHECK_FALSE(Has(OpTypes(*scalar_bias->graph), "com.microsoft::SkipSimplifiedLayerNormalization"));
}

}  // namespace
}  // namespace fusionopt
