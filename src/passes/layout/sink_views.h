#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class SinkViews : public Pass {
 public:
  std::string_view name() const override { return "sink-views"; }
  std::string_view summary() const override {
    return "a Reshape read only by elementwise ops moves below them, next to the contraction before it or the "
           "view after them";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
