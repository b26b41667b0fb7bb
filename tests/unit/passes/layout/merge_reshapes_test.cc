// merge-reshapes: Transpose pairs composed, view chains merged into one Reshape, and the
// chains that must stay apart.
#include <catch2/catch.hpp>

#include "pass_harness.h"
#include "passes/layout/merge_reshapes.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::ExpectRewrite;

namespace {

std::string Text(int opset, const std::string& signature, const std::string& body, const std::string& inits = "") {
  return "ir_version 8\nopset \"\" " + std::to_string(opset) + "\ngraph g (" + signature + ")\n" + inits + "{\n" +
         body + "\n}\n";
}

constexpr const char* kPass = "merge-reshapes";
// Composing views reorders no arithmetic: the same bits.
const pass_test::Check kExact{.numbers = pass_test::BitForBit()};

// The pass leaves `text` as it is and matched nothing in it.
pass_test::PassRun ExpectKept(const std::string& text) {
  pass_test::PassRun run = pass_test::ExpectUnchanged(text, kPass);
  CHECK(run.statistics.matches == 0);
  return run;
}

}  // namespace

TEST_CASE("merge-reshapes composes two Transposes into one", "[passes]") {
  // x[2,3,4] -perm [1,2,0]-> [3,4,2] -perm [0,2,1]-> [3,2,4]: one Transpose by [1,0,2].
  std::string before = Text(17, "float[2,3,4] %x) -> (float[3,2,4] %y",
                            "  %t = Transpose(%x) {perm: [1, 2, 0]} @first\n"
                            "  %y = Transpose(%t) {perm: [0, 2, 1]} @second");
  auto outcome = ExpectRewrite(
      before, kPass, Text(17, "float[2,3,4] %x) -> (float[3,2,4] %y", "  %y = Transpose(%x) {perm: [1, 0, 2]} @second"),
      kExact);
  CHECK(outcome.Counter("transposes_merged") == 1);

  SECTION("a missing perm is the reversed dims") {
    std::string reversed = Text(17, "float[2,3,4] %x) -> (float[4,2,3] %y",
                                "  %t = Transpose(%x)\n  %y = Transpose(%t) {perm: [0, 2, 1]}");
    ExpectRewrite(reversed, kPass,
                  Text(17, "float[2,3,4] %x) -> (float[4,2,3] %y", "  %y = Transpose(%x) {perm: [2, 0, 1]}"), kExact);
  }
  SECTION("Transposes that cancel disappear") {
    std::string cancel = Text(17, "float[N,3] %x) -> (float[N,3] %y",
                              "  %t = Transpose(%x) {perm: [1, 0]}\n  %u = Transpose(%t) {perm: [1, 0]}\n"
                              "  %y = Relu(%u)");
    auto removed =
        ExpectRewrite(cancel, kPass, Text(17, "float[N,3] %x) -> (float[N,3] %y", "  %y = Relu(%x)"), kExact);
    CHECK(removed.Counter("identity_transposes_removed") == 1);
  }
  SECTION("cancelling Transposes from a graph input to a graph output leave one identity Transpose") {
    std::string cancel = Text(17, "float[2,3] %x) -> (float[2,3] %y",
                              "  %t = Transpose(%x) {perm: [1, 0]}\n  %y = Transpose(%t) {perm: [1, 0]}");
    ExpectRewrite(cancel, kPass, Text(17, "float[2,3] %x) -> (float[2,3] %y", "  %y = Transpose(%x) {perm: [0, 1]}"),
                  kExact);
  }
}

TEST_CASE("merge-reshapes leaves Transposes whose intermediate is needed", "[passes]") {
  SECTION("the intermediate has another reader") {
    ExpectKept(Text(17, "float[2,3] %x) -> (%y, %z",
                    "  %t = Transpose(%x) {perm: [1, 0]}\n  %y = Transpose(%t) {perm: [1, 0]}\n  %z = Neg(%t)"));
  }
  SECTION("the intermediate is a graph output") {
    ExpectKept(Text(17, "float[2,3] %x) -> (%t, %y",
                    "  %t = Transpose(%x) {perm: [1, 0]}\n  %y = Transpose(%t) {perm: [1, 0]}"));
  }
  SECTION("an unknown rank leaves a missing perm unknown") {
    auto outcome = ExpectKept(Text(17, "float %x) -> (%y", "  %t = Transpose(%x)\n  %y = Transpose(%t)"));
    CHECK(outcome.Rejections("perm unknown or malformed") == 1);
  }
}

