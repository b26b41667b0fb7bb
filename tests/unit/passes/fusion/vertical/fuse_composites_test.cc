// fuse-composites, norms: LayerNorm and RMSNorm (decomposed and as standard ops, with a
// residual Add prologue and an affine tail) outlined into one ai.fusionopt node each — the
// rewritten graph with its function bodies, the bodies recognised, the same numbers — and the
// near misses of every kind, left alone with their reasons. Softmax, GELU and SiLU rewrites:
// pass_fuse_composites_activation_test.cc.
#include "fuse_composites_test_helpers.h"

using namespace fusionopt;
using namespace fusionopt::fuse_composites_test;

namespace {

// LLaMA's RMSNorm as the float16 exports write it: widened to float32, normalized, cast back to
// `back`, then × gamma of `gamma_type`.
std::string Float16RmsNorm(const std::string& x_type = "float16", const std::string& back = "10",
                           const std::string& gamma_type = "float16") {
  return Header() + "graph main (" + x_type + "[2,4,8] %x) -> (" + gamma_type + "[2,4,8] %y)\n" +
         "  init " + gamma_type + "[8] %g = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]\n" + R"(  init float[] %two = [2.0]
  init float[] %eps = [1e-06]
{
  %w = Cast(%x) {to: 1} @widen
  %p = Pow(%w, %two) @pow
  %v = ReduceMean(%p) {axes: [-1], keepdims: 1} @mean
  %a = Add(%v, %eps) @add_eps
  %r = Sqrt(%a) @sqrt
  %i = Reciprocal(%r) @reciprocal
  %n = Mul(%w, %i) @normalize
  %b = Cast(%n) {to: )" + back + R"(} @narrow
  %y = Mul(%g, %b) @gamma
}
)";
}

}  // namespace

TEST_CASE("fuse-composites: a float16 RMSNorm computed in float32 takes its Casts and gamma in", "[passes]") {
  for (const std::string type : {"float16", "bfloat16"}) {
    INFO(type);
    const std::string code = type == "float16" ? "10" : "16";
    Rewritten fused = Rewrite(Float16RmsNorm(type, code, type), kPass);
    CHECK(OpTypes(*fused.model->graph) == std::vector<std::string>{"ai.fusionopt::FusedRMSNorm"});
    ExpectBodiesRecognised(*fused.model, fused.run.fusions);
    const Function* function = fused.model->FindFunction(kFusionDomain, "FusedRMSNorm");
    REQUIRE(function != nullptr);
    std::optional<FusedComposite> composite = RecognizeComposite(*function);
    REQUIRE(composite.has_value());
    CHECK(composite->cast_back_to == std::stoi(code));
    CHECK(composite->gamma.input >= 0);
    // The kernel rounds once where the ops round twice (after the Cast back, after × gamma).
    const cpu::Tolerance tolerance = type == "float16" ? cpu::Tolerance{2e-3, 1e-3} : cpu::Tolerance{2e-2, 1e-2};
    ExpectClose(RunOnCpu(*fused.model), RunOnCpu(*fused.original), tolerance);
  }
}

TEST_CASE("fuse-composites: a float16 residual Add + LayerNormalization op becomes FusedAddLayerNorm", "[passes]") {
  // GPT-2's float16 export: the op computes in float32 (stash_type 1), as the row kernel does,
  // and the kernel rounds the residual sum to float16, as the Add does.
  auto text = [](const std::string& stash) {
    return Header() + R"(graph main (float16[2,4,8] %a, float16[2,4,8] %b) -> (float16[2,4,8] %y, float16[2,4,8] %s)
  init float16[8] %g = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
  init float16[8] %be = [0.1, -0.2, 0.3, 0.0, 0.5, -1.0, 0.25, 2.0]
{
  %s = Add(%a, %b) @residual
  %y = LayerNormalization(%s, %g, %be) {axis: -1, epsilon: 1e-05)" + stash + R"(} @ln
}
)";
  };
  Rewritten fused = Rewrite(text(""), kPass);
  CHECK(OpTypes(*fused.model->graph) == std::vector<std::string>{"ai.fusionopt::FusedAddLayerNorm"});
  ExpectBodiesRecognised(*fused.model, fused.run.fusions);
  ExpectClose(RunOnCpu(*fused.model), RunOnCpu(*fused.original), cpu::Tolerance{2e-3, 1e-3});
  // stash_type 0 computes in float16: not what the kernel does.
  ExpectUnchanged(text(", stash_type: 0"), kPass, "layernorm: dtype is not float32");
}

