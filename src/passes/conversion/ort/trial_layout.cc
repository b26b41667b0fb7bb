// lower-for-ort: the attention layout at trial sizes; see trial_layout.h.
#include "passes/conversion/ort/trial_layout.h"

#include "ir/constant_value.h"
#include "ir/function_body.h"
#include "passes/fold/fold_constants.h"
#include "shape_inference/shape_inference.h"

namespace fusionopt::passes::ort_lowering {

const Model* TrialModels::At(const TrialSizes& sizes) {
  auto [entry, fresh] = copies_.try_emplace(sizes);
  if (!fresh) return entry->second.get();
  std::unique_ptr<Model> copy = CopyModel(model_);
  for (const Value* value : copy->graph->AllValues()) {
    Value* sized = copy->graph->FindValue(value->name());
    if (sized == nullptr || !sized->shape()) continue;
    for (Dim& dim : *sized->type().shape) {
      if (auto size = sizes.find(dim.symbol); dim.is_symbolic() && size != sizes.end()) dim = Dim::Known(size->second);
    }
  }
  // A graph input's dim with neither size nor name, where the sizes give one for those; the
  // values computed from it are sized by inference (it refines an unknown dim it can compute).
  if (auto unnamed = sizes.find(kUnnamedDims); unnamed != sizes.end()) {
    for (Value* input : copy->graph->inputs()) {
      if (!input->shape() || input->is_initializer()) continue;
      for (Dim& dim : *input->type().shape) {
        if (!dim.is_known() && !dim.is_symbolic()) dim = Dim::Known(unnamed->second);
      }
    }
  }
  InferShapes(*copy);
  FoldConstants fold;
  PassOptions options;
  PassStatistics statistics;
  std::vector<FusionRecord> fusions;
  PassContext context(*copy, fold, options, statistics, fusions);
  if (fold.Run(*copy, context).ok()) entry->second = std::move(copy);
  return entry->second.get();
}

Decided<AttentionLayout> LayoutAt(const FusedAttention& attention, const Node& call, TrialModels& trials,
                                  const TrialSizes& sizes) {
  const Model* trial = sizes.empty() ? nullptr : trials.At(sizes);
  if (!sizes.empty() && trial == nullptr) return WhyNot(kNotFoldable);
  bool dims_unknown = false, target_unknown = false;
  auto sized = [&call, trial](int index) -> const Value* {
    const Value* argument = index >= 0 ? call.input(static_cast<size_t>(index)) : nullptr;
    if (argument == nullptr || trial == nullptr) return argument;
    return trial->graph->FindValue(argument->name());
  };
  AttentionInputs inputs;
  inputs.dims = [sized, &dims_unknown](int index) -> std::optional<std::vector<int64_t>> {
    const Value* value = sized(index);
    std::optional<std::vector<int64_t>> dims = value != nullptr ? KnownDims(*value) : std::nullopt;
    if (value != nullptr && !dims) dims_unknown = true;
    return dims;
  };
  const InitializerRule initializers = InitializerRuleOf(trials.model());
  inputs.values = [&call, sized, &target_unknown, initializers](int index) -> std::optional<std::vector<int64_t>> {
    std::optional<std::vector<int64_t>> values =
        index >= 0 ? ConstantInts(call.input(static_cast<size_t>(index)), initializers) : std::nullopt;
    if (!values) values = ConstantInts(sized(index), initializers);
    if (!values) target_unknown = true;
    return values;
  };
  if (std::optional<AttentionLayout> layout = LayOutAttention(attention, inputs)) return std::move(*layout);
  if (dims_unknown) return WhyNot(kDimsNotKnown);
  if (target_unknown) return WhyNot(kTargetNotKnown);
  return WhyNot(kNoStridedView);
}

TrialSizes TrialModels::EveryOpenDimAt(int64_t size) const {
  TrialSizes sizes;
  for (const Value* value : model_.graph->AllValues()) {
    if (!value->shape()) continue;
    for (const Dim& dim : *value->shape()) {
      if (dim.is_symbolic()) sizes.emplace(dim.symbol, size);
    }
  }
  for (const Value* input : model_.graph->inputs()) {
    if (!input->shape() || input->is_initializer()) continue;
    for (const Dim& dim : *input->shape()) {
      if (!dim.is_known() && !dim.is_symbolic()) sizes.emplace(kUnnamedDims, size);
    }
  }
  return sizes;
}

}  // namespace fusionopt::passes::ort_lowering
