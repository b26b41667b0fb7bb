// eliminate-no-ops: IR text before → after, the same numbers, and the ops that only look like
// no-ops left alone.
#include <catch2/catch.hpp>

#include "pass_harness.h"
#include "passes/cleanup/eliminate_no_ops.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using namespace fusionopt::pass_test;

namespace {

// A one-graph model: `signature` is "inputs) -> (outputs", `inits` whole `init` lines.
std::string Text(int opset, const std::string& signature, const std::string& body, const std::string& inits = "") {
  return "ir_version 8\nopset \"\" " + std::to_string(opset) + "\ngraph g (" + signature + ")\n" + inits + "{\n" +
         body + "\n}\n";
}

constexpr const char* kPass = "eliminate-no-ops";

// The pass turns `before` into `after`, removing `removed` nodes, with the same bits out.
void ExpectRemoved(const std::string& before, const std::string& after, int64_t removed) {
  auto rewritten = pass_test::ExpectRewrite(before, kPass, after, {.numbers = pass_test::BitForBit()});
  CHECK(rewritten.Counter("nodes_removed") == removed);
}

// The pass leaves `text` as it is. Unless `output_kept` says a no-op stays only because it
// writes a graph output, no rule may have taken any node for a no-op.
pass_test::PassRun ExpectKept(const std::string& text, bool output_kept = false) {
  pass_test::PassRun run = pass_test::ExpectUnchanged(text, kPass);
  CHECK((run.Rejections("output is a graph output") > 0) == output_kept);
  return run;
}

const std::string kMax = "9223372036854775807";

}  // namespace

TEST_CASE("eliminate-no-ops removes Identity, inference Dropout, same-type Cast and identity Transpose",
          "[passes]") {
  std::string before = Text(17, "float[2,3] %x) -> (float[2,3] %y",
                            "  %a = Identity(%x)\n"
                            "  %b = Dropout(%a, %ratio, %training)\n"
                            "  %c = Cast(%b) {to: 1}\n"
                            "  %d = CastLike(%c, %x)\n"
                            "  %e = Transpose(%d) {perm: [0, 1]}\n"
                            "  %y = Relu(%e)",
                            "  init float[] %ratio = [0.5]\n  init bool[] %training = [0]\n");
  ExpectRemoved(before, Text(17, "float[2,3] %x) -> (float[2,3] %y", "  %y = Relu(%x)"), 5);
}

TEST_CASE("eliminate-no-ops removes Reshape to a target the exporters' Concat chain spells as the input's shape",
          "[passes]") {
  // BLOOM's view of the scores back to [B,H,S,-1], once they are 4-D already: B read from the
  // input's own Shape, -1 the dim left over.
  const std::string inits = "  init int64[1] %minus_one = [-1]\n  init int64[1] %eight = [8]\n";
  const std::string signature = "float[N,S,8] %x, float[M,S] %other) -> (float[N,S,8] %y";
  ExpectRemoved(Text(17, signature,
                     "  %n = Shape(%x) {start: 0, end: 1}\n  %t = Concat(%n, %minus_one, %eight) {axis: 0}\n"
                     "  %v = Reshape(%x, %t)\n  %y = Relu(%v)",
                     inits),
                Text(17, signature, "  %y = Relu(%x)"), 1);
  SECTION("the dim of another value proves nothing") {
    ExpectKept(Text(17, "float[N,S,8] %x, float[M,S] %other) -> (%y",
                    "  %n = Shape(%other) {start: 0, end: 1}\n  %t = Concat(%n, %minus_one, %eight) {axis: 0}\n"
                    "  %y = Reshape(%x, %t)",
                    inits));
  }
  SECTION("two dims left over") {
    ExpectKept(Text(17, "float[N,S,8] %x) -> (%y",
                    "  %t = Concat(%minus_one, %minus_one, %eight) {axis: 0}\n  %y = Reshape(%x, %t)", inits));
  }
}