TEST_CASE("merge-reshapes turns a view chain into one Reshape", "[passes]") {
  SECTION("static shapes") {
    std::string before = Text(17, "float[2,3,4] %x) -> (float[24] %y",
                              "  %a = Reshape(%x, %six_four) @r1\n  %y = Reshape(%a, %flat) @r2",
                              "  init int64[2] %six_four = [6, 4]\n  init int64[1] %flat = [24]\n");
    auto outcome = ExpectRewrite(before, kPass,
                                 Text(17, "float[2,3,4] %x) -> (float[24] %y", "  %y = Reshape(%x, %y_shape) @r2",
                                      "  init int64[1] %y_shape = [24]\n"),
                                 kExact);
    CHECK(outcome.Counter("views_merged") == 2);
  }
  SECTION("before IR version 4 the new shape is a Constant node, not an initializer") {
    std::string before = "ir_version 3\nopset \"\" 9\ngraph g (float[2,3,4] %x) -> (float[24] %y) {\n"
                         "  %s1 = Constant() {value: tensor int64[2] [6, 4]}\n  %a = Reshape(%x, %s1) @r1\n"
                         "  %s2 = Constant() {value: tensor int64[1] [24]}\n  %y = Reshape(%a, %s2) @r2\n}\n";
    // The pipeline then moves the changed model to IR 4; the shape stays the Constant node written.
    ExpectRewrite(before, kPass,
                  "ir_version 4\nopset \"\" 9\ngraph g (float[2,3,4] %x) -> (float[24] %y) {\n"
                  "  %y_shape = Constant() {value: tensor int64[1] [24]} @y_shape\n"
                  "  %y = Reshape(%x, %y_shape) @r2\n}\n",
                  kExact);
  }
  SECTION("a symbolic dim copied with 0, Unsqueeze and Flatten included") {
    std::string before = Text(17, "float[N,64] %x) -> (float[N,4,16,1] %y",
                              "  %a = Unsqueeze(%x, %one) @u1\n  %b = Reshape(%a, %heads) @r\n"
                              "  %c = Unsqueeze(%b, %three) @u2\n  %y = Relu(%c)",
                              "  init int64[1] %one = [1]\n  init int64[3] %heads = [0, 4, 16]\n"
                              "  init int64[1] %three = [3]\n");
    ExpectRewrite(
        before, kPass,
        Text(17, "float[N,64] %x) -> (float[N,4,16,1] %y", "  %c = Reshape(%x, %c_shape) @u2\n  %y = Relu(%c)",
             "  init int64[4] %c_shape = [0, 4, 16, 1]\n"),
        kExact);
  }
  SECTION("one unknown dim beside known sizes becomes -1") {
    std::string before = Text(13, "float[N,S,8] %x) -> (%y",
                              "  %a = Flatten(%x) {axis: 2}\n  %b = Unsqueeze(%a, %zero)\n  %y = Relu(%b)",
                              "  init int64[1] %zero = [0]\n");
    ExpectRewrite(before, kPass,
                  Text(13, "float[N,S,8] %x) -> (%y", "  %b = Reshape(%x, %b_shape)\n  %y = Relu(%b)",
                       "  init int64[3] %b_shape = [1, -1, 8]\n"),
                  kExact);
  }
  SECTION("a chain back to the input's own shape disappears") {
    std::string before = Text(17, "float[N,64] %x) -> (float[N,64] %y",
                              "  %a = Unsqueeze(%x, %one)\n  %b = Squeeze(%a, %one)\n  %y = Relu(%b)",
                              "  init int64[1] %one = [1]\n");
    auto outcome =
        ExpectRewrite(before, kPass, Text(17, "float[N,64] %x) -> (float[N,64] %y", "  %y = Relu(%x)"), kExact);
    CHECK(outcome.Counter("view_chains_removed") == 1);
  }
}

