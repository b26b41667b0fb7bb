#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// merge-reshapes (O1): consecutive layout ops become one.
inline constexpr std::string_view kMergeReshapesRewrite = R"rewrite(
  %t = Transpose(%x) {perm: p}                   %y = Transpose(%x) {perm: q}
  %y = Transpose(%t) {perm: r}            →      q[i] = p[r[i]]; an identity q removes the
                                                 node (readers of %y read %x)
)rewrite";
//   %a = Unsqueeze(%x[N,64], [1])
//   %b = Reshape(%a, [0, 4, 16])            →      %y = Reshape(%x, %y_shape = [0, 4, 16, 1])
//   %y = Unsqueeze(%b, [3])                        (a chain of views is one view)
//
//   %a = Unsqueeze(%m[B,S], [1])            →      %y = Unsqueeze(%m, %y_axes = [1, 2])
//   %y = Unsqueeze(%a, [2])
//
//   %a = Reshape(%x[B,H,S,D], [-1, S, D])         %y = Transpose(%x) {perm: [0, 1, 3, 2]}
//   %t = Transpose(%a) {perm: [0, 2, 1]}    →      (the dynamo exporter's k.transpose(-2, -1)
//   %y = Reshape(%t, [B, H, D, S])                 inside its sdpa decomposition)
//
// Views (Reshape, Flatten, Squeeze, Unsqueeze) keep the element order, so a chain of them is
// one Reshape to the last one's shape. That shape must be known to the last dim, or spelled
// exactly by Reshape's own rules relative to the chain's input: 0 copies the input's dim at
// the same position when it is the same symbol, and one -1 stands for a dim whose every
// other dim is a known positive size. A known 0 dim is never spelled (0 would mean "copy").
// Where Reshape cannot spell the result, a run of Unsqueezes (or of Squeezes) with constant
// axes still becomes one Unsqueeze (Squeeze) with the axes composed — exact whatever the
// dims. The longer of the two merges wins (on a tie, the Unsqueeze/Squeeze). A chain that
// ends in its input's own shape is removed altogether.
//
// A Reshape that merges leading dims into one, a Transpose that keeps that merged dim in place,
// and a Reshape that splits it back are one Transpose of the first Reshape's input: the shapes
// inferred for the three outputs must prove it (every dim but the merged one the same known
// size or symbol as the input dim it is). The new Transpose then merges with a Transpose
// before it like any other.
//
// A Transpose after a Reshape that only groups consecutive axes, after another Transpose, is
// one Transpose and the Reshape: the second perm moves whole groups, so it moves their axes
// in the first Transpose instead (the head merge after attention and the batch-first
// transpose after it, once commute-transposes brought them together):
//
//   %t = Transpose(%x[B,H,S,D]) {perm: [2,0,1,3]}        %t = Transpose(%x) {perm: [0,2,1,3]}
//   %r = Reshape(%t, [S,B,H·D])                    →      %y = Reshape(%t, [0,S,H·D])
//   %y = Transpose(%r) {perm: [1,0,2]}
//
// Only intermediates read by the next op alone and that are no graph output are merged;
// chains never cross into or out of subgraphs. The merged Transpose is the second one
// rewritten in place; a merged view takes the last view's name and output. New shape and
// axes operands are initializers, or Constant nodes before IR version 4 (which requires
// every initializer to be a graph input).
class MergeReshapes : public Pass {
 public:
  std::string_view rewrite() const override { return kMergeReshapesRewrite; }
  std::string_view name() const override { return "merge-reshapes"; }
  std::string_view summary() const override {
    return "merge consecutive Transposes, and Reshape/Squeeze/Unsqueeze/Flatten chains into one view";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
