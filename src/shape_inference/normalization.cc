// Normalizations and softmax-like ops: Y keeps X's type and shape; statistics outputs are
// per channel (BatchNormalization) or keep the normalized axes as size 1 (LayerNormalization).
#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

// Output 0 is X itself; shared by normalizations without statistics outputs.
void NormalizedLikeInput(InferenceContext& context) { PropagateInput(context, 0, 0); }

// Training-mode statistics: [C] for X: [N, C, ...] (or the mean input's own shape).
void BatchNormalizationRule(InferenceContext& context) {
  PropagateInput(context, 0, 0);
  const Shape* x = context.InputShape(0);
  std::optional<Shape> statistics_shape;
  bool per_activation = context.opset() < 9 && context.node().GetInt("spatial", 1) == 0;
  if (per_activation) {
    // Opset 7's spatial=0 keeps statistics per activation, shaped like the mean input.
    if (const Shape* mean = context.InputShape(3)) statistics_shape = *mean;
  } else if (x != nullptr && x->size() >= 2) {
    statistics_shape = Shape{(*x)[1]};
  } else if (const Shape* mean = context.InputShape(3)) {
    statistics_shape = *mean;
  }
  DataType statistics_type =
      context.InputDtype(3) != DataType::kUndefined ? context.InputDtype(3) : context.InputDtype(0);
  // Opsets 7-13 have mean, var, saved_mean, saved_var; 14+ has running_mean, running_var.
  size_t statistics_outputs = context.opset() >= 14 ? 2 : 4;
  for (size_t output = 1; output <= statistics_outputs; ++output) {
    context.SetOutputType(output, statistics_type, statistics_shape);
  }
}

// Mean and InvStdDev: X's dims before `axis`, size 1 from there on, in stash_type.
void LayerNormalizationRule(InferenceContext& context) {
  PropagateInput(context, 0, 0);
  SetNormalizationStatistics(context, context.node().GetInt("axis", -1), {1, 2});
}

// Softmax, LogSoftmax and Hardmax keep the shape; an out-of-range axis is only reported.
// (The default axis moved from 1 to -1 in opset 13; the shape is the same either way.)
void SoftmaxRule(InferenceContext& context) {
  PropagateInput(context, 0, 0);
  const Shape* x = context.InputShape(0);
  if (x == nullptr) return;
  int64_t axis = context.node().GetInt("axis", context.opset() >= 13 ? -1 : 1);
  auto rank = static_cast<int64_t>(x->size());
  if (rank > 0 && !NormalizeAxis(axis, rank)) {
    context.Warn("axis " + std::to_string(axis) + " is out of range for rank " +
                 std::to_string(rank));
  }
}

}  // namespace

void SetNormalizationStatistics(InferenceContext& context, int64_t axis,
                                const std::vector<size_t>& outputs) {
  int64_t raw_stash_type = context.node().GetInt("stash_type", 1);
  DataType stash_type = IsKnownDataType(static_cast<int32_t>(raw_stash_type))
                            ? static_cast<DataType>(raw_stash_type)
                            : DataType::kFloat;
  const Shape* x = context.InputShape(0);
  std::optional<Shape> statistics_shape;
  if (x != nullptr) {
    std::optional<int64_t> first = NormalizeAxis(axis, static_cast<int64_t>(x->size()));
    if (!first) {
      context.Warn("axis " + std::to_string(axis) + " is out of range for rank " +
                   std::to_string(x->size()));
    } else {
      statistics_shape = *x;
      for (size_t i = static_cast<size_t>(*first); i < x->size(); ++i) {
        (*statistics_shape)[i] = Dim::Known(1);
      }
    }
  }
  for (size_t output : outputs) context.SetOutputType(output, stash_type, statistics_shape);
}

void RegisterNormalizationRules(RuleRegistry& registry) {
  registry.AddTypeRule("", {"InstanceNormalization", "GroupNormalization", "LRN"},
                       NormalizedLikeInput);
  registry.AddTypeRule("", {"BatchNormalization"}, BatchNormalizationRule);
  registry.AddTypeRule("", {"LayerNormalization"}, LayerNormalizationRule);
  registry.AddTypeRule("", {"Softmax", "LogSoftmax", "Hardmax"}, SoftmaxRule);
}

}  // namespace fusionopt::shape_inference
