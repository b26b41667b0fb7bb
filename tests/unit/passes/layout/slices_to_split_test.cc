// slices-to-split: constant Slices that tile one axis of a value become one Split with the
// pieces' sizes (TorchScript's chunk, ultralytics' C2f), with the same numbers — negative and
// clamped bounds and pieces in any order included; pieces with a gap, an overlap, a step, or
// a dim not known stay Slices.
#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "slices-to-split";

// %x [1,8,3] sliced along axis 1 by `slices` (reading %x), the pieces summed into %y by `tail`.
std::string Sliced(const std::string& slices, const std::string& tail, const std::string& x_type = "float[1,8,3]") {
  return "ir_version 8\nopset \"\" 17\ngraph main (" + x_type + R"( %x) -> (float %y)
  init int64[1] %zero = [0]
  init int64[1] %two = [2]
  init int64[1] %three = [3]
  init int64[1] %five = [5]
  init int64[1] %eight = [8]
  init int64[1] %minus_three = [-3]
  init int64[1] %big = [9223372036854775807]
  init int64[1] %axis1 = [1]
  init int64[1] %step2 = [2]
{
)" + slices + tail + "}\n";
}

}  // namespace

TEST_CASE("slices-to-split: Slices that tile the axis become one Split", "[passes]") {
  // Out of order, one from the end and one clamped past it: [0,2) [5,8) [2,5).
  const std::string slices = R"(  %a = Slice(%x, %zero, %two, %axis1) @first
  %c = Slice(%x, %minus_three, %big, %axis1) @last
  %b = Slice(%x, %two, %five, %axis1) @middle
)";
  const std::string tail = "  %s = Concat(%a, %b) {axis: 1} @join\n  %y = Concat(%s, %c) {axis: 1} @concat\n";
  auto model = ExpectRewriteOps(Sliced(slices, tail), kPass, {"Split", "Concat", "Concat"}).model;
  const Node& split = *model->graph->nodes().front();
  CHECK(split.GetInt("axis", -1) == 1);
  auto sizes = split.input(1)->initializer()->AsInt64s();
  REQUIRE(sizes);
  CHECK(*sizes == std::vector<int64_t>{2, 3, 3});
  CHECK(split.output(0)->name() == "a");
  CHECK(split.output(1)->name() == "b");
  CHECK(split.output(2)->name() == "c");
  CHECK(Rewrite(Sliced(slices, tail), kPass).Counter("slices_merged") == 3);
}

TEST_CASE("slices-to-split: a gap, an overlap, a step or an unknown dim leave the Slices", "[passes]") {
  const std::string tail = "  %y = Concat(%a, %b) {axis: 1} @join\n";
  // [0,2) and [5,8): a gap.
  ExpectUnchanged(Sliced("  %a = Slice(%x, %zero, %two, %axis1) @first\n  %b = Slice(%x, %five, %eight, %axis1) @second\n", tail),
                  kPass, "the Slices of its input leave a gap or overlap along the axis");
  // [0,5) and [2,8): an overlap.
  ExpectUnchanged(Sliced("  %a = Slice(%x, %zero, %five, %axis1) @first\n  %b = Slice(%x, %two, %eight, %axis1) @second\n", tail),
                  kPass, "the Slices of its input leave a gap or overlap along the axis");
  // A step of 2: every other channel, no piece of a tiling.
  ExpectUnchanged(Sliced("  %a = Slice(%x, %zero, %eight, %axis1, %step2) @first\n  %b = Slice(%x, %zero, %two, %axis1) @second\n", tail),
                  kPass, "");
  // The axis's dim is not known: whether [0,2) [2,8) covers it cannot be told.
  ExpectUnchanged(Sliced("  %a = Slice(%x, %zero, %two, %axis1) @first\n  %b = Slice(%x, %two, %eight, %axis1) @second\n", tail,
                         "float[1,C,3]"),
                  kPass, "");
}
