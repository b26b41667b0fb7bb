#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// fuse-horizontal-elementwise (O3): independent elementwise kernels over the same iteration
// space become one kernel with several outputs (DESIGN.md §2, horizontal fusion).
inline constexpr std::string_view kFuseHorizontalElementwiseRewrite = R"rewrite(
  %a = ai.fusionopt::FusedElementwise_Mul_Add(%x, %s)   [B, S, H]      %a, %b = ai.fusionopt::
  %b = Sigmoid(%y)                                      [B, S, H]  →     FusedHorizontal(%x, %s, %y)
                                                                      { Mul, Add, Sigmoid }
)rewrite";
// Candidates, after fuse-elementwise: calls of fused elementwise bodies (every body node an
// elementwise op or a scalar Constant) and standard elementwise ops the engine evaluates and
// that launch a kernel; every output of a candidate has the same shape, the iteration space
// (known dims or the same symbols). In graph order, a candidate joins the open group of its
// iteration space unless no path may leave the group and re-enter it with the candidate in it
// (merging would create a cycle) or the group already has `max_members`; fused members' bodies
// are inlined and the union outlined as one node, when the cost model predicts a gain (at O3;
// JudgeFusion over the members as they are). Its body computes the members side by side, so
// the CPU runtime runs it as one elementwise program — one pass over the shared index space,
// inputs of any broadcastable shape.
//
// Limits: kernels over different iteration spaces (a packed index space for k small
// launches) are not merged; candidates are the elementwise ones only.
class FuseHorizontalElementwise : public Pass {
 public:
  std::string_view rewrite() const override { return kFuseHorizontalElementwiseRewrite; }
  std::string_view name() const override { return "fuse-horizontal-elementwise"; }
  std::string_view summary() const override {
    return "merge independent elementwise kernels over the same iteration space into one multi-output kernel";
  }
  std::vector<PassOptionInfo> options() const override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
