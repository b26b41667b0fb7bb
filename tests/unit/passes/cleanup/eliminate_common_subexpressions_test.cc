// eliminate-common-subexpressions: duplicates merged (nodes, Constant nodes, initializers),
// and what must never merge.
#include <catch2/catch.hpp>

#include "pass_harness.h"
#include "passes/cleanup/eliminate_common_subexpressions.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::ExpectRewrite;
using pass_test::ExpectUnchanged;

namespace {

std::string Text(const std::string& signature, const std::string& body, const std::string& inits = "",
                 int ir_version = 8) {
  return "ir_version " + std::to_string(ir_version) + "\nopset \"\" 17\ngraph g (" + signature + ")\n" + inits +
         "{\n" + body + "\n}\n";
}

constexpr const char* kPass = "eliminate-common-subexpressions";
// Merging reorders no arithmetic: the same bits.
const pass_test::Check kExact{.numbers = pass_test::BitForBit()};

}  // namespace

TEST_CASE("eliminate-common-subexpressions merges a shape chain computed twice", "[passes]") {
  // Two Shape → Gather → Unsqueeze chains (PyTorch's export of x.size(0) twice), with equal
  // Constant nodes spelled differently: each step merges because the one before did.
  std::string before = Text("float[N,64] %x) -> (int64[2] %y",
                            "  %s1 = Shape(%x) @s1\n  %i1 = Constant() {value: tensor int64[] [0]} @i1\n"
                            "  %g1 = Gather(%s1, %i1) {axis: 0} @g1\n  %u1 = Unsqueeze(%g1, %axes)\n"
                            "  %s2 = Shape(%x) @s2\n  %i2 = Constant() {value_int: 0} @i2\n"
                            "  %g2 = Gather(%s2, %i2) {axis: 0} @g2\n  %u2 = Unsqueeze(%g2, %axes)\n"
                            "  %y = Concat(%u1, %u2) {axis: 0}",
                            "  init int64[1] %axes = [0]\n");
  auto outcome = ExpectRewrite(before, kPass,
                               Text("float[N,64] %x) -> (int64[2] %y",
                                    "  %s1 = Shape(%x) @s1\n"
                                    "  %i1 = Constant() {value: tensor int64[] [0]} @i1\n"
                                    "  %g1 = Gather(%s1, %i1) {axis: 0} @g1\n  %u1 = Unsqueeze(%g1, %axes)\n"
                                    "  %y = Concat(%u1, %u1) {axis: 0}",
                                    "  init int64[1] %axes = [0]\n"),
                               kExact);
  CHECK(outcome.Counter("nodes_merged") == 3);
  CHECK(outcome.Counter("constants_merged") == 1);
}

TEST_CASE("eliminate-common-subexpressions compares attributes by value in any order", "[passes]") {
  std::string before = Text("float[2,3] %a, float[4,3] %b) -> (float[2,4] %y, float[2,4] %z",
                            "  %g1 = Gemm(%a, %b) {alpha: 2.0, transB: 1}\n"
                            "  %g2 = Gemm(%a, %b) {transB: 1, alpha: 2.0}\n"
                            "  %g3 = Gemm(%a, %b) {transB: 1, alpha: 3.0}\n"
                            "  %y = Add(%g1, %g2)\n  %z = Sub(%g2, %g3)");
  ExpectRewrite(before, kPass,
                Text("float[2,3] %a, float[4,3] %b) -> (float[2,4] %y, float[2,4] %z",
                     "  %g1 = Gemm(%a, %b) {alpha: 2.0, transB: 1}\n"
                     "  %g3 = Gemm(%a, %b) {transB: 1, alpha: 3.0}\n"
                     "  %y = Add(%g1, %g1)\n  %z = Sub(%g1, %g3)"),
                kExact);
}

