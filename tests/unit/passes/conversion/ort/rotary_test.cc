// lower-for-ort, rotary (passes/conversion/ort/rotary.cc): a rotary table qualifies for
// RotaryEmbedding's half-row caches only when its halves are equal by construction. The rotary
// written around MultiHeadAttention, on every exporter form, and ORT's numbers:
// tests/python/test_runtime_ort.py.
#include <catch2/catch.hpp>

#include "ort_test_support.h"
#include "passes/conversion/ort/lower_for_ort.h"
#include "passes/conversion/ort/support.h"

namespace fusionopt {
namespace {

using namespace ort_test;
using pass_test::OpTypes;
using pass_test::ParseInferred;

TEST_CASE("lower-for-ort: a rotary table's halves are equal only by construction", "[passes][ort]") {
  // Only Cos(Concat(f, f)) and what elementwise scalar ops and leading Unsqueezes make of it
  // qualifies: RotaryEmbedding reads the first half of each row for both.
  auto model = ParseInferred(Header() + R"(graph main (float[1,4,2] %f, float[1,4,2] %g) -> (float[1,1,4,4] %same, float[1,1,4,4] %scaled, float[1,1,4,4] %different, float[1,4,4,1] %moved)
  init float[] %two = [2.0]
{
  %cat = Concat(%f, %f) {axis: -1} @cat
  %cos = Cos(%cat) @cos
  %same = Unsqueeze(%cos) {axes: [1]} @unsqueeze
  %times = Mul(%two, %cos) @scale
  %scaled = Unsqueeze(%times) {axes: [0]} @unsqueeze_scaled
  %mixed = Concat(%f, %g) {axis: -1} @mixed
  %cos_mixed = Cos(%mixed) @cos_mixed
  %different = Unsqueeze(%cos_mixed) {axes: [1]} @unsqueeze_mixed
  %moved = Unsqueeze(%cos) {axes: [3]} @unsqueeze_last
}
)");
  const Graph& graph = *model->graph;
  auto output = [&](size_t index) { return graph.outputs()[index]; };
  CHECK(passes::ort_lowering::HalvesProvablyEqual(*model, output(0)));
  CHECK(passes::ort_lowering::HalvesProvablyEqual(*model, output(1)));
  CHECK_FALSE(passes::ort_lowering::HalvesProvablyEqual(*model, output(2)));  // Concat(f, g)
  CHECK_FALSE(passes::ort_lowering::HalvesProvablyEqual(*model, output(3)));  // the last axis is new
}

}  // namespace
}  // namespace fusionopt