TEST_CASE("fuse-composites: float32 Casts that would change the result stay outside the norm", "[passes]") {
  struct Case {
    std::string x_type, back, gamma_type, reason;
  };
  const std::vector<Case> cases = {
      // Cast back to bfloat16 from a float16 input: the row kernel writes x's type.
      {"float16", "16", "bfloat16", "rmsnorm: the Cast back does not restore the input's type (fused without its Casts)"},
      // A float32 input "widened" to float32 and cast to float16: no 16-bit row.
      {"float", "10", "float16", "rmsnorm: the Cast to float32 widens no float16 or bfloat16 (fused without its Casts)"},
  };
  for (const Case& c : cases) {
    INFO(c.reason);
    Rewritten fused = Rewrite(Float16RmsNorm(c.x_type, c.back, c.gamma_type), kPass);
    // The float32 core alone is fused; both Casts and × gamma stay where they were.
    CHECK(OpTypes(*fused.model->graph) == std::vector<std::string>{"Cast", "ai.fusionopt::FusedRMSNorm", "Cast", "Mul"});
    CHECK(RejectionCount(fused.run.statistics, c.reason) == 1);
    ExpectClose(RunOnCpu(*fused.model), RunOnCpu(*fused.original), cpu::Tolerance{1e-3, 1e-3});
  }
}

TEST_CASE("fuse-composites: BERT's residual Add + decomposed LayerNorm become one FusedAddLayerNorm", "[passes]") {
  Fused fused = ExpectFusedComposite(BertLayerNorm(kBertSignature), Header() + R"(opset "ai.fusionopt" 1
graph main (float[N,4,8] %a, float[N,4,8] %b) -> (float[N,4,8] %y))" + kGammaBeta +
                                                                        R"({
  %y = ai.fusionopt::FusedAddLayerNorm(%a, %b, %g, %be) {fused_nodes: ["add", "mean", "sub", "pow", "var", "add_eps", "sqrt", "div", "mul_gamma", "add_beta"]} @FusedAddLayerNorm
}

function ai.fusionopt::FusedAddLayerNorm (%x0, %x1, %x2, %x3) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Add(%x0, %x1)
  %t1 = ReduceMean(%t0) {axes: [-1], keepdims: 1}
  %t2 = Sub(%t0, %t1)
  %c0 = Constant() {value: tensor float[] [2.0]}
  %t3 = Pow(%t2, %c0)
  %t4 = ReduceMean(%t3) {axes: [-1], keepdims: 1}
  %c1 = Constant() {value: tensor float[] [1e-12]}
  %t5 = Add(%t4, %c1)
  %t6 = Sqrt(%t5)
  %t7 = Div(%t2, %t6)
  %t8 = Mul(%t7, %x2)
  %y0 = Add(%t8, %x3)
}
)");
  CHECK(fused.Counter("layernorm") == 1);
  CHECK(fused.Counter("residual_prologues") == 1);
  CHECK(fused.Counter("residual_sum_outputs") == 0);
  REQUIRE(fused.run.fusions.size() == 1);
  CHECK(fused.run.fusions[0].kind == "layernorm");
}

TEST_CASE("fuse-composites: a residual sum read elsewhere becomes a second result (GPT-2's stream)", "[passes]") {
  Fused fused = ExpectFusedComposite(
      Header() + R"(graph main (float[N,4,8] %h, float[N,4,8] %w) -> (float[N,4,8] %out))" + kGammaBeta + R"({
  %ln1 = LayerNormalization(%h, %g, %be) {axis: -1, epsilon: 1e-05} @ln_1
  %proj = Mul(%ln1, %w) @proj
  %sum = Add(%proj, %h) @residual
  %ln2 = LayerNormalization(%sum, %g, %be) {axis: -1, epsilon: 1e-05} @ln_2
  %out = Add(%sum, %ln2) @residual_2
}
)",
      Header() + R"(opset "ai.fusionopt" 1
graph main (float[N,4,8] %h, float[N,4,8] %w) -> (float[N,4,8] %out))" +
          kGammaBeta + R"({
  %ln1 = LayerNormalization(%h, %g, %be) {axis: -1, epsilon: 1e-05} @ln_1
  %proj = Mul(%ln1, %w) @proj
  %sum, %ln2 = ai.fusionopt::FusedAddLayerNorm(%proj, %h, %g, %be) {fused_nodes: ["residual", "ln_2"]} @FusedAddLayerNorm
  %out = Add(%sum, %ln2) @residual_2
}