TEST_CASE("eliminate-no-ops keeps what only looks like a no-op", "[passes]") {
  SECTION("training Dropout draws a mask") {
    auto outcome = ExpectKept(Text(17, "float[2,3] %x) -> (float[2,3] %y", "  %a = Dropout(%x, , %on)\n  %y = Relu(%a)",
                                   "  init bool[] %on = [1]\n"));
    CHECK(outcome.Rejections("training-mode Dropout") == 1);
  }
  SECTION("a Dropout whose mask is read") {
    auto outcome = ExpectKept(Text(17, "float[2,3] %x) -> (float[2,3] %y, bool[2,3] %m", "  %y, %m = Dropout(%x)"));
    CHECK(outcome.Rejections("another output is read") == 1);
  }
  SECTION("a Cast to another type, a real Transpose") {
    ExpectKept(Text(17, "float[2,3] %x) -> (int32[2,3] %y, float[3,2] %t",
                    "  %y = Cast(%x) {to: 6}\n  %t = Transpose(%x) {perm: [1, 0]}"));
  }
  SECTION("a Transpose without perm reverses a matrix") {
    ExpectKept(Text(17, "float[2,3] %x) -> (float[3,2] %t", "  %t = Transpose(%x)"));
  }
}

TEST_CASE("eliminate-no-ops keeps graph-output names", "[passes]") {
  SECTION("the input's producer takes over the graph output") {
    std::string before = Text(17, "float[2,3] %x) -> (float[2,3] %y, float[2,3] %z",
                              "  %t = Relu(%x) @relu\n  %y = Identity(%t)\n  %z = Neg(%t)");
    ExpectRemoved(before,
                  Text(17, "float[2,3] %x) -> (float[2,3] %y, float[2,3] %z", "  %y = Relu(%x) @relu\n  %z = Neg(%y)"),
                  1);
  }
  SECTION("a graph input passed through to a graph output stays") {
    auto outcome = ExpectKept(Text(17, "float[2,3] %x) -> (float[2,3] %y", "  %y = Identity(%x)"), true);
    CHECK(outcome.Rejections("output is a graph output") == 1);
  }
  SECTION("an initializer passed through to a graph output stays") {
    ExpectKept(Text(17, ") -> (float[2] %y", "  %y = Identity(%w)", "  init float[2] %w = [1.0, 2.0]\n"), true);
  }
  SECTION("a value that is itself a graph output stays distinct") {
    ExpectKept(Text(17, "float[2,3] %x) -> (float[2,3] %t, float[2,3] %y", "  %t = Relu(%x)\n  %y = Identity(%t)"),
               true);
  }
}

TEST_CASE("eliminate-no-ops removes Reshape to the input's own shape", "[passes]") {
  std::string inits = "  init int64[2] %copy = [0, 64]\n  init int64[2] %infer = [-1, 64]\n";
  std::string before = Text(17, "float[N,64] %x) -> (float[N,64] %y",
                            "  %a = Reshape(%x, %copy)\n  %b = Reshape(%a, %infer)\n  %y = Relu(%b)", inits);
  ExpectRemoved(before, Text(17, "float[N,64] %x) -> (float[N,64] %y", "  %y = Relu(%x)"), 2);

  SECTION("other shapes stay, and so does allowzero's 0, which means size 0") {
    ExpectKept(Text(17, "float[N,S] %x) -> (%y, %z", "  %y = Reshape(%x, %flat)\n  %z = Reshape(%x, %row)",
                    "  init int64[1] %flat = [-1]\n  init int64[2] %row = [1, -1]\n"));
    ExpectKept(Text(17, "float[N,64] %x) -> (%y", "  %y = Reshape(%x, %copy) {allowzero: 1}",
                    "  init int64[2] %copy = [0, 64]\n"));
  }
  SECTION("a shape callers can override is not a constant") {
    ExpectKept(Text(17, "float[N,64] %x, int64[2] %shape) -> (%y", "  %y = Reshape(%x, %shape)",
                    "  init int64[2] %shape = [0, 64]\n"));
  }
}

