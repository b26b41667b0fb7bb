#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class SlicesToSplit : public Pass {
 public:
  std::string_view name() const override { return "slices-to-split"; }
  std::string_view summary() const override {
    return "constant Slices of one value that tile one axis exactly become one Split (TorchScript's chunk)";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