function ai.fusionopt::FusedAddLayerNorm (%x0, %x1, %x2, %x3) -> (%y0, %y1) attributes [fused_nodes] opset "" 17 {
  %y0 = Add(%x0, %x1)
  %y1 = LayerNormalization(%y0, %x2, %x3) {axis: -1, epsilon: 1e-05}
}
)");
  // The first LayerNormalization reads a graph input: already one kernel, left alone.
  CHECK(fused.Counter("standalone_layernorm_ops") == 1);
  CHECK(fused.Counter("residual_sum_outputs") == 1);
  auto composite = RecognizeComposite(*fused.model->FindFunction(kFusionDomain, "FusedAddLayerNorm"));
  REQUIRE(composite.has_value());
  CHECK(composite->standard_op);
  CHECK(composite->residual_sum_output == 0);
  CHECK(composite->result_output == 1);
}

TEST_CASE("fuse-composites: RMSNorm, decomposed (Llama's rsqrt) and as RMSNormalization with a residual", "[passes]") {
  ExpectFusedComposite(Header() + R"(graph main (float[2,3,8] %x) -> (float[2,3,8] %y)
  init float[8] %w = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
{
  %two = Constant() {value: tensor float[] [2.0]} @two
  %sq = Pow(%x, %two) @pow
  %var = ReduceMean(%sq) {axes: [-1]} @mean
  %eps = Constant() {value: tensor float[] [1e-06]} @eps
  %ve = Add(%var, %eps) @add_eps
  %rt = Sqrt(%ve) @sqrt
  %inv = Reciprocal(%rt) @reciprocal
  %n = Mul(%x, %inv) @normalize
  %y = Mul(%w, %n) @scale
}
)",
                       Header() + R"(opset "ai.fusionopt" 1
graph main (float[2,3,8] %x) -> (float[2,3,8] %y)
  init float[8] %w = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
{
  %y = ai.fusionopt::FusedRMSNorm(%x, %w) {fused_nodes: ["pow", "mean", "add_eps", "sqrt", "reciprocal", "normalize", "scale"]} @FusedRMSNorm
}

function ai.fusionopt::FusedRMSNorm (%x0, %x1) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %c0 = Constant() {value: tensor float[] [2.0]}
  %t0 = Pow(%x0, %c0)
  %t1 = ReduceMean(%t0) {axes: [-1]}
  %c1 = Constant() {value: tensor float[] [1e-06]}
  %t2 = Add(%t1, %c1)
  %t3 = Sqrt(%t2)
  %t4 = Reciprocal(%t3)
  %t5 = Mul(%x0, %t4)
  %y0 = Mul(%x1, %t5)
}
)");
  ExpectFusedComposite(Header(23) + R"(graph main (float[2,3,8] %a, float[2,3,8] %b) -> (float[2,3,8] %y)
  init float[8] %w = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
{
  %s = Add(%a, %b) @residual
  %y = RMSNormalization(%s, %w) {epsilon: 1e-06} @rms
}
)",
                       Header(23) + R"(opset "ai.fusionopt" 1
graph main (float[2,3,8] %a, float[2,3,8] %b) -> (float[2,3,8] %y)
  init float[8] %w = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
{
  %y = ai.fusionopt::FusedAddRMSNorm(%a, %b, %w) {fused_nodes: ["residual", "rms"]} @FusedAddRMSNorm
}

function ai.fusionopt::FusedAddRMSNorm (%x0, %x1, %x2) -> (%y0) attributes [fused_nodes] opset "" 23 {
  %t0 = Add(%x0, %x1)
  %y0 = RMSNormalization(%t0, %x2) {epsilon: 1e-06}
}
)");
}