TEST_CASE("eliminate-no-ops removes Expand, Tile, Flatten and Squeeze that keep the shape", "[passes]") {
  std::string before = Text(17, "float[N,64] %x) -> (float[N,64] %y",
                            "  %a = Expand(%x, %one)\n  %b = Tile(%a, %ones)\n  %y = Relu(%b)",
                            "  init int64[1] %one = [1]\n  init int64[2] %ones = [1, 1]\n");
  ExpectRemoved(before, Text(17, "float[N,64] %x) -> (float[N,64] %y", "  %y = Relu(%x)"), 2);

  std::string known = Text(13, "float[6,4] %x) -> (float[6,4] %y",
                           "  %a = Flatten(%x) {axis: 1}\n  %b = Squeeze(%a)\n  %y = Neg(%b)");
  ExpectRemoved(known, Text(13, "float[6,4] %x) -> (float[6,4] %y", "  %y = Neg(%x)"), 2);

  SECTION("Expand that adds a dim or broadcasts, Tile that repeats, Squeeze of a 1 or maybe-1 stay") {
    ExpectKept(Text(17, "float[N,64] %x, float[1,64] %r) -> (%y, %z, %t, %s, %u",
                    "  %y = Expand(%x, %three)\n  %z = Expand(%r, %big)\n  %t = Tile(%x, %twice)\n"
                    "  %s = Squeeze(%r)\n  %u = Squeeze(%x)",
                    "  init int64[3] %three = [1, 1, 1]\n  init int64[2] %big = [4, 64]\n"
                    "  init int64[2] %twice = [1, 2]\n"));
  }
}

TEST_CASE("eliminate-no-ops removes Slice covering everything and Pad by zeros", "[passes]") {
  std::string before = Text(17, "float[N,64] %x) -> (float[N,64] %y",
                            "  %a = Slice(%x, %zero, %end, %axes)\n  %b = Slice(%a, %minus, %big)\n"
                            "  %c = Pad(%b, %pads)\n  %y = Relu(%c)",
                            "  init int64[2] %zero = [0, 0]\n  init int64[2] %end = [" + kMax + ", 64]\n"
                            "  init int64[2] %axes = [0, -1]\n  init int64[1] %minus = [-64]\n"
                            "  init int64[1] %big = [1000]\n  init int64[4] %pads = [0, 0, 0, 0]\n");
  // The second Slice keeps [-64, 1000) of axis 0, which is N: all of it only when N <= 64.
  ExpectRemoved(before,
                Text(17, "float[N,64] %x) -> (float[N,64] %y", "  %b = Slice(%x, %minus, %big)\n  %y = Relu(%b)",
                     "  init int64[1] %minus = [-64]\n  init int64[1] %big = [1000]\n"),
                2);

  SECTION("the same bounds on a known dim cover it") {
    std::string known = Text(17, "float[64,8] %x) -> (float[64,8] %y", "  %a = Slice(%x, %minus, %big)\n  %y = Neg(%a)",
                             "  init int64[1] %minus = [-64]\n  init int64[1] %big = [1000]\n");
    ExpectRemoved(known, Text(17, "float[64,8] %x) -> (float[64,8] %y", "  %y = Neg(%x)"), 1);
  }
  SECTION("legacy Slice (opset 9) reads its attributes") {
    std::string legacy = Text(9, "float[4,8] %x) -> (float[4,8] %y",
                              "  %a = Slice(%x) {starts: [0], ends: [" + kMax + "], axes: [1]}\n  %y = Neg(%a)");
    ExpectRemoved(legacy, Text(9, "float[4,8] %x) -> (float[4,8] %y", "  %y = Neg(%x)"), 1);
  }
  SECTION("a step, a start, a short end, real pads, pads from an input stay") {
    ExpectKept(Text(17, "float[4,8] %x, int64[4] %p) -> (%a, %b, %c, %d, %e",
                    "  %a = Slice(%x, %zero, %end, %axis, %back)\n  %b = Slice(%x, %one, %end, %axis)\n"
                    "  %c = Slice(%x, %zero, %seven, %axis)\n  %d = Pad(%x, %pads)\n  %e = Pad(%x, %p)",
                    "  init int64[1] %zero = [0]\n  init int64[1] %one = [1]\n  init int64[1] %end = [" + kMax +
                        "]\n  init int64[1] %seven = [7]\n  init int64[1] %axis = [1]\n"
                        "  init int64[1] %back = [-1]\n  init int64[4] %pads = [0, 1, 0, 0]\n"));
  }
}

