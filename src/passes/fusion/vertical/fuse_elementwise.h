#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class FuseElementwise : public Pass {
 public:
  std::string_view name() const override { return "fuse-elementwise"; }
  std::string_view summary() const override {
    return "fuse connected elementwise ops (broadcasting included) into one single-pass kernel";
  }
  std::vector<PassOptionInfo> options() const override;

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
