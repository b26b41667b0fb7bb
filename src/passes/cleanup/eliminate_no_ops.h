#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// eliminate-no-ops (O1): removes nodes whose output is their input, and makes their readers
// read the input.
inline constexpr std::string_view kEliminateNoOpsRewrite = R"rewrite(
  %y = Identity(%x)                                  →   (readers of %y read %x)
  %y, = Dropout(%x)        (inference, mask unread)  →   likewise
  %y = Cast(%x) {to: float}           (%x is float)  →   likewise
  %y = Transpose(%x) {perm: [0, 1, 2]}               →   likewise
  %y = Reshape(%x[N,64], [0, 64])                    →   likewise
  %y = Expand(%x[N,64], [1]) / Tile(%x, [1, 1])      →   likewise
  %y = Slice(%x, [0], [INT64_MAX], [1])              →   likewise
  %y = Pad(%x, [0, 0, 0, 0])                         →   likewise
  %y = Concat(%x) / Sum(%x) / Split(%x) (one output) →   likewise
  %y = Resize(%x, , [1.0, 1.0, 1.0, 1.0])            →   likewise
  Flatten / Squeeze / Unsqueeze / Reshape whose output shape is certainly the input's
)rewrite";
// Decided from constants (initializers callers cannot override, Constant nodes) and known
// shapes only; a symbolic dim counts only where equal symbols make the answer certain
// (no_op_rules.cc has the rule of each op). Only the default ONNX domain is touched.
//
// Graph outputs keep their names. When the removed node writes a graph output, the node
// computing its input writes that graph-output value instead and the input's readers follow
// (bypass.h) — when the input is computed by a node of the same graph and is itself no graph
// input, initializer or graph output. Otherwise the node stays ("output is a graph output").
// Nodes with other outputs that something reads (a Dropout mask) stay too.
class EliminateNoOps : public Pass {
 public:
  std::string_view rewrite() const override { return kEliminateNoOpsRewrite; }
  std::string_view name() const override { return "eliminate-no-ops"; }
  std::string_view summary() const override {
    return "remove Identity, inference Dropout, and Cast/Reshape/Transpose/Expand/Slice/Pad/... that provably "
           "do nothing";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
