// fuse-horizontal-elementwise: independent elementwise kernels over one iteration space become
// one multi-output kernel (fused members' bodies inlined into it); different spaces, a path
// between the candidates and the member cap keep kernels apart.
#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "fuse-horizontal-elementwise";

std::string ModelText(const std::string& signature, const std::string& body) {
  return "ir_version 8\nopset \"\" 17\ngraph main (" + signature + ") {\n" + body + "}\n";
}

std::vector<std::string> BodyOps(const fusionopt::Model& model, const Node& call) {
  const Function* function = model.FindFunction(call.domain(), call.op_type());
  REQUIRE(function != nullptr);
  std::vector<std::string> ops;
  for (const auto& node : function->body->nodes()) ops.push_back(node->op_type());
  return ops;
}

}  // namespace

TEST_CASE("fuse-horizontal-elementwise merges independent kernels over one iteration space", "[passes]") {
  const std::string text = ModelText("float[2,3] %x, float[2,3] %y, float[3] %s) -> (float %a, float %b",
                                 "  %a = Sigmoid(%x) @sig\n  %b = Mul(%y, %s) @mul\n");
  auto model = ExpectRewriteOps(text, kPass, {"ai.fusionopt::FusedHorizontal"}).model;
  const Node& fused = *model->graph->nodes().front();
  CHECK(BodyOps(*model, fused) == std::vector<std::string>{"Sigmoid", "Mul"});
  CHECK(fused.outputs().size() == 2);
  CHECK(fused.output(0)->name() == "a");
  CHECK(fused.output(1)->name() == "b");
}

TEST_CASE("fuse-horizontal-elementwise inlines fused members into the merged body", "[passes]") {
  // After fuse-elementwise, each chain is one fused call; the horizontal pass joins the two.
  const std::string text = ModelText("float[B,4] %x, float[B,4] %y) -> (float %a, float %b",
                                 "  %t = Mul(%x, %x) @square\n  %a = Relu(%t) @relu\n"
                                 "  %u = Neg(%y) @neg\n  %b = Exp(%u) @exp\n");
  Rewritten vertical = Rewrite(text, "fuse-elementwise");
  REQUIRE(OpTypes(*vertical.model->graph) ==
          std::vector<std::string>{"ai.fusionopt::FusedElementwise_Mul_Relu", "ai.fusionopt::FusedElementwise_Neg_Exp"});
  PassRun horizontal = RunPass(*vertical.model, kPass);
  CHECK(horizontal.statistics.changed);
  CHECK(horizontal.Counter("kernels_merged") == 2);
  REQUIRE(OpTypes(*vertical.model->graph) == std::vector<std::string>{"ai.fusionopt::FusedHorizontal"});
  CHECK(BodyOps(*vertical.model, *vertical.model->graph->nodes().front()) ==
        std::vector<std::string>{"Mul", "Relu", "Neg", "Exp"});
  ExpectSameOutputs(*vertical.original, *vertical.model, kEveryOpenDimOne, {1e-6, 1e-7});
}

TEST_CASE("fuse-horizontal-elementwise keeps kernels apart when merging is wrong or too wide", "[passes]") {
  // Different iteration spaces.
  ExpectUnchanged(ModelText("float[2,3] %x, float[3,2] %y) -> (float %a, float %b",
                        "  %a = Sigmoid(%x) @sig\n  %b = Relu(%y) @relu\n"),
                  kPass, "");
  // Symbolic dims that may differ.
  ExpectUnchanged(ModelText("float[N,3] %x, float[M,3] %y) -> (float %a, float %b",
                        "  %a = Sigmoid(%x) @sig\n  %b = Relu(%y) @relu\n"),
                  kPass, "");
  // A path from %a through a reduction to %b: one kernel computing both would need its own
  // output first — a cycle.
  ExpectUnchanged(ModelText("float[2,3] %x, float[2,3] %y) -> (float %b",
                        "  %a = Sigmoid(%x) @sig\n  %r = ReduceSum(%a) {keepdims: 1} @sum\n"
                        "  %b = Add(%y, %r) @add\n"),
                  kPass, "");
  // Five candidates, at most four per kernel: four merge, the fifth stays.
  std::string five;
  std::string signature;
  for (int i = 0; i < 5; ++i) {
    signature += (i ? ", " : "") + std::string("float[2,2] %x") + std::to_string(i);
    five += "  %y" + std::to_string(i) + " = Relu(%x" + std::to_string(i) + ") @relu" + std::to_string(i) + "\n";
  }
  signature += ") -> (float %y0, float %y1, float %y2, float %y3, float %y4";
  ExpectRewriteOps(ModelText(signature, five), kPass, {"ai.fusionopt::FusedHorizontal", "Relu"});
  ExpectRewriteOps(ModelText(signature, five), kPass,
                   {"ai.fusionopt::FusedHorizontal", "ai.fusionopt::FusedHorizontal_1"},
                   {.options = {{"max_members", "3"}}});
}