TEST_CASE("fuse-composites: opset 18 ReduceMean axes inputs and a LayerNorm without affine tail", "[passes]") {
  ExpectFusedComposite(Header(18) + R"(graph main (float[2,3,8] %x) -> (float[2,3,8] %y)
  init int64[1] %axes = [-1]
{
  %m = ReduceMean(%x, %axes) @mean
  %d = Sub(%x, %m) @sub
  %q = Mul(%d, %d) @square
  %v = ReduceMean(%q, %axes) @var
  %eps = Constant() {value: tensor float[] [1e-05]} @eps
  %e = Add(%eps, %v) @add_eps
  %r = Sqrt(%e) @sqrt
  %y = Div(%d, %r) @div
}
)",
                       Header(18) + R"(opset "ai.fusionopt" 1
graph main (float[2,3,8] %x) -> (float[2,3,8] %y)
{
  %y = ai.fusionopt::FusedLayerNorm(%x) {fused_nodes: ["mean", "sub", "square", "var", "add_eps", "sqrt", "div"]} @FusedLayerNorm
}

function ai.fusionopt::FusedLayerNorm (%x0) -> (%y0) attributes [fused_nodes] opset "" 18 {
  %c0 = Constant() {value: tensor int64[1] [-1]}
  %t0 = ReduceMean(%x0, %c0)
  %t1 = Sub(%x0, %t0)
  %t2 = Mul(%t1, %t1)
  %t3 = ReduceMean(%t2, %c0)
  %c1 = Constant() {value: tensor float[] [1e-05]}
  %t4 = Add(%c1, %t3)
  %t5 = Sqrt(%t4)
  %y0 = Div(%t1, %t5)
}
)");
}

TEST_CASE("fuse-composites: a bias add before a LayerNorm is no residual prologue", "[passes]") {
  const std::string bias_signature =
      "(float[N,4,8] %a) -> (float[N,4,8] %y)\n  init float[8] %b = [0.5, 0.5, 0.5, 0.5, -0.5, -0.5, -0.5, -0.5]";
  Fused fused = ExpectFusedComposite(BertLayerNorm(bias_signature), Header() + R"(opset "ai.fusionopt" 1
graph main (float[N,4,8] %a) -> (float[N,4,8] %y)
  init float[8] %b = [0.5, 0.5, 0.5, 0.5, -0.5, -0.5, -0.5, -0.5])" + kGammaBeta +
                                                                        R"({
  %s = Add(%a, %b) @add
  %y = ai.fusionopt::FusedLayerNorm(%s, %g, %be) {fused_nodes: ["mean", "sub", "pow", "var", "add_eps", "sqrt", "div", "mul_gamma", "add_beta"]} @FusedLayerNorm
}

function ai.fusionopt::FusedLayerNorm (%x0, %x1, %x2) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = ReduceMean(%x0) {axes: [-1], keepdims: 1}
  %t1 = Sub(%x0, %t0)
  %c0 = Constant() {value: tensor float[] [2.0]}
  %t2 = Pow(%t1, %c0)
  %t3 = ReduceMean(%t2) {axes: [-1], keepdims: 1}
  %c1 = Constant() {value: tensor float[] [1e-12]}
  %t4 = Add(%t3, %c1)
  %t5 = Sqrt(%t4)
  %t6 = Div(%t1, %t5)
  %t7 = Mul(%t6, %x1)
  %y0 = Add(%t7, %x2)
}
)");
  CHECK(fused.Counter("residual_prologues") == 0);
}

TEST_CASE("fuse-composites: unknown leading dims do not block a residual prologue", "[passes]") {
  // Exporters' reshapes leave dims shape inference cannot name; only a provable broadcast
  // (a known 1 against more) keeps the Add out. (The fused node takes its last member's place.)
  Fused fused = ExpectFusedComposite(
      Header() +
          R"(graph main (float[2,?,8] %a, float[2,?,8] %b, float[1,?,8] %c) -> (float[2,?,8] %y, float[2,?,8] %z))" +
          kGammaBeta + R"({
  %s = Add(%a, %b) @residual
  %y = LayerNormalization(%s, %g, %be) @ln
  %t = Add(%a, %c) @broadcast
  %z = LayerNormalization(%t, %g, %be) @ln_1
}
)",
      Header() + R"(opset "ai.fusionopt" 1
graph main (float[2,?,8] %a, float[2,?,8] %b, float[1,?,8] %c) -> (float[2,?,8] %y, float[2,?,8] %z))" +
          kGammaBeta + R"({
  %y = ai.fusionopt::FusedAddLayerNorm(%a, %b, %g, %be) {fused_nodes: ["residual", "ln"]} @FusedAddLayerNorm
  %t = Add(%a, %c) @broadcast
  %z = LayerNormalization(%t, %g, %be) @ln_1
}

function ai.fusionopt::FusedAddLayerNorm (%x0, %x1, %x2, %x3) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Add(%x0, %x1)
  %y0 = LayerNormalization(%t0, %x2, %x3)
}
)");
  CHECK(fused.Counter("standalone_layernorm_ops") == 1);
}

