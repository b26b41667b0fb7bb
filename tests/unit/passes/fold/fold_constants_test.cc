// fold-constants: all-constant chains and static shape arithmetic become initializers (same
// names, the CPU runtime's numbers); what must not fold stays, with its reason.
#include "pass_harness.h"

#include "passes/pipeline.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "fold-constants";

}  // namespace

TEST_CASE("fold-constants folds a chain of constant ops in one run and drops what it no longer reads", "[passes]") {
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x) -> (float[2,3] %y)
  init int64[2] %shape = [3, 2]
  init float[3,2] %w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
{
  %half = ConstantOfShape(%shape) {value: tensor float[1] [0.5]} @fill
  %sum = Add(%w, %half) @add
  %t = Transpose(%sum) {perm: [1, 0]} @transpose
  %y = Mul(%x, %t) @mul
}
)",
                kPass, R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x) -> (float[2,3] %y)
  init float[2,3] %t = [1.5, 3.5, 5.5, 2.5, 4.5, 6.5]
{
  %y = Mul(%x, %t) @mul
}
)");
}

TEST_CASE("fold-constants folds Shape -> Gather -> Concat when the shape is static", "[passes]") {
  auto statistics = ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[2,3,4] %x) -> (float[6,4] %y)
  init int64[1] %minus_one = [-1]
{
  %s = Shape(%x) @shape
  %index = Constant() {value: tensor int64[1] [2]} @index
  %last = Gather(%s, %index) {axis: 0} @gather
  %target = Concat(%minus_one, %last) {axis: 0} @concat
  %y = Reshape(%x, %target) @reshape
}
)",
                                  kPass, R"(
ir_version 8
opset "" 17
graph main (float[2,3,4] %x) -> (float[6,4] %y)
  init int64[2] %target = [-1, 4]
{
  %y = Reshape(%x, %target) @reshape
}
)");
  CHECK(statistics.Counter("nodes_folded") == 3);
}

TEST_CASE("fold-constants folds a Slice of a shape's static dims, not one that reaches a symbol", "[passes]") {
  // Shape(x)[-1:] is [64] although N is symbolic (torchvision's 1/√D); Shape(x)[:1] is N.
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[N,64] %x) -> (int64[1] %d, int64[1] %n)
  init int64[1] %minus_one = [-1]
  init int64[1] %zero = [0]
  init int64[1] %one = [1]
  init int64[1] %end = [9223372036854775807]
{
  %s = Shape(%x) @shape
  %last = Slice(%s, %minus_one, %end) @last
  %d = Identity(%last) @d
  %first = Slice(%s, %zero, %one) @first
  %n = Identity(%first) @n
}
)",
                kPass, R"(
ir_version 8
opset "" 17
graph main (float[N,64] %x) -> (int64[1] %d, int64[1] %n)
  init int64[1] %zero = [0]
  init int64[1] %one = [1]
  init int64[1] %last = [64]
{
  %s = Shape(%x) @shape
  %d = Identity(%last) @d
  %first = Slice(%s, %zero, %one) @first
  %n = Identity(%first) @n
}
)");
}

TEST_CASE("fold-constants folds only the static dims of a symbolic shape", "[passes]") {
  // Dim 2 (64) is known, dim 0 (N) is not: the Gather of dim 2 folds, the one of dim 0 and
  // the Concat reading it stay.
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[N,S,64] %x) -> (float[N,?,64] %y)
  init int64[] %zero = [0]
  init int64[] %two = [2]
  init int64[1] %axes = [0]
  init int64[1] %minus_one = [-1]
{
  %s = Shape(%x) @shape
  %batch = Gather(%s, %zero) {axis: 0} @batch
  %hidden = Gather(%s, %two) {axis: 0} @hidden
  %batch1 = Unsqueeze(%batch, %axes) @unsqueeze_batch
  %hidden1 = Unsqueeze(%hidden, %axes) @unsqueeze_hidden
  %target = Concat(%batch1, %minus_one, %hidden1) {axis: 0} @concat
  %y = Reshape(%x, %target) @reshape
}
)",
                kPass, R"(
ir_version 8
opset "" 17
graph main (float[N,S,64] %x) -> (float[N,?,64] %y)
  init int64[] %zero = [0]
  init int64[1] %axes = [0]
  init int64[1] %minus_one = [-1]
  init int64[1] %hidden1 = [64]
{
  %s = Shape(%x) @shape
  %batch = Gather(%s, %zero) {axis: 0} @batch
  %batch1 = Unsqueeze(%batch, %axes) @unsqueeze_batch
  %target = Concat(%batch1, %minus_one, %hidden1) {axis: 0} @concat
  %y = Reshape(%x, %target) @reshape
}
)");
}

TEST_CASE("fold-constants leaves a Shape of symbolic dims alone without calling it a rejection", "[passes]") {
  auto model = ParseInferred(R"(
ir_version 8
opset "" 17
graph main (float[N,3] %x) -> (int64[2] %y)
  init int64[2] %one = [1, 1]
{
  %s = Shape(%x) @shape
  %y = Add(%s, %one) @add
}
)");
  std::string printed = Print(*model);
  auto statistics = RunPass(*model, kPass).statistics;
  CHECK_FALSE(statistics.changed);
  CHECK(statistics.rejections.empty());
  CHECK(Print(*model) == printed);
}

