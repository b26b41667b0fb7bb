// fuse-composites' typed checks (passes/fusion/util/composite_legality.h), asked directly on
// matches MatchCompositeAt found: opsets of the standard ops, dtypes, the last axis, a bias
// prologue and a broadcasting affine tail dropped (and reported), a softmax mask swapped or refused.
#include <catch2/catch.hpp>

#include "pass_test_support.h"
#include "passes/fusion/util/composite_legality.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::FindNode;
using pass_test::ParseInferred;

namespace {

class NoPass : public Pass {
 public:
  std::string_view name() const override { return "composite-legality-test"; }
  std::string_view summary() const override { return "test"; }
  std::string_view rewrite() const override { return "nothing"; }
};

// MakeFusable on the match at the node named `anchor`, with a context of its own.
struct Legality {
  std::unique_ptr<Model> model;
  CompositeMatch match;
  NoPass pass;
  PassOptions options;
  PassStatistics statistics;
  std::vector<FusionRecord> fusions;

  Legality(const std::string& text, const std::string& anchor, int64_t match_opset) : model(ParseInferred(text)) {
    CompositeSearch search = MatchCompositeAt(*FindNode(*model->graph, anchor), match_opset);
    INFO(search.near_miss.reason());
    REQUIRE(search.match.has_value());
    match = *search.match;
  }
  WhyNot Check(const std::string& anchor, int64_t opset) {
    PassContext context(*model, pass, options, statistics, fusions);
    return MakeFusable(match, opset, *FindNode(*model->graph, anchor), context);
  }
  Value* ValueNamed(const std::string& name) const { return model->graph->FindValue(name); }
};

const char* const kRows = R"(ir_version 8
opset "" 17
graph main (float[2,4] %x, double[2,4] %wide, float16[2,4] %half, float[4] %bias, float[2,4] %r,
            float[1,4] %row, float[2,4] %full_mask, float[2,1] %column)
         -> (float[2,4] %p, float[2,4] %q, double[2,4] %pd, float[2,4] %ps, float[2,4] %pb,
             float[2,4] %ln, float[2,4] %lnb, float[2,4] %lnr, double[2,4] %lnd, float16[2,4] %lnh)
  init float[4] %gamma = [1.0, 2.0, 3.0, 4.0]
  init float[4] %beta = [0.5, 0.5, 0.5, 0.5]
  init float16[4] %gamma16 = [1.0, 2.0, 3.0, 4.0]
  init float16[4] %beta16 = [0.5, 0.5, 0.5, 0.5]
  init double[4] %gamma64 = [1.0, 2.0, 3.0, 4.0]
  init double[4] %beta64 = [0.5, 0.5, 0.5, 0.5]
{
  %p = Softmax(%x) {axis: -1} @softmax
  %q = Softmax(%x) {axis: 0} @softmax_axis0
  %pd = Softmax(%wide) {axis: -1} @softmax_double
  %zs = Add(%row, %full_mask) @add_swap
  %ps = Softmax(%zs) {axis: -1} @softmax_swap
  %zb = Add(%row, %column) @add_broadcast
  %pb = Softmax(%zb) {axis: -1} @softmax_broadcast
  %ln = LayerNormalization(%x, %gamma, %beta) {axis: -1} @norm
  %sb = Add(%x, %bias) @bias_add
  %lnb = LayerNormalization(%sb, %gamma, %beta) {axis: -1} @norm_bias
  %sr = Add(%x, %r) @residual_add
  %lnr = LayerNormalization(%sr, %gamma, %beta) {axis: 0} @norm_axis0
  %lnd = LayerNormalization(%wide, %gamma64, %beta64) @norm_double
  %lnh = LayerNormalization(%half, %gamma16, %beta16) @norm_half
}
)";

// `count` values 1, 2, 3, ... as a tensor literal.
std::string Literal(int count) {
  std::string text = "[";
  for (int i = 1; i <= count; ++i) text += (i > 1 ? ", " : "") + std::to_string(i) + ".0";
  return text + "]";
}

// A decomposed LayerNorm over [2,4] with the affine tail Mul(gamma), Add(beta), gamma and beta
// of the given types holding `gamma_count` and `beta_count` elements.
std::string Decomposed(const std::string& gamma, int gamma_count, const std::string& beta, int beta_count) {
  return R"(ir_version 8
opset "" 17
graph main (float[2,4] %x) -> (float[2,4] %y)
  init float[] %two = [2.0]
  init float[] %eps = [1e-05]
  init )" + gamma + " %gamma = " + Literal(gamma_count) + R"(
  init )" + beta + " %beta = " + Literal(beta_count) + R"(
{
  %m = ReduceMean(%x) {axes: [-1]} @mean
  %d = Sub(%x, %m) @sub
  %sq = Pow(%d, %two) @pow
  %v = ReduceMean(%sq) {axes: [-1]} @variance
  %ve = Add(%v, %eps) @add_eps
  %s = Sqrt(%ve) @sqrt
  %n = Div(%d, %s) @div
  %g = Mul(%n, %gamma) @scale
  %y = Add(%g, %beta) @shift
}
)";
}

}  // namespace