TEST_CASE("fuse-composites: gamma broadcasting over more than the row is left outside the fused norm", "[passes]") {
  // gamma [4, 1] scales whole rows, not the elements of a row: the norm fuses without its tail.
  std::string text = Header() + R"(graph main (float[2,4,8] %x) -> (float[2,4,8] %y)
  init float[4,1] %g = [1.0, 2.0, 3.0, 4.0]
  init float[8] %be = [0.1, -0.2, 0.3, 0.0, 0.5, -1.0, 0.25, 2.0]
{
  %m = ReduceMean(%x) {axes: [-1]} @mean
  %d = Sub(%x, %m) @sub
  %q = Mul(%d, %d) @square
  %v = ReduceMean(%q) {axes: [-1]} @var
  %eps = Constant() {value: tensor float[] [1e-05]} @eps
  %e = Add(%v, %eps) @add_eps
  %r = Sqrt(%e) @sqrt
  %n = Div(%d, %r) @div
  %t = Mul(%n, %g) @mul_gamma
  %y = Add(%t, %be) @add_beta
}
)";
  Fused fused = ExpectFusedComposite(text, Header() + R"(opset "ai.fusionopt" 1
graph main (float[2,4,8] %x) -> (float[2,4,8] %y)
  init float[4,1] %g = [1.0, 2.0, 3.0, 4.0]
  init float[8] %be = [0.1, -0.2, 0.3, 0.0, 0.5, -1.0, 0.25, 2.0]
{
  %n = ai.fusionopt::FusedLayerNorm(%x) {fused_nodes: ["mean", "sub", "square", "var", "add_eps", "sqrt", "div"]} @FusedLayerNorm
  %t = Mul(%n, %g) @mul_gamma
  %y = Add(%t, %be) @add_beta
}

function ai.fusionopt::FusedLayerNorm (%x0) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = ReduceMean(%x0) {axes: [-1]}
  %t1 = Sub(%x0, %t0)
  %t2 = Mul(%t1, %t1)
  %t3 = ReduceMean(%t2) {axes: [-1]}
  %c0 = Constant() {value: tensor float[] [1e-05]}
  %t4 = Add(%t3, %c0)
  %t5 = Sqrt(%t4)
  %y0 = Div(%t1, %t5)
}
)");
  CHECK(RejectionCount(fused.run.statistics,
                       "layernorm: gamma broadcasts over more than the last axis (fused without it)") == 1);
}

TEST_CASE("fuse-composites: symbolic row length against a constant gamma keeps gamma outside", "[passes]") {
  // The row has D elements; gamma has 8. Equal only if D = 8, which nothing proves.
  Fused fused = ExpectFusedComposite(Header() + R"(graph main (float[N,S,D] %x) -> (float[N,S,D] %y)
  init float[8] %g = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
{
  %q = Mul(%x, %x) @square
  %v = ReduceMean(%q) {axes: [-1]} @mean
  %eps = Constant() {value: tensor float[] [1e-06]} @eps
  %e = Add(%v, %eps) @add_eps
  %r = Sqrt(%e) @sqrt
  %n = Div(%x, %r) @div
  %y = Mul(%n, %g) @scale
}
)",
                                     Header() + R"(opset "ai.fusionopt" 1
graph main (float[N,S,D] %x) -> (float[N,S,D] %y)
  init float[8] %g = [1.0, 0.5, -1.0, 2.0, 1.5, 0.25, -0.5, 3.0]
{
  %n = ai.fusionopt::FusedRMSNorm(%x) {fused_nodes: ["square", "mean", "add_eps", "sqrt", "div"]} @FusedRMSNorm
  %y = Mul(%n, %g) @scale
}

function ai.fusionopt::FusedRMSNorm (%x0) -> (%y0) attributes [fused_nodes] opset "" 17 {
  %t0 = Mul(%x0, %x0)
  %t1 = ReduceMean(%t0) {axes: [-1]}
  %c0 = Constant() {value: tensor float[] [1e-06]}
  %t2 = Add(%t1, %c0)
  %t3 = Sqrt(%t2)
  %y0 = Div(%x0, %t3)
}
)",
                                     {{"D", 8}});
  CHECK(RejectionCount(fused.run.statistics,
                       "rmsnorm: gamma broadcasts over more than the last axis (fused without it)") == 1);
}

