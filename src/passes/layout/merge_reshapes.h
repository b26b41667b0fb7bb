#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class MergeReshapes : public Pass {
 public:
  std::string_view name() const override { return "merge-reshapes"; }
  std::string_view summary() const override {
    return "merge consecutive Transposes, and Reshape/Squeeze/Unsqueeze/Flatten chains into one view";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
