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
  InferShapes(*copy);
  FoldConstants fold;
  PassOptions options;
  PassStatistics statistics;
  std::vector<FusionRecord> fusions;
  PassContext context(*copy, fold, options, statistics, fusions);
  if (fold.Run(*copy, context).ok()) entry->second = std::move(copy);
  return entry->second.get();
}

std::optional<AttentionLayout> LayoutAt(const FusedAttention& attention, const Node& call, TrialModels& trials,
                                        const TrialSizes& sizes, bool& unevaluable) {
  const Model* trial = sizes.empty() ? nullptr : trials.At(sizes);
  auto sized = [&call, trial](int index) -> const Value* {
    const Value* argument = index >= 0 ? call.input(static_cast<size_t>(index)) : nullptr;
    if (argument == nullptr || trial == nullptr) return argument;
    return trial->graph->FindValue(argument->name());
  };
  AttentionInputs inputs;
  inputs.dims = [sized](int index) -> std::optional<std::vector<int64_t>> {
    const Value* value = sized(index);
    return value != nullptr ? KnownDims(*value) : std::nullopt;
  };
  const InitializerRule initializers = InitializerRuleOf(trials.model());
  inputs.values = [&call, sized, &unevaluable, initializers](int index) -> std::optional<std::vector<int64_t>> {
    std::optional<std::vector<int64_t>> values =
        index >= 0 ? ConstantInts(call.input(static_cast<size_t>(index)), initializers) : std::nullopt;
    if (!values) values = ConstantInts(sized(index), initializers);
    if (!values) unevaluable = true;
    return values;
  };
  return LayOutAttention(attention, inputs);
}

TrialSizes TrialModels::EverySymbolAt(int64_t size) const {
  TrialSizes sizes;
  for (const Value* value : model_.graph->AllValues()) {
    if (!value->shape()) continue;
    for (const Dim& dim : *value->shape()) {
      if (dim.is_symbolic()) sizes.emplace(dim.symbol, size);
    }
  }
  return sizes;
}

}  // namespace fusionopt::passes::ort_lowering