TEST_CASE("merge-reshapes composes runs of Unsqueeze or Squeeze whatever the dims", "[passes]") {
  SECTION("the attention-mask pattern: [B,S] -> [B,1,1,S]") {
    std::string before = Text(17, "float[B,S] %m) -> (%y",
                              "  %a = Unsqueeze(%m, %one) @u1\n  %b = Unsqueeze(%a, %two) @u2\n  %y = Neg(%b)",
                              "  init int64[1] %one = [1]\n  init int64[1] %two = [2]\n");
    ExpectRewrite(before, kPass,
                  Text(17, "float[B,S] %m) -> (%y", "  %b = Unsqueeze(%m, %b_axes) @u2\n  %y = Neg(%b)",
                       "  init int64[2] %b_axes = [1, 2]\n"),
                  kExact);
  }
  SECTION("negative axes count from the end of each result") {
    std::string before = Text(17, "float[B,S] %m) -> (%y",
                              "  %a = Unsqueeze(%m, %last)\n  %b = Unsqueeze(%a, %first)\n  %y = Neg(%b)",
                              "  init int64[1] %last = [-1]\n  init int64[1] %first = [0]\n");
    ExpectRewrite(before, kPass,
                  Text(17, "float[B,S] %m) -> (%y", "  %b = Unsqueeze(%m, %b_axes)\n  %y = Neg(%b)",
                       "  init int64[2] %b_axes = [0, 3]\n"),
                  kExact);
  }
  SECTION("Squeezes with axes attributes (opset 11)") {
    std::string before = Text(11, "float[1,B,1,4] %x) -> (%y",
                              "  %a = Squeeze(%x) {axes: [0]}\n  %b = Squeeze(%a) {axes: [1]}\n  %y = Neg(%b)");
    ExpectRewrite(before, kPass,
                  Text(11, "float[1,B,1,4] %x) -> (%y", "  %b = Squeeze(%x) {axes: [0, 2]}\n  %y = Neg(%b)"), kExact);
  }
  SECTION("axes a caller can override are no constants") {
    ExpectKept(Text(17, "float[B,S] %m, int64[1] %one) -> (%y",
                    "  %a = Unsqueeze(%m, %one)\n  %b = Unsqueeze(%a, %one)\n  %y = Neg(%b)",
                    "  init int64[1] %one = [1]\n"));
  }
}

TEST_CASE("merge-reshapes leaves view chains it cannot merge exactly", "[passes]") {
  std::string inits = "  init int64[1] %zero = [0]\n";
  SECTION("the intermediate has another reader") {
    ExpectKept(Text(17, "float[N,64] %x) -> (%y, %z",
                    "  %a = Unsqueeze(%x, %zero)\n  %y = Unsqueeze(%a, %zero)\n  %z = Neg(%a)", inits));
  }
  SECTION("the intermediate is a graph output") {
    ExpectKept(
        Text(17, "float[N,64] %x) -> (%a, %y", "  %a = Unsqueeze(%x, %zero)\n  %y = Unsqueeze(%a, %zero)", inits));
  }
  SECTION("two symbols Reshape cannot copy from the input") {
    auto outcome =
        ExpectKept(Text(17, "float[N,S] %x) -> (%y", "  %a = Unsqueeze(%x, %zero)\n  %y = Reshape(%a, %copy)",
                        inits + "  init int64[4] %copy = [0, 0, 0, 1]\n"));
    CHECK(outcome.Rejections("merged shape not expressible") == 1);
  }
  SECTION("a known 0 dim, which Reshape would read as copy") {
    auto outcome = ExpectKept(
        Text(17, "float[0,4] %x) -> (%y", "  %a = Unsqueeze(%x, %zero)\n  %y = Flatten(%a) {axis: 1}", inits));
    CHECK(outcome.Rejections("merged shape not expressible") == 1);
  }
  SECTION("opset 4 has no Reshape with a shape input") {
    auto outcome =
        ExpectKept(Text(4, "float[2,3] %x) -> (%y", "  %a = Unsqueeze(%x) {axes: [0]}\n  %y = Flatten(%a) {axis: 1}"));
    CHECK(outcome.Rejections("opset before 5 (Reshape has no shape input)") == 1);
  }
  SECTION("a view reading the chain through its shape input is no link") {
    ExpectKept(Text(17, "int64[2] %x, float[6] %d) -> (%y", "  %a = Reshape(%x, %two)\n  %y = Reshape(%d, %a)",
                    "  init int64[1] %two = [2]\n"));
  }
}