TEST_CASE("composite legality: standard ops need their opset, rows float32 (or a 16-bit norm)", "[passes]") {
  CHECK_FALSE(Legality(kRows, "norm", 17).Check("norm", 17));
  CHECK(Legality(kRows, "norm", 17).Check("norm", 16).reason() == "layernorm: LayerNormalization needs opset 17");
  CHECK(Legality(kRows, "norm_double", 17).Check("norm_double", 17).reason() == "layernorm: dtype is not float32");
  CHECK_FALSE(Legality(kRows, "norm_half", 17).Check("norm_half", 17));  // float16 rows computed in float32
  CHECK(Legality(kRows, "softmax_double", 17).Check("softmax_double", 17).reason() == "softmax: dtype is not float32");

  const std::string gelu = R"(ir_version 8
opset "" 20
graph main (float[2,4] %x) -> (float[2,4] %y)
{
  %y = Gelu(%x) @gelu
}
)";
  CHECK_FALSE(Legality(gelu, "gelu", 20).Check("gelu", 20));
  CHECK(Legality(gelu, "gelu", 20).Check("gelu", 17).reason() == "gelu: Gelu needs opset 20");
}

TEST_CASE("composite legality: the normalized axis must be the last", "[passes]") {
  CHECK_FALSE(Legality(kRows, "softmax", 17).Check("softmax", 17));
  CHECK(Legality(kRows, "softmax_axis0", 17).Check("softmax_axis0", 17).reason() == "softmax: axis is not the last");
  CHECK(Legality(kRows, "softmax_axis0", 17).Check("softmax_axis0", 11).reason() ==
        "softmax: opset < 13 softmax flattens to 2-D at an axis that is not the last");
  CHECK(Legality(kRows, "norm_axis0", 17).Check("norm_axis0", 17).reason() ==
        "layernorm: the normalized axis is not the last");
}

TEST_CASE("composite legality: a residual prologue stays only when both addends are rows", "[passes]") {
  Legality bias(kRows, "norm_bias", 17);
  REQUIRE(bias.match.residual_add != nullptr);
  CHECK_FALSE(bias.Check("norm_bias", 17));
  CHECK(bias.match.residual_add == nullptr);  // x + bias[4] is left to the elementwise passes
  CHECK(bias.match.x == bias.ValueNamed("sb"));
  CHECK(bias.match.nodes == std::vector<Node*>{FindNode(*bias.model->graph, "norm_bias")});

  Legality residual(kRows, "norm_axis0", 17);
  // Refused for its axis, but the residual [2,4] + [2,4] was kept until then.
  CHECK(residual.Check("norm_axis0", 17));
  CHECK(residual.match.residual_add == FindNode(*residual.model->graph, "residual_add"));
  CHECK(residual.match.residual == residual.ValueNamed("r"));
}

TEST_CASE("composite legality: a broadcasting gamma or beta is dropped and reported", "[passes]") {
  Legality whole(Decomposed("float[4]", 4, "float[1,4]", 4), "sqrt", 17);
  REQUIRE(whole.match.beta_add != nullptr);
  CHECK_FALSE(whole.Check("sqrt", 17));
  CHECK(whole.match.output == whole.ValueNamed("y"));
  CHECK(whole.statistics.rejections.empty());

  Legality gamma(Decomposed("float[2,4]", 8, "float[2,4]", 8), "sqrt", 17);
  CHECK_FALSE(gamma.Check("sqrt", 17));
  CHECK(gamma.match.gamma_mul == nullptr);
  CHECK(gamma.match.beta_add == nullptr);
  CHECK(gamma.match.output == gamma.ValueNamed("n"));
  CHECK(gamma.match.nodes.size() == 7);
  const auto& rejected = gamma.statistics.rejections;
  REQUIRE(rejected.size() == 1);
  auto it = rejected.find("layernorm: gamma broadcasts over more than the last axis (fused without it)");
  REQUIRE(it != rejected.end());
  CHECK(it->second.examples == std::vector<std::string>{"sqrt"});

  // gamma [1,4] scales rows alike and stays; beta [2,4] goes alone.
  Legality beta(Decomposed("float[1,4]", 4, "float[2,4]", 8), "sqrt", 17);
  CHECK_FALSE(beta.Check("sqrt", 17));
  CHECK(beta.match.gamma_mul == FindNode(*beta.model->graph, "scale"));
  CHECK(beta.match.beta_add == nullptr);
  CHECK(beta.match.output == beta.ValueNamed("g"));
  CHECK(beta.statistics.rejections.count("layernorm: beta broadcasts over more than the last axis (fused without it)"));
}

TEST_CASE("composite legality: a broadcast softmax mask is swapped with x, or refused", "[passes]") {
  Legality swap(kRows, "softmax_swap", 17);
  REQUIRE(swap.match.x == swap.ValueNamed("row"));
  CHECK_FALSE(swap.Check("softmax_swap", 17));
  CHECK(swap.match.x == swap.ValueNamed("full_mask"));  // [2,4]: the scores' shape
  CHECK(swap.match.mask == swap.ValueNamed("row"));

  Legality broadcast(kRows, "softmax_broadcast", 17);
  CHECK(broadcast.Check("softmax_broadcast", 17).reason() == "softmax: the mask broadcasts the scores");
}
