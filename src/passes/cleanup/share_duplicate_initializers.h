#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class ShareDuplicateInitializers : public Pass {
 public:
  std::string_view name() const override { return "share-duplicate-initializers"; }
  std::string_view summary() const override {
    return "initializers with identical dtype, dims and bytes become one";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
