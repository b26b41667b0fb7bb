// lower-for-ort: where a recognised attention reads Q, K and V, taken from
// patterns/attention/layout.h — the derivation the CPU kernel and the CUDA generator address the
// operands with — so the lowering never reads heads, head sizes or slices its own way.
//
// LayOutAttention needs every dim and every Reshape target as numbers. Where the model leaves dims
// open, the layout is taken in a copy of the model whose symbols are set to trial sizes, with shape
// inference and fold-constants run over it (what -O1 does to static shapes): a target computed
// from Shape dims outside the group (TorchScript's Concat) is then a constant. A caller compares
// the layouts at two trials: what agrees at both does not depend on the open dims.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "ir/graph.h"
#include "patterns/attention/attention.h"
#include "patterns/attention/layout.h"

namespace fusionopt::passes::ort_lowering {

// Sizes for symbolic dims at one trial, by symbol.
using TrialSizes = std::map<std::string, int64_t, std::less<>>;

// Copies of the model with symbols at trial sizes and the shape computations that then depend
// only on known dims folded: made once per set of sizes and read by every layer.
class TrialModels {
 public:
  explicit TrialModels(const Model& model) : model_(model) {}
  const Model& model() const { return model_; }
  // The folded copy for `sizes`; null when folding it failed.
  const Model* At(const TrialSizes& sizes);
  // Every symbol of the model at `size`: a trial where no two open dims can disagree (exporters
  // name one dim differently in different places), for what must not depend on any of them.
  TrialSizes EverySymbolAt(int64_t size) const;

 private:
  const Model& model_;
  std::map<TrialSizes, std::unique_ptr<Model>> copies_;
};

// The attention's layout at one trial: every argument's dims, and the values of those read as
// Reshape targets, from the call's arguments or — for `sizes` not empty — the model's copy at those
// sizes; constants read under the model's initializer rule (ir/constant_value.h). nullopt where
// the layout fails; `unevaluable` is then set when a target's values were known at neither.
std::optional<AttentionLayout> LayoutAt(const FusedAttention& attention, const Node& call, TrialModels& trials,
                                        const TrialSizes& sizes, bool& unevaluable);

}  // namespace fusionopt::passes::ort_lowering
