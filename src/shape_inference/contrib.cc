// onnxruntime contrib ops that transformer exports (optimum, ORT's transformer optimizer)
// commonly contain, where the shape is cheap to know. FusedMatMul, Attention and the
// quantized ops are deliberately absent: they stay unknown and show up in the report.
#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

constexpr std::string_view kMicrosoft = "com.microsoft";

void SameAsFirstInput(InferenceContext& context) { PropagateInput(context, 0, 0); }

// SkipLayerNormalization / SkipSimplifiedLayerNormalization:
// (output, mean, inv_std_var, input_skip_bias_sum); statistics reduce the last axis.
void SkipLayerNormalizationRule(InferenceContext& context) {
  PropagateInput(context, 0, 0);
  SetNormalizationStatistics(context, -1, {1, 2});
  PropagateInput(context, 0, 3);
}

// SimplifiedLayerNormalization (RMSNorm): (Y, inv_std_var).
void SimplifiedLayerNormalizationRule(InferenceContext& context) {
  PropagateInput(context, 0, 0);
  SetNormalizationStatistics(context, context.node().GetInt("axis", -1), {1});
}

}  // namespace

void RegisterContribRules(RuleRegistry& registry) {
  registry.AddTypeRule(kMicrosoft, {"Gelu", "FastGelu", "BiasGelu", "QuickGelu", "BiasAdd"},
                       SameAsFirstInput);
  registry.AddTypeRule(kMicrosoft, {"SkipLayerNormalization", "SkipSimplifiedLayerNormalization"},
                       SkipLayerNormalizationRule);
  // onnxruntime registers SimplifiedLayerNormalization in the default domain as well.
  registry.AddTypeRule(kMicrosoft, {"SimplifiedLayerNormalization"},
                       SimplifiedLayerNormalizationRule);
  registry.AddTypeRule("", {"SimplifiedLayerNormalization"}, SimplifiedLayerNormalizationRule);
}

}  // namespace fusionopt::shape_inference
