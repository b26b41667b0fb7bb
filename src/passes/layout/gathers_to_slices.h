#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// gathers-to-slices (O1): indexing by a constant list of consecutive indices takes a slice, so it
// becomes the Slice every later pass reads; a Transpose read by Slices alone moves below them, so
// the Slices meet the value the Transpose reads (its split into pieces, its layout ops). Falcon's
// multi-query K and V, `fused_qkv[..., [-2], :]`, as the dynamo exporter writes it:
inline constexpr std::string_view kGathersToSlicesRewrite = R"rewrite(
  %t = Transpose(%qkv[B,S,H+2,D]) {perm: [2,0,1,3]}       %s = Slice(%qkv, [H], [H+1], [2])
  %g = GatherND(%t, [[H]])                          →      %g = Transpose(%s) {perm: [2,0,1,3]}
  %k = Transpose(%g) {perm: [1,0,2,3]}                     %k = Transpose(%g) {perm: [1,0,2,3]}
                                                           (merge-reshapes composes the two, and
                                                           slices-to-split joins Q's Slice)
)rewrite";
// A Gather (indices a constant 1-D list) or a GatherND (batch_dims 0, indices a constant [n,1])
// of k, k+1, ..., k+n-1 is Slice(x, [k], [k+n]) on its axis (axis 0 for GatherND): the output is
// the same, the indexed axis keeping its n entries. Negative indices count from the end of a
// known dim. A Transpose (perm p) whose every reader is a Slice with constant bounds read by
// another Transpose alone is gone: each Slice reads its input with its axes a mapped to p[a],
// and a copy of the Transpose follows it, next to the Transpose it composes with. (A Slice read
// by anything else keeps the Transpose above it: Phi's partial rotary splits the heads-first
// value.) Limits: opset 11 on (GatherND's, and Slice's inputs); a scalar index (which drops the axis)
// and any other list of indices stay Gathers; a Transpose with a graph output or another reader
// stays.
class GathersToSlices : public Pass {
 public:
  std::string_view rewrite() const override { return kGathersToSlicesRewrite; }
  std::string_view name() const override { return "gathers-to-slices"; }
  std::string_view summary() const override {
    return "a Gather or GatherND of constant consecutive indices is a Slice, and Slices of a Transpose slice its "
           "input (x[..., [k], :] as the dynamo exporter writes it)";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
