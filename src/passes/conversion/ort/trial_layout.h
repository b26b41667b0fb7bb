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

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "ir/graph.h"
#include "ir/why_not.h"
#include "patterns/attention/attention.h"
#include "patterns/attention/layout.h"

namespace fusionopt::passes::ort_lowering {

// The trial sizes, apart from each other and from common head counts. Every open dim alike, for
// what must not depend on any of them (the heads): small ones first (a sequence within the
// model's position tables), then large ones (an image a patch convolution must not shrink to
// nothing). A packed projection's batch and sequence apart, so a layout that mixes them shows.
inline constexpr std::array<std::array<int64_t, 2>, 2> kTrialOpenDims = {{{7, 11}, {64, 96}}};
inline constexpr std::array<int64_t, 2> kTrialBatches = {3, 5};
inline constexpr std::array<int64_t, 2> kTrialSequences = {7, 11};

// Sizes for symbolic dims at one trial, by symbol; under kUnnamedDims, the size of every graph
// input dim that has neither a size nor a name.
using TrialSizes = std::map<std::string, int64_t, std::less<>>;
inline constexpr const char* kUnnamedDims = "";

// Copies of the model with symbols at trial sizes and the shape computations that then depend
// only on known dims folded: made once per set of sizes and read by every layer.
class TrialModels {
 public:
  explicit TrialModels(const Model& model) : model_(model) {}
  const Model& model() const { return model_; }
  // The folded copy for `sizes`; null when folding it failed.
  const Model* At(const TrialSizes& sizes);
  // Every open dim of the model at `size` (its symbols, and the graph inputs' unnamed dims): a
  // trial where no two open dims can disagree (exporters name one dim differently in different
  // places), for what must not depend on any of them.
  TrialSizes EveryOpenDimAt(int64_t size) const;

 private:
  const Model& model_;
  std::map<TrialSizes, std::unique_ptr<Model>> copies_;
};

// Why LayoutAt finds no layout: the copy at the trial sizes does not fold; an argument's dims are
// not all known there; a Reshape target's values are known at neither (a feed may replace it, or
// it is computed at run time); or the body's layout ops give no strided view of its inputs.
inline constexpr const char* kNotFoldable = "the model does not fold at the trial sizes";
inline constexpr const char* kDimsNotKnown = "an input's dims are not known at the trial sizes";
inline constexpr const char* kTargetNotKnown = "a Reshape target the group reads is not known ahead of time";
inline constexpr const char* kNoStridedView = "the group's layout ops give no strided view of its inputs";

// The attention's layout at one trial: every argument's dims, and the values of those read as
// Reshape targets, from the call's arguments or — for `sizes` not empty — the model's copy at those
// sizes; constants read under the model's initializer rule (ir/constant_value.h).
Decided<AttentionLayout> LayoutAt(const FusedAttention& attention, const Node& call, TrialModels& trials,
                                  const TrialSizes& sizes);

}  // namespace fusionopt::passes::ort_lowering