TEST_CASE("merge-reshapes moves a Transpose after a grouping Reshape into the Transpose before it", "[passes]") {
  // The head merge after attention [B,H,S,D] -> [S,B,H*D], then the batch-first transpose.
  std::string before = Text(17, "float[N,2,3,4] %x) -> (float[N,3,8] %y",
                            "  %t = Transpose(%x) {perm: [2, 0, 1, 3]} @merge_heads\n"
                            "  %r = Reshape(%t, %merged) @merge\n"
                            "  %y = Transpose(%r) {perm: [1, 0, 2]} @batch_first",
                            "  init int64[3] %merged = [3, -1, 8]\n");
  auto outcome = ExpectRewrite(before, kPass,
                               Text(17, "float[N,2,3,4] %x) -> (float[N,3,8] %y",
                                    "  %y_transposed = Transpose(%x) {perm: [0, 2, 1, 3]} @merge_heads\n"
                                    "  %y = Reshape(%y_transposed, %y_shape) @batch_first",
                                    "  init int64[3] %y_shape = [0, 3, 8]\n"),
                               kExact);
  CHECK(outcome.Counter("transposes_through_groupings") == 1);
}

TEST_CASE("merge-reshapes moves a Transpose before a splitting Reshape into the Transpose after it", "[passes]") {
  // nn.MultiheadAttention's probe query: batch-first [N,1,8] moved sequence first, split into
  // heads [1,N,2,4] and moved to [N,2,1,4] is the batch-first head split; the unit sequence axis
  // stays where it was rather than moving with N.
  std::string before = Text(17, "float[N,1,8] %x) -> (float[N,2,1,4] %y",
                            "  %t = Transpose(%x) {perm: [1, 0, 2]} @sequence_first\n"
                            "  %r = Reshape(%t, %heads) @split\n"
                            "  %y = Transpose(%r) {perm: [1, 2, 0, 3]} @heads_first",
                            "  init int64[4] %heads = [1, 0, 2, 4]\n");
  auto outcome = ExpectRewrite(before, kPass,
                               Text(17, "float[N,1,8] %x) -> (float[N,2,1,4] %y",
                                    "  %y_split = Reshape(%x, %y_shape) @split\n"
                                    "  %y = Transpose(%y_split) {perm: [0, 2, 1, 3]} @heads_first",
                                    "  init int64[4] %y_shape = [0, 1, 2, 4]\n"),
                               kExact);
  CHECK(outcome.Counter("transposes_through_splittings") == 1);
  SECTION("a Reshape that splits across the moved axes stays") {
    ExpectKept(Text(17, "float[2,3,4] %x) -> (float[4,2,3] %y",
                    "  %t = Transpose(%x) {perm: [1, 0, 2]}\n  %r = Reshape(%t, %shape)\n"
                    "  %y = Transpose(%r) {perm: [2, 0, 1]}",
                    "  init int64[3] %shape = [2, 3, 4]\n"));
  }
}

TEST_CASE("merge-reshapes leaves a Transpose after a Reshape that does not group axes", "[passes]") {
  SECTION("the Reshape splits a dim across groups") {
    ExpectKept(Text(17, "float[4,2,3,5] %x) -> (float[3,4,10] %y",
                    "  %t = Transpose(%x) {perm: [0, 1, 2, 3]}\n  %r = Reshape(%t, %shape)\n"
                    "  %y = Transpose(%r) {perm: [1, 0, 2]}",
                    "  init int64[3] %shape = [4, 3, 10]\n"));
  }
  SECTION("a symbolic dim merged with a known one proves nothing") {
    ExpectKept(Text(17, "float[2,N,3] %x) -> (%y",
                    "  %t = Transpose(%x) {perm: [1, 0, 2]}\n  %r = Reshape(%t, %shape)\n"
                    "  %y = Transpose(%r) {perm: [1, 0]}",
                    "  init int64[2] %shape = [-1, 3]\n"));
  }
}