TEST_CASE("fuse-composites: near misses are left alone with their reasons", "[passes]") {
  SECTION("wrong axis") {
    ExpectUnchanged(BertLayerNorm("(float[2,4,8] %a, float[2,4,8] %b) -> (float[2,4,8] %y)", "[1]"), kPass,
                    "layernorm: reduce axis is not the last");
  }
  SECTION("epsilon not constant: a graph input, or an initializer a caller may override") {
    ExpectUnchanged(BertLayerNorm("(float[2,4,8] %a, float[2,4,8] %b, float[] %eps) -> (float[2,4,8] %y)", "[-1]", ""),
                    kPass, "layernorm: epsilon is not a constant scalar");
    ExpectUnchanged(BertLayerNorm("(float[2,4,8] %a, float[2,4,8] %b, float[] %eps) -> (float[2,4,8] %y)\n"
                                  "  init float[] %eps = [1e-05]",
                                  "[-1]", ""),
                    kPass, "layernorm: epsilon is not a constant scalar");
  }
  SECTION("multi-consumer intermediate") {
    std::string text = BertLayerNorm("(float[2,4,8] %a, float[2,4,8] %b) -> (float[2,4,8] %y, float[2,4,8] %z)");
    text.insert(text.rfind('}'), "  %z = Relu(%d) @relu\n");
    ExpectUnchanged(text, kPass, "layernorm: an intermediate is read outside the pattern");
  }
  SECTION("graph output inside the pattern") {
    ExpectUnchanged(Header() + R"(graph main (float[2,8] %x) -> (float[2,8] %y, float[2,8] %e)
{
  %c = Constant() {value: tensor float[] [0.70710677]} @c
  %a = Mul(%x, %c) @scale
  %e = Erf(%a) @erf
  %one = Constant() {value: tensor float[] [1.0]} @one
  %b = Add(%e, %one) @add
  %m = Mul(%x, %b) @mul
  %half = Constant() {value: tensor float[] [0.5]} @half
  %y = Mul(%m, %half) @mul_1
}
)",
                    kPass, "gelu: a graph output is inside the pattern");
  }
  SECTION("GELU constant off by 1%") {
    ExpectUnchanged(Header() + R"(graph main (float[2,8] %x) -> (float[2,8] %y)
{
  %c = Constant() {value: tensor float[] [1.4283557]} @c
  %a = Div(%x, %c) @div
  %e = Erf(%a) @erf
  %one = Constant() {value: tensor float[] [1.0]} @one
  %b = Add(%e, %one) @add
  %m = Mul(%x, %b) @mul
  %half = Constant() {value: tensor float[] [0.5]} @half
  %y = Mul(%m, %half) @mul_1
}
)",
                    kPass, "gelu: the erf argument is not x/sqrt(2)");
  }
  SECTION("too-old opsets") {
    ExpectUnchanged(
        Header(16) + R"(graph main (float[2,4,8] %a, float[2,4,8] %b) -> (float[2,4,8] %y))" + kGammaBeta + R"({
  %s = Add(%a, %b) @residual
  %y = LayerNormalization(%s, %g, %be) @ln
}
)",
        kPass, "layernorm: LayerNormalization needs opset 17");
    // Softmax-11 flattens [2,4,6] at its default axis 1 into rows of 24: not the last axis.
    ExpectUnchanged(Header(11) + R"(graph main (float[2,4,6] %x) -> (float[2,4,6] %p)
  init float[] %k = [0.125]
{
  %s = Mul(%x, %k) @scale
  %p = Softmax(%s) @softmax
}
)",
                    kPass, "softmax: opset < 13 softmax flattens to 2-D at an axis that is not the last");
  }
  SECTION("softmax over a middle axis, and a mask that widens the scores") {
    ExpectUnchanged(Header() + R"(graph main (float[2,4,6] %x) -> (float[2,4,6] %p)
  init float[] %k = [0.125]
{
  %s = Mul(%x, %k) @scale
  %p = Softmax(%s) {axis: 1} @softmax
}
)",
                    kPass, "softmax: axis is not the last");
    ExpectUnchanged(Header() + R"(graph main (float[2,4,1] %x, float[1,1,6] %mask) -> (float[2,4,6] %p)
  init float[] %k = [0.125]
{
  %s = Mul(%x, %k) @scale
  %z = Add(%s, %mask) @add_mask
  %p = Softmax(%z) {axis: -1} @softmax
}
)",
                    kPass, "softmax: the mask broadcasts the scores");
  }
  SECTION("not float32") {
    ExpectUnchanged(Header() + R"(graph main (double[2,8] %x) -> (double[2,8] %y)
{
  %s = Sigmoid(%x) @sigmoid
  %y = Mul(%s, %x) @mul
}
)",
                    kPass, "silu: dtype is not float32");
  }
}
