#pragma once

#include <string_view>

#include "passes/pass.h"

namespace fusionopt::passes {

// fold-scale-into-matmul (O1): a Mul by a constant that scales whole columns, after a MatMul
// by constant 2-D weights — directly or through its bias Add — becomes part of the weights and
// bias. Whisper and CLIP (eager attention) scale the query after its projection:
inline constexpr std::string_view kFoldScaleIntoMatMulRewrite = R"rewrite(
  %q = MatMul(%x, %Wq)                      %q = MatMul(%x, %Wq')      Wq'[:, n] = Wq[:, n]·s[n]
  %b = Add(%q, %bq)                    →    %y = Add(%q, %bq')         bq' = bq·s
  %y = Mul(%b, %s)
)rewrite";
// With the scale gone the query projection is a plain MatMul + bias like the key's and the
// value's, so fuse-horizontal-contractions can merge the three. fold-scale-into-conv covers
// Conv and Gemm (per channel on axis 1); this is the N-D MatMul's form, whose columns are its
// output's last axis. Qualifies: a scale and bias of the weights' floating-point dtype whose
// dims are all 1 but the last (1 or N), no higher rank than the output; each intermediate read
// only by the next node and no graph output. Arithmetic in double, rounded once; new weights
// are fresh initializers (a weight may be shared). Limits: MatMul with constant B only (not a
// constant A), one Mul per chain; a Mul before the bias Add is left to matmul-add-to-gemm's
// forms.
class FoldScaleIntoMatMul : public Pass {
 public:
  std::string_view rewrite() const override { return kFoldScaleIntoMatMulRewrite; }
  std::string_view name() const override { return "fold-scale-into-matmul"; }
  std::string_view summary() const override {
    return "a Mul by a constant per-column scale after MatMul by constant weights (and its bias Add) becomes part of "
           "the weights and bias (Whisper's and CLIP's query scaling)";
  }

 protected:
  Result<bool> RunOnGraph(Graph& graph, PassContext& context) override;
};

}  // namespace fusionopt::passes
