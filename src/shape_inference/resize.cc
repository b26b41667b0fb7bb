// Resize (opsets 10-19+) and the deprecated Upsample (7-9).
//
// With scales: out = floor(in * scale), computed in float like onnx and onnxruntime.
// With sizes: out = sizes, or, for keep_aspect_ratio_policy not_larger/not_smaller (18+),
// round_half_up(in * min/max(sizes / in)) over the resized axes.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

Dim ScaledDim(const Dim& dim, double scale) {
  if (scale == 1.0) return dim;
  if (!dim.is_known()) return Dim::Unknown();
  return SizeFromFloat(std::floor(static_cast<float>(dim.value) * static_cast<float>(scale)));
}

void ApplyScales(InferenceContext& context, const Shape& x, const std::vector<int64_t>& axes,
                 const std::vector<double>& scales) {
  if (scales.size() != axes.size()) {
    context.Warn("scales has " + std::to_string(scales.size()) + " values for " +
                 std::to_string(axes.size()) + " axes");
    return;
  }
  Shape out = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (scales[i] <= 0) {
      context.Warn("scales must be positive");
      return;
    }
    auto axis = static_cast<size_t>(axes[i]);
    out[axis] = ScaledDim(x[axis], scales[i]);
  }
  context.SetOutputShape(0, out);
}

// One scale for all resized axes that keeps the aspect ratio; nullopt when a size is unknown.
std::optional<double> AspectScale(const Shape& x, const std::vector<int64_t>& axes,
                                  const SymbolicData& sizes, bool not_larger) {
  std::optional<double> chosen;
  for (size_t i = 0; i < axes.size(); ++i) {
    const Dim& in = x[static_cast<size_t>(axes[i])];
    if (!in.is_known() || in.value == 0 || !sizes.elements[i].is_known()) return std::nullopt;
    double scale = static_cast<double>(*sizes.elements[i].value) / static_cast<double>(in.value);
    if (!chosen) {
      chosen = scale;
    } else {
      chosen = not_larger ? std::min(*chosen, scale) : std::max(*chosen, scale);
    }
  }
  return chosen;
}

void ApplySizes(InferenceContext& context, const Shape& x, const std::vector<int64_t>& axes,
                const SymbolicData& sizes) {
  if (sizes.elements.size() != axes.size()) {
    context.Warn("sizes has " + std::to_string(sizes.elements.size()) + " values for " +
                 std::to_string(axes.size()) + " axes");
    return;
  }
  std::string policy = context.opset() >= 18
                           ? context.node().GetString("keep_aspect_ratio_policy", "stretch")
                           : "stretch";
  Shape out = x;
  if (policy == "not_larger" || policy == "not_smaller") {
    std::optional<double> scale = AspectScale(x, axes, sizes, policy == "not_larger");
    for (int64_t axis : axes) {
      const Dim& in = x[static_cast<size_t>(axis)];
      out[static_cast<size_t>(axis)] =
          scale ? SizeFromFloat(std::floor(*scale * static_cast<double>(in.value) + 0.5))
                : Dim::Unknown();
    }
  } else {
    for (size_t i = 0; i < axes.size(); ++i) {
      const SymbolicInt& size = sizes.elements[i];
      out[static_cast<size_t>(axes[i])] = size.is_known()      ? KnownOrUnknown(size.value)
                                          : size.is_symbolic() ? Dim::Symbol(size.symbol)
                                                               : Dim::Unknown();
    }
  }
  context.SetOutputShape(0, out);
}

// A scales input that is an empty tensor counts as absent (opset 11 needs a placeholder).
std::optional<std::vector<double>> NonEmptyFloats(const InferenceContext& context, size_t input) {
  if (!context.HasInput(input)) return std::nullopt;
  auto values = context.InputFloats(input);
  if (!values || values->empty()) return std::nullopt;
  return values;
}

void ResizeRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* x = context.InputShape(0);
  if (x == nullptr) return;
  auto rank = static_cast<int64_t>(x->size());
  std::vector<int64_t> axes(x->size());
  std::iota(axes.begin(), axes.end(), 0);
  if (auto given = context.node().GetInts("axes"); given && context.opset() >= 18) {
    std::optional<std::vector<int64_t>> normalized = NormalizeAxes(context, *given, rank);
    if (!normalized) return;
    axes = *normalized;
  }
  // Opset 10 has (X, scales); 11+ has (X, roi, scales, sizes).
  size_t scales_input = context.opset() >= 11 ? 2 : 1;
  if (context.opset() >= 11 && context.HasInput(3)) {
    std::optional<SymbolicData> sizes = context.InputData(3);
    if (sizes && !sizes->elements.empty()) {
      ApplySizes(context, *x, axes, *sizes);
      return;
    }
  }
  if (auto scales = NonEmptyFloats(context, scales_input)) {
    ApplyScales(context, *x, axes, *scales);
    return;
  }
  // Computed scales or sizes: only the resized axes lose their size.
  Shape out = *x;
  for (int64_t axis : axes) out[static_cast<size_t>(axis)] = Dim::Unknown();
  context.SetOutputShape(0, out);
}

// Upsample: scales attribute in opset 7, input 1 from opset 9.
void UpsampleRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* x = context.InputShape(0);
  if (x == nullptr) return;
  std::vector<int64_t> axes(x->size());
  std::iota(axes.begin(), axes.end(), 0);
  std::optional<std::vector<double>> scales;
  if (context.opset() >= 9) {
    scales = NonEmptyFloats(context, 1);
  } else if (const Attribute* attribute = context.node().FindAttribute("scales")) {
    scales = std::vector<double>(attribute->floats.begin(), attribute->floats.end());
  }
  if (scales) {
    ApplyScales(context, *x, axes, *scales);
  } else {
    context.SetOutputRank(0, static_cast<int64_t>(x->size()));
  }
}

}  // namespace

void RegisterResizeRules(RuleRegistry& registry) {
  registry.AddTypeRule("", {"Resize"}, ResizeRule);
  registry.AddTypeRule("", {"Upsample"}, UpsampleRule);
}

}  // namespace fusionopt::shape_inference
