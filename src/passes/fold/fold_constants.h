#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class FoldConstants : public Pass {
 public:
  std::string_view name() const override { return "fold-constants"; }
  std::string_view summary() const override {
    return "evaluate all-constant subgraphs and static Shape/Size at optimize time into initializers";
  }
  std::vector<PassOptionInfo> options() const override;
  Result<bool> Run(Model& model, PassContext& context) override;
};

}  // namespace fusionopt::passes