TEST_CASE("eliminate-common-subexpressions merges constants with initializers of equal content", "[passes]") {
  std::string before = Text("float[2] %x) -> (float[2] %y",
                            "  %c = Constant() {value: tensor float[2] [1.0, 2.0]}\n  %a = Add(%x, %c)\n"
                            "  %m = Mul(%x, %w2)\n  %y = Sub(%a, %m)",
                            "  init float[2] %w = [1.0, 2.0]\n  init float[2] %w2 = [1.0, 2.0]\n");
  auto outcome =
      ExpectRewrite(before, kPass,
                    Text("float[2] %x) -> (float[2] %y", "  %a = Add(%x, %w)\n  %m = Mul(%x, %w)\n  %y = Sub(%a, %m)",
                         "  init float[2] %w = [1.0, 2.0]\n"),
                    kExact);
  CHECK(outcome.Counter("initializers_merged") == 1);
  CHECK(outcome.Counter("constants_merged") == 1);

  SECTION("an initializer a caller can feed is no constant") {
    ExpectUnchanged(Text("float[2] %x, float[2] %w2) -> (float[2] %y",
                         "  %a = Add(%x, %w)\n  %m = Add(%x, %w2)\n  %y = Sub(%a, %m)",
                         "  init float[2] %w = [1.0, 2.0]\n  init float[2] %w2 = [1.0, 2.0]\n"),
                    kPass);
  }
  SECTION("before IR version 4 it is one") {
    std::string old = Text("float[2] %x, float[2] %w2) -> (float[2] %y",
                           "  %a = Add(%x, %w)\n  %m = Add(%x, %w2)\n  %y = Sub(%a, %m)",
                           "  init float[2] %w = [1.0, 2.0]\n  init float[2] %w2 = [1.0, 2.0]\n", 3);
    // The pipeline moves an IR 3 model it changed to IR 4, where an initializer is no input: the
    // merged-away %w2 goes with its listing.
    ExpectRewrite(old, kPass,
                  Text("float[2] %x) -> (float[2] %y", "  %a = Add(%x, %w)\n  %y = Sub(%a, %a)",
                       "  init float[2] %w = [1.0, 2.0]\n", 4),
                  kExact);
  }
  SECTION("same bytes, other dims or dtype are other constants") {
    ExpectUnchanged(Text("float[2] %x) -> (float[2] %y, float[1,2] %z, int32[2] %i",
                         "  %y = Add(%x, %w)\n  %z = Add(%x, %row)\n  %i = Add(%n, %n)",
                         "  init float[2] %w = [1.0, 2.0]\n  init float[1,2] %row = [1.0, 2.0]\n"
                         "  init int32[2] %n = [1065353216, 1073741824]\n"),
                    kPass);
  }
}

TEST_CASE("eliminate-common-subexpressions keeps graph outputs distinct", "[passes]") {
  SECTION("a duplicate writing a graph output takes the kept node's place") {
    std::string before = Text("float[2] %x) -> (float[2] %b, float[2] %z",
                              "  %a = Relu(%x) @first\n  %n = Neg(%a)\n  %b = Relu(%x) @second\n  %z = Add(%n, %b)");
    ExpectRewrite(
        before, kPass,
        Text("float[2] %x) -> (float[2] %b, float[2] %z", "  %b = Relu(%x) @first\n  %n = Neg(%b)\n  %z = Add(%n, %b)"),
        kExact);
  }
  SECTION("two graph outputs never become one value") {
    auto outcome =
        ExpectUnchanged(Text("float[2] %x) -> (float[2] %a, float[2] %b", "  %a = Relu(%x)\n  %b = Relu(%x)"), kPass);
    CHECK(outcome.Rejections("graph output cannot move to the kept value") == 1);
  }
  SECTION("a Constant writing a graph output cannot become an initializer") {
    auto outcome = ExpectUnchanged(Text("float[2] %x) -> (float[2] %c, float[2] %y",
                                        "  %c = Constant() {value: tensor float[2] [1.0, 2.0]}\n  %y = Add(%x, %w)",
                                        "  init float[2] %w = [1.0, 2.0]\n"),
                                   kPass);
    CHECK(outcome.Rejections("graph output cannot move to the kept value") == 1);
  }
}