TEST_CASE("fold-constants folds Size and a Shape window (start/end) of static shapes", "[passes]") {
  auto statistics = ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[2,3,5] %x) -> (int64[] %y, int64[2] %z)
  init int64[] %zero = [0]
  init int64[2] %zeros = [0, 0]
{
  %n = Size(%x) @size
  %y = Add(%n, %zero) @add
  %tail = Shape(%x) {start: -2} @shape
  %z = Add(%tail, %zeros) @add_tail
}
)",
                kPass, R"(
ir_version 8
opset "" 17
graph main (float[2,3,5] %x) -> (int64[] %y, int64[2] %z)
  init int64[] %zero = [0]
  init int64[2] %zeros = [0, 0]
  init int64[] %n = [30]
  init int64[2] %tail = [3, 5]
{
  %y = Add(%n, %zero) @add
  %z = Add(%tail, %zeros) @add_tail
}
)");
  // The Adds read constants now, but write graph outputs.
  CHECK(statistics.Rejections("an output is a graph output") == 2);
}

TEST_CASE("fold-constants: initializers that are graph inputs are constants only below IR version 4", "[passes]") {
  const std::string graph = R"(
opset "" 9
graph main (float[2] %x, float[2] %w) -> (float[2] %y)
  init float[2] %w = [1.0, 2.0]
{
  %n = Neg(%w) @neg
  %y = Add(%x, %n) @add
}
)";
  // IR 8: a caller may feed %w, so Neg(%w) is not a constant (and not a candidate either).
  auto overridable = ParseInferred("ir_version 8\n" + graph);
  std::string printed = Print(*overridable);
  auto statistics = RunPass(*overridable, kPass).statistics;
  CHECK_FALSE(statistics.changed);
  CHECK(Print(*overridable) == printed);

  // IR 3: every initializer is listed as an input and none can be overridden, so the Neg
  // folds. IR 3 would need the new %n listed as an input too; the pipeline moves the model to
  // IR 4 instead, where the listing of %w (never feedable) is dropped, and %w with it.
  ExpectRewrite("ir_version 3\n" + graph, kPass, R"(
ir_version 4
opset "" 9
graph main (float[2] %x) -> (float[2] %y)
  init float[2] %n = [-1.0, -2.0]
{
  %y = Add(%x, %n) @add
}
)");
}

TEST_CASE("fold-constants caps results that grow the model", "[passes]") {
  // With max-bytes 16: the 24-byte ConstantOfShape result is bigger than the cap and than its
  // 16-byte shape input, so it stays; the 24-byte Transpose result is no bigger than its input
  // and folds.
  const std::string text = R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x) -> (float[2,3] %y)
  init int64[2] %shape = [2, 3]
  init float[3,2] %w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
{
  %fill = ConstantOfShape(%shape) {value: tensor float[1] [0.25]} @fill
  %t = Transpose(%w) {perm: [1, 0]} @transpose
  %a = Add(%x, %fill) @add
  %y = Mul(%a, %t) @mul
}
)";
  auto statistics = ExpectRewrite(text, kPass, R"(
ir_version 8
opset "" 17
graph main (float[2,3] %x) -> (float[2,3] %y)
  init int64[2] %shape = [2, 3]
  init float[2,3] %t = [1.0, 3.0, 5.0, 2.0, 4.0, 6.0]
{
  %fill = ConstantOfShape(%shape) {value: tensor float[1] [0.25]} @fill
  %a = Add(%x, %fill) @add
  %y = Mul(%a, %t) @mul
}
)",
                                  {.options = {{"max-bytes", "16"}}});
  CHECK(statistics.Rejections("result larger than max-bytes") == 1);

  // The default cap (1 MiB) folds both.
  auto model = ParseInferred(text);
  RunPass(*model, kPass);
  CHECK(model->graph->num_nodes() == 2);
  CHECK(model->graph->initializers().size() == 2);
}

TEST_CASE("fold-constants rejects a negative max-bytes or max-dequantize-elements", "[passes]") {
  auto model = ParseInferred("ir_version 8\nopset \"\" 17\ngraph main (float[1] %x) -> (float[1] %x) {\n}\n");
  passes::PipelineOptions pipeline;
  pipeline.level = 1;
  pipeline.only = {kPass};
  pipeline.pass_options.Set(kPass, "max-bytes", "-1");
  auto report = passes::RunPipeline(*model, pipeline);
  REQUIRE_FALSE(report.ok());
  CHECK(report.status().code() == ErrorCode::kUsage);
  passes::PipelineOptions dequantize = pipeline;
  dequantize.pass_options = {};
  dequantize.pass_options.Set(kPass, "max-dequantize-elements", "-1");
  auto refused = passes::RunPipeline(*model, dequantize);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == ErrorCode::kUsage);
}

