#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// sink-views (O1): a Reshape whose output only elementwise ops read moves below them, so the
// elementwise ops meet the contraction that computes their input and the view meets the next
// view (XLA's reshape mover). GPT-2's Conv1D as the dynamo exporter writes it:
inline constexpr std::string_view kSinkViewsRewrite = R"rewrite(
  %h = Gemm(%x2d, %W, %b)                      %h = Gemm(%x2d, %W, %b)
  %v = Reshape(%h, [B,S,3072])                 %g = Gelu(%h)            (the tanh form: 9 ops)
  %g = Gelu(%v)                          →     %v = Reshape(%g, [B,S,3072])
  %y = Reshape(%g, [-1, 3072])                 %y = Reshape(%v, [-1, 3072])   (merge-reshapes then
                                                                               drops the pair)
)rewrite";
// The region is the elementwise ops (standard domain) reachable from the view's output whose
// every input is the view's output, a value computed in the region, or a constant scalar: they
// compute element by element, so they compute the same on the view's input and their results
// are the view of that. Moved only when the region has one result read outside, and either the
// view's input comes from a contraction (whose epilogue fusion then takes the region) or every
// reader of the result is another view (which then merges with the moved one). Limits: Reshape
// only (not Squeeze, Unsqueeze or Flatten), no graph output inside the region, a view read by
// anything but the region stays.
class SinkViews : public Pass {
 public:
  std::string_view rewrite() const override { return kSinkViewsRewrite; }
  std::string_view name() const override { return "sink-views"; }
  std::string_view summary() const override {
    return "a Reshape read only by elementwise ops moves below them, next to the contraction before it or the "
           "view after them";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
