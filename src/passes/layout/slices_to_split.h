#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// slices-to-split (O1): Slices with constant bounds that cut one value into consecutive pieces
// along one axis, covering it exactly, become one Split — the form the dynamo exporter writes
// for `chunk`/`split`, where the TorchScript exporter writes a Slice per piece (ultralytics'
// C2f `cv1(x).chunk(2, 1)`):
inline constexpr std::string_view kSlicesToSplitRewrite = R"rewrite(
  %a = Slice(%x, [0], [4], [1])                %a, %b = Split(%x, [4, 4]) {axis: 1}
  %b = Slice(%x, [4], [8], [1])          →     (%x: [1, 8, H, W])
)rewrite";
// One form for every matcher after it, and one kernel instead of one per piece — none where
// the pieces are contiguous views (unit dims before the axis). Bounds are normalised as Slice
// defines them (negative from the end, clamped to the dim). Limits: steps of 1 only, one axis
// per Slice, the axis's dim known; Slices of the value that do not take part in an exact
// tiling (an overlap, a gap, another axis) stay as they are; a graph output among the pieces
// keeps its name, produced by the Split.
class SlicesToSplit : public Pass {
 public:
  std::string_view rewrite() const override { return kSlicesToSplitRewrite; }
  std::string_view name() const override { return "slices-to-split"; }
  std::string_view summary() const override {
    return "constant Slices of one value that tile one axis exactly become one Split (TorchScript's chunk)";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
