// The rule table behind eliminate-no-ops (passes/cleanup/util/no_op_rules.h), asked directly:
// each rule proves its op passes input 0 through from constants and known shapes only, and a
// near miss of each is not proved.
#include <catch2/catch.hpp>

#include "pass_test_support.h"
#include "passes/cleanup/util/no_op_rules.h"

using namespace fusionopt;
using namespace fusionopt::passes;
using pass_test::FindNode;
using pass_test::ParseInferred;

namespace {

// One `op` node @n reading %x [2,3] (and the constants `inits`), written to %y.
bool PassesThrough(const std::string& node, const std::string& inits = "", const std::string& x = "float[2,3]",
                   const std::string& graph_inputs = "") {
  auto model = ParseInferred(R"(ir_version 8
opset "" 17
graph main ()" + x + " %x" + graph_inputs + R"() -> (float[?,?] %y)
)" + inits + R"({
  %y = )" + node + R"( @n
}
)");
  return PassesInputThrough(*FindNode(*model->graph, "n"), *model);
}

}  // namespace

TEST_CASE("no-op rules: Reshape, Expand, Tile, Slice and Pad that provably do nothing", "[passes]") {
  CHECK(PassesThrough("Reshape(%x, %shape)", "  init int64[2] %shape = [2, 3]\n"));
  CHECK(PassesThrough("Reshape(%x, %shape)", "  init int64[2] %shape = [0, -1]\n"));
  CHECK_FALSE(PassesThrough("Reshape(%x, %shape)", "  init int64[2] %shape = [3, 2]\n"));
  CHECK(PassesThrough("Expand(%x, %shape)", "  init int64[1] %shape = [1]\n"));
  CHECK_FALSE(PassesThrough("Expand(%x, %shape)", "  init int64[3] %shape = [2, 2, 3]\n"));
  CHECK(PassesThrough("Tile(%x, %repeats)", "  init int64[2] %repeats = [1, 1]\n"));
  CHECK_FALSE(PassesThrough("Tile(%x, %repeats)", "  init int64[2] %repeats = [1, 2]\n"));
  CHECK(PassesThrough("Slice(%x, %starts, %ends)", "  init int64[1] %starts = [0]\n  init int64[1] %ends = [3]\n"));
  CHECK_FALSE(PassesThrough("Slice(%x, %starts, %ends)", "  init int64[1] %starts = [1]\n  init int64[1] %ends = [3]\n"));
  CHECK(PassesThrough("Pad(%x, %pads)", "  init int64[4] %pads = [0, 0, 0, 0]\n"));
  CHECK_FALSE(PassesThrough("Pad(%x, %pads)", "  init int64[4] %pads = [0, 1, 0, 0]\n"));
}

TEST_CASE("no-op rules: a target a feed may replace proves nothing", "[passes]") {
  // The same [2,3] target, but also a graph input of an IR 8 model: a feed may change it.
  CHECK_FALSE(PassesThrough("Reshape(%x, %shape)", "  init int64[2] %shape = [2, 3]\n", "float[2,3]",
                            ", int64[2] %shape"));
}

TEST_CASE("no-op rules: shapes that are not known prove nothing", "[passes]") {
  CHECK_FALSE(PassesThrough("Reshape(%x, %shape)", "  init int64[2] %shape = [2, 3]\n", "float[N,3]"));
  CHECK(PassesThrough("Identity(%x)", "", "float[N,3]"));
}