TEST_CASE("eliminate-no-ops removes one-input Concat and Sum, one-output Split, unit Resize", "[passes]") {
  std::string before = Text(17, "float[1,2,4,4] %x) -> (float[1,2,4,4] %y",
                            "  %a = Concat(%x) {axis: 1}\n  %b = Sum(%a)\n  %c = Split(%b) {axis: 1}\n"
                            "  %d = Resize(%c, , %unit) {mode: \"linear\"}\n  %y = Relu(%d)",
                            "  init float[4] %unit = [1.0, 1.0, 1.0, 1.0]\n");
  ExpectRemoved(before, Text(17, "float[1,2,4,4] %x) -> (float[1,2,4,4] %y", "  %y = Relu(%x)"), 4);

  SECTION("Resize that scales or crops stays, and so does a two-way Split") {
    ExpectKept(Text(17, "float[1,2,4,4] %x) -> (%a, %b, %s1, %s2",
                    "  %a = Resize(%x, , %double) {mode: \"nearest\"}\n"
                    "  %b = Resize(%x, %roi, %unit) {coordinate_transformation_mode: \"tf_crop_and_resize\"}\n"
                    "  %s1, %s2 = Split(%x) {axis: 1}",
                    "  init float[4] %double = [1.0, 1.0, 2.0, 2.0]\n"
                    "  init float[4] %unit = [1.0, 1.0, 1.0, 1.0]\n"
                    "  init float[8] %roi = [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.5, 0.5]\n"));
  }
}

TEST_CASE("eliminate-no-ops works inside subgraphs and leaves other domains alone", "[passes]") {
  std::string before = Text(17, "bool[] %c, float[2] %x) -> (float[2] %y",
                            "  %y = If(%c) {then_branch: graph t () -> (float[2] %o1) {\n"
                            "    %n = Neg(%x)\n    %o1 = Identity(%n)\n"
                            "  }, else_branch: graph e () -> (float[2] %o2) {\n"
                            "    %o2 = Identity(%x)\n"
                            "  }}");
  std::string after = Text(17, "bool[] %c, float[2] %x) -> (float[2] %y",
                           "  %y = If(%c) {then_branch: graph t () -> (float[2] %o1) {\n"
                           "    %o1 = Neg(%x)\n"
                           "  }, else_branch: graph e () -> (float[2] %o2) {\n"
                           "    %o2 = Identity(%x)\n"
                           "  }}");
  ExpectRemoved(before, after, 1);

  // A graph-output name moving to the producer takes the subgraph readers along.
  std::string nested = Text(17, "bool[] %c, float[2] %x) -> (float[2] %y, float[2] %z",
                            "  %t = Relu(%x)\n  %y = Identity(%t)\n"
                            "  %z = If(%c) {then_branch: graph t () -> (float[2] %o) {\n    %o = Neg(%t)\n"
                            "  }, else_branch: graph e () -> (float[2] %p) {\n    %p = Abs(%y)\n  }}");
  ExpectRemoved(nested,
                Text(17, "bool[] %c, float[2] %x) -> (float[2] %y, float[2] %z",
                     "  %y = Relu(%x)\n"
                     "  %z = If(%c) {then_branch: graph t () -> (float[2] %o) {\n    %o = Neg(%y)\n"
                     "  }, else_branch: graph e () -> (float[2] %p) {\n    %p = Abs(%y)\n  }}"),
                1);

  std::string custom = "ir_version 8\nopset \"\" 17\nopset \"com.example\" 1\n"
                       "graph g (float[2] %x) -> (float[2] %y) {\n"
                       "  %a = com.example::Identity(%x)\n  %y = Neg(%a)\n}\n";
  ExpectKept(custom);
}
