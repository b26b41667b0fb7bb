#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class GathersToSlices : public Pass {
 public:
  std::string_view name() const override { return "gathers-to-slices"; }
  std::string_view summary() const override {
    return "a Gather or GatherND of constant consecutive indices is a Slice, and Slices of a Transpose slice its "
           "input (x[..., [k], :] as the dynamo exporter writes it)";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
