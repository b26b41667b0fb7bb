#pragma once

#include "passes/pass.h"

namespace fusionopt::passes {

class MatMulAddToGemm : public Pass {
 public:
  std::string_view name() const override { return "matmul-add-to-gemm"; }
  std::string_view summary() const override { return "turn a 2-D MatMul followed by a bias Add into one Gemm"; }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