TEST_CASE("fold-constants never folds a node writing a graph output", "[passes]") {
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2] %x) -> (float[2] %y, float[2] %c)
  init float[2] %a = [1.0, 2.0]
{
  %c = Neg(%a) @neg
  %y = Add(%x, %c) @add
}
)",
                  kPass, "an output is a graph output");
}

TEST_CASE("fold-constants never folds random ops or ops with subgraphs", "[passes]") {
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2] %x) -> (float[2] %y)
  init float[2] %a = [1.0, 2.0]
{
  %r = RandomNormalLike(%a) {seed: 1.0} @random
  %y = Add(%x, %r) @add
}
)",
                  kPass, "not a pure op (random, opaque or training mode)");
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (float[2] %x) -> (float[2] %y)
  init bool[] %yes = [1]
{
  %picked = If(%yes) {then_branch: graph then_body () -> (float[2] %t) {
    %t = Neg(%x)
  }, else_branch: graph else_body () -> (float[2] %e) {
    %e = Abs(%x)
  }} @if
  %y = Add(%x, %picked) @add
}
)",
                  kPass, "op with subgraphs");
}

TEST_CASE("fold-constants folds inside subgraphs, reading constants of the enclosing graph", "[passes]") {
  ExpectRewrite(R"(
ir_version 8
opset "" 17
graph main (float[2] %x, bool[] %cond) -> (float[2] %y)
  init float[2] %a = [1.0, -2.0]
{
  %y = If(%cond) {then_branch: graph then_body () -> (float[2] %t) {
    %n = Neg(%a)
    %t = Add(%x, %n)
  }, else_branch: graph else_body () -> (float[2] %e) {
    %e = Abs(%x)
  }} @if
}
)",
                kPass, R"(
ir_version 8
opset "" 17
graph main (float[2] %x, bool[] %cond) -> (float[2] %y)
{
  %y = If(%cond) {then_branch: graph then_body () -> (float[2] %t)
    init float[2] %n = [-1.0, 2.0]
  {
    %t = Add(%x, %n)
  }, else_branch: graph else_body () -> (float[2] %e) {
    %e = Abs(%x)
  }} @if
}
)");
}

TEST_CASE("fold-constants skips ops the CPU runtime has no kernel for at the model's opset", "[passes]") {
  // ConstantOfShape exists from opset 9; at opset 8 nothing (the runtime included) runs it.
  ExpectUnchanged(R"(
ir_version 8
opset "" 8
graph main (float[2] %x) -> (float[2] %y)
  init int64[1] %shape = [2]
{
  %c = ConstantOfShape(%shape) @fill
  %y = Add(%x, %c) @add
}
)",
                  kPass, "no CPU kernel for the op at this opset");
}

TEST_CASE("fold-constants skips results whose size inference cannot bound, and string tensors", "[passes]") {
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (int64[2,?] %x) -> (int64[2,?] %y)
  init float[2,2] %a = [1.0, 0.0, 0.0, 1.0]
{
  %where = NonZero(%a) @nonzero
  %y = Add(%x, %where) @add
}
)",
                  kPass, "result shape not static");
  ExpectUnchanged(R"(
ir_version 8
opset "" 17
graph main (string[2] %x) -> (bool[2] %y)
  init string[2] %a = ["p", "q"]
{
  %b = Identity(%a) @identity
  %y = Equal(%x, %b) @equal
}
)",
                  kPass, "string tensors");
}

TEST_CASE("fold-constants folds a dequantized scalar but keeps a dequantized weight quantized", "[passes]") {
  // GELU's 0.5 stored as DQ(uint8 128, scale 1/256, zero point 0) folds to float 0.5; the
  // three-element weight's DequantizeLinear stays, which the integer kernels read.
  const std::string text = R"(
ir_version 8
opset "" 17
graph main (float[3] %x) -> (float[3] %y)
  init uint8[] %half_q = [128]
  init float[] %half_scale = [0.00390625]
  init uint8[] %zero = [0]
  init uint8[3] %w_q = [1, 2, 3]
  init float[] %w_scale = [0.5]
{
  %half = DequantizeLinear(%half_q, %half_scale, %zero) @half
  %w = DequantizeLinear(%w_q, %w_scale, %zero) @w
  %a = Mul(%x, %half) @mul
  %y = Add(%a, %w) @add
}
)";
  auto statistics = ExpectRewrite(text, kPass, R"(
ir_version 8
opset "" 17
graph main (float[3] %x) -> (float[3] %y)
  init uint8[] %zero = [0]
  init uint8[3] %w_q = [1, 2, 3]
  init float[] %w_scale = [0.5]
  init float[] %half = [0.5]
{
  %w = DequantizeLinear(%w_q, %w_scale, %zero) @w
  %a = Mul(%x, %half) @mul
  %y = Add(%a, %w) @add
}
)");
  CHECK(statistics.Rejections("a dequantized constant stays quantized") == 1);

  // --runtime ort sets max-dequantize-elements to 0: ORT's QDQ selectors want a
  // DequantizeLinear on every input of a binary op.
  ExpectUnchanged(text, kPass, "a dequantized constant stays quantized", {{"max-dequantize-elements", "0"}});
}