TEST_CASE("eliminate-common-subexpressions never merges impure ops or subgraphs", "[passes]") {
  SECTION("random ops") {
    auto outcome = ExpectUnchanged(Text("float[2] %x) -> (float[2] %y",
                                        "  %a = RandomNormalLike(%x) {seed: 1.0}\n"
                                        "  %b = RandomNormalLike(%x) {seed: 1.0}\n"
                                        "  %y = Sub(%a, %b)"),
                                   kPass);
    CHECK(outcome.Rejections("impure op") == 1);
  }
  SECTION("training Dropout") {
    ExpectUnchanged(
        Text("float[2] %x) -> (float[2] %y", "  %a = Dropout(%x, , %on)\n  %b = Dropout(%x, , %on)\n  %y = Sub(%a, %b)",
             "  init bool[] %on = [1]\n"),
        kPass);
  }
  SECTION("other domains") {
    std::string custom = "ir_version 8\nopset \"\" 17\nopset \"com.example\" 1\ngraph g (float[2] %x) -> (%y) {\n"
                         "  %a = com.example::Tick(%x)\n  %b = com.example::Tick(%x)\n  %y = Sub(%a, %b)\n}\n";
    ExpectUnchanged(custom, kPass);
  }
  SECTION("nodes holding subgraphs") {
    std::string branch = "{then_branch: graph t () -> (float[2] %o) {\n    %o = Neg(%x)\n  }, "
                         "else_branch: graph e () -> (float[2] %p) {\n    %p = Abs(%x)\n  }}";
    ExpectUnchanged(Text("bool[] %c, float[2] %x) -> (float[2] %y",
                         "  %a = If(%c) " + branch + "\n  %b = If(%c) " +
                             "{then_branch: graph t2 () -> (float[2] %o2) {\n    %o2 = Neg(%x)\n  }, "
                             "else_branch: graph e2 () -> (float[2] %p2) {\n    %p2 = Abs(%x)\n  }}" +
                             "\n  %y = Sub(%a, %b)"),
                    kPass);
  }
  SECTION("different inputs or attributes") {
    ExpectUnchanged(Text("float[2] %x, float[2] %z) -> (float[2] %y",
                         "  %a = Relu(%x)\n  %b = Relu(%z)\n  %c = LeakyRelu(%x) {alpha: 0.1}\n"
                         "  %d = LeakyRelu(%x) {alpha: 0.2}\n  %e = Add(%a, %b)\n  %f = Add(%c, %d)\n"
                         "  %y = Sub(%e, %f)"),
                    kPass);
  }
}

TEST_CASE("eliminate-common-subexpressions merges inside subgraphs", "[passes]") {
  std::string before = Text("bool[] %c, float[2] %x) -> (float[2] %y",
                            "  %y = If(%c) {then_branch: graph t () -> (float[2] %o) {\n"
                            "    %a = Exp(%x)\n    %b = Exp(%x)\n    %o = Add(%a, %b)\n"
                            "  }, else_branch: graph e () -> (float[2] %p) {\n    %p = Exp(%x)\n  }}");
  ExpectRewrite(before, kPass,
                Text("bool[] %c, float[2] %x) -> (float[2] %y",
                     "  %y = If(%c) {then_branch: graph t () -> (float[2] %o) {\n"
                     "    %a = Exp(%x)\n    %o = Add(%a, %a)\n"
                     "  }, else_branch: graph e () -> (float[2] %p) {\n    %p = Exp(%x)\n  }}"),
                kExact);
}

TEST_CASE("eliminate-common-subexpressions rewires readers inside subgraphs", "[passes]") {
  std::string before = Text("bool[] %c, float[2] %x) -> (float[2] %z",
                            "  %a = Relu(%x)\n  %b = Relu(%x)\n"
                            "  %z = If(%c) {then_branch: graph t () -> (float[2] %o) {\n    %o = Neg(%b)\n"
                            "  }, else_branch: graph e () -> (float[2] %p) {\n    %p = Abs(%a)\n  }}");
  ExpectRewrite(before, kPass,
                Text("bool[] %c, float[2] %x) -> (float[2] %z",
                     "  %a = Relu(%x)\n"
                     "  %z = If(%c) {then_branch: graph t () -> (float[2] %o) {\n    %o = Neg(%a)\n"
                     "  }, else_branch: graph e () -> (float[2] %p) {\n    %p = Abs(%a)\n  }}"),
                kExact);
}

TEST_CASE("eliminate-common-subexpressions merges many copies in one pass", "[passes]") {
  // 2000 copies of one two-node chain: each Tanh merges because its Exp merged just before.
  std::string body;
  for (int i = 0; i < 2000; ++i) {
    std::string n = std::to_string(i);
    body += "  %e" + n + " = Exp(%x)\n  %t" + n + " = Tanh(%e" + n + ")\n";
  }
  body += "  %y = Sum(%t0, %t1999)";
  auto outcome = pass_test::Rewrite(Text("float[2] %x) -> (float[2] %y", body), kPass);
  CHECK(outcome.run.statistics.changed);
  CHECK(outcome.Counter("nodes_merged") == 2 * 1999);
  CHECK(outcome.model->graph->num_nodes() == 3);
}
