#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// share-duplicate-initializers (O1): one copy of each distinct weight.
inline constexpr std::string_view kShareDuplicateInitializersRewrite = R"rewrite(
  init float[64] %a = [...]                     init float[64] %a = [...]
  init float[64] %b = (the same bytes)    →     (readers of %b read %a; %b removed)
)rewrite";
// Initializers are the same when dtype, dims and bytes are (strings element by element).
// Bytes are hashed where they lie — memory-mapped external data is read in place, never
// copied — and only for tensors that share dtype and dims with another one. The first in
// initializer order stays. Counters: initializers_removed, bytes_saved.
//
// Limits: initializers that are graph inputs are part of the interface (a caller may feed
// them) and are neither shared nor removed; a duplicate that is a graph output stays, since
// graph outputs keep their names and distinct values. Sharing is per graph: a subgraph's
// initializers are shared among themselves.
class ShareDuplicateInitializers : public Pass {
 public:
  std::string_view rewrite() const override { return kShareDuplicateInitializersRewrite; }
  std::string_view name() const override { return "share-duplicate-initializers"; }
  std::string_view summary() const override {
    return "initializers with identical dtype, dims and bytes become one";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
