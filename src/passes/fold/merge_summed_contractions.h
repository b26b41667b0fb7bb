#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class MergeSummedContractions : public Pass {
 public:
  std::string_view name() const override { return "merge-summed-contractions"; }
  std::string_view summary() const override {
    return "contractions of one input whose outputs are added (and the input itself) become one contraction with "
           "the summed weights";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
