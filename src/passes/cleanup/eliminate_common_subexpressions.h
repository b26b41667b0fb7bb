#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// eliminate-common-subexpressions (O1): computes each thing once.
inline constexpr std::string_view kEliminateCommonSubexpressionsRewrite = R"rewrite(
  %a = Shape(%x)                           %a = Shape(%x)
  %b = Shape(%x)                    →      (readers of %b read %a)
  %c = Constant() {value: [4]}             %c = Constant() {value: [4]}
  %d = Constant() {value: [4]}             (readers of %d read %c)
)rewrite";
// Two nodes are the same computation when domain, op type, attributes (compared by value,
// tensors by content, in any order) and inputs (the same Values, slot by slot) agree and
// they have the same output slots. Constants are the same when their contents are (dtype,
// dims, bytes): Constant nodes, and initializers no caller can override (not graph inputs,
// or any initializer of a model before IR version 4). The first one in graph order stays,
// so everything the second's readers need is computed before them; nodes are visited in
// order, so once two Shapes merge, the Gathers reading them merge too: one linear pass with
// hashing.
//
// Never merged: impure ops (random ops, training Dropout, other domains, control flow —
// IsPure), nodes holding subgraphs, and pairs whose outputs are both graph outputs (graph
// outputs keep distinct values). When only the duplicate's output is a graph output, that
// value moves to the first node (bypass.h) so the graph output keeps its name. Merging is per
// graph: a subgraph's nodes merge with each other, not with the enclosing graph's.
class EliminateCommonSubexpressions : public Pass {
 public:
  std::string_view rewrite() const override { return kEliminateCommonSubexpressionsRewrite; }
  std::string_view name() const override { return "eliminate-common-subexpressions"; }
  std::string_view summary() const override {
    return "merge nodes computing the same op on the same inputs, and constants of equal content";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
