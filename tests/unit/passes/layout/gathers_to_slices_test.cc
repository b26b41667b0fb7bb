// gathers-to-slices: a Gather or GatherND of constant consecutive indices becomes a Slice, and a
// Transpose read by Slices alone moves below them (Falcon's fused_qkv[..., [-2], :]), with the
// same numbers; scalar indices, other index lists and a Transpose read elsewhere stay.
#include "pass_harness.h"

using namespace fusionopt;
using namespace fusionopt::pass_test;

namespace {

constexpr const char* kPass = "gathers-to-slices";

std::string Text(const std::string& signature, const std::string& inits, const std::string& body) {
  return "ir_version 8\nopset \"\" 18\ngraph main (" + signature + ")\n" + inits + "{\n" + body + "}\n";
}

}  // namespace

TEST_CASE("gathers-to-slices turns a Gather of consecutive indices into a Slice", "[passes]") {
  const std::string text = Text("float[B,6,4] %x) -> (float[B,2,4] %y", "  init int64[2] %rows = [-3, -2]\n",
                                 "  %y = Gather(%x, %rows) {axis: 1} @pick\n");
  ExpectRewrite(text, kPass, Text("float[B,6,4] %x) -> (float[B,2,4] %y",
                                   "  init int64[1] %y_begin = [3]\n  init int64[1] %y_end = [5]\n"
                                   "  init int64[1] %y_axis = [1]\n",
                                   "  %y = Slice(%x, %y_begin, %y_end, %y_axis) @pick\n"));
}

TEST_CASE("gathers-to-slices: Falcon's key, a GatherND of one head between two Transposes", "[passes]") {
  const std::string text = Text("float[B,3,6,4] %qkv) -> (float[B,1,3,4] %k",
                                 "  init int64[1,1] %key_head = [4]\n",
                                 "  %t = Transpose(%qkv) {perm: [2, 0, 1, 3]} @heads_first\n"
                                 "  %g = GatherND(%t, %key_head) @select\n"
                                 "  %k = Transpose(%g) {perm: [1, 0, 2, 3]} @batch_first\n");
  auto model = ExpectRewriteOps(text, kPass, {"Slice", "Transpose", "Transpose"}).model;
  const std::string printed = PrintGraph(*model->graph);
  INFO(printed);
  CHECK(printed.find("Slice(%qkv,") != std::string::npos);  // the Transpose moved below the Slice
  Rewritten rewritten = Rewrite(text, kPass);
  CHECK(rewritten.Counter("gathers_sliced") == 1);
  CHECK(rewritten.Counter("transposes_below_slices") == 1);
}

TEST_CASE("gathers-to-slices leaves gathers that are no slice and Transposes read elsewhere", "[passes]") {
  SECTION("a scalar index drops the axis") {
    ExpectUnchanged(Text("float[6,4] %x) -> (float[4] %y", "  init int64[] %row = [2]\n",
                          "  %y = Gather(%x, %row) {axis: 0} @pick\n"),
                    kPass, "");
  }
  SECTION("indices out of order") {
    ExpectUnchanged(Text("float[6,4] %x) -> (float[2,4] %y", "  init int64[2] %rows = [3, 2]\n",
                          "  %y = Gather(%x, %rows) {axis: 0} @pick\n"),
                    kPass, "");
  }
  SECTION("indices a caller may feed") {
    ExpectUnchanged(Text("float[6,4] %x, int64[2] %rows) -> (float[2,4] %y", "  init int64[2] %rows = [2, 3]\n",
                          "  %y = Gather(%x, %rows) {axis: 0} @pick\n"),
                    kPass, "");
  }
  SECTION("a GatherND with batch dims") {
    ExpectUnchanged(Text("float[2,6,4] %x) -> (float %y", "  init int64[2,1] %rows = [1, 2]\n",
                          "  %y = GatherND(%x, %rows) {batch_dims: 1} @pick\n"),
                    kPass, "");
  }
  SECTION("a Slice of a Transpose read by anything but a Transpose (Phi's partial rotary)") {
    ExpectUnchanged(Text("float[2,6,4] %x, int64[1] %b, int64[1] %e) -> (float %y", "",
                         "  %t = Transpose(%x) {perm: [1, 0, 2]} @heads_first\n"
                         "  %s = Slice(%t, %b, %e) @rotary_part\n"
                         "  %y = Neg(%s) @turn\n"),
                    kPass, "");
  }
  SECTION("a Transpose also read by another op") {
    ExpectUnchanged(Text("float[2,6,4] %x, int64[1] %b, int64[1] %e) -> (float %y, float %z", "",
                          "  %t = Transpose(%x) {perm: [1, 0, 2]} @move\n"
                          "  %s = Slice(%t, %b, %e) @piece\n"
                          "  %y = Transpose(%s) {perm: [1, 0, 2]} @back\n"
                          "  %z = Relu(%t) @other\n"),
                    kPass, "");
  }
}
