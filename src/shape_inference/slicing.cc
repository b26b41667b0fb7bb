// Ops that cut or join along axes: Concat, Split, Slice, Pad.
#include <algorithm>
#include <numeric>

#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

// Two dims that must be equal: a known size beats a symbol, a symbol beats unknown.
Dim MergeEqualDims(const Dim& a, const Dim& b) {
  if (a.is_known()) return a;
  if (b.is_known()) return b;
  return a.is_symbolic() ? a : b;
}

}  // namespace

std::optional<Shape> ConcatOutputShape(InferenceContext& context, const std::vector<size_t>& inputs) {
  std::vector<const Shape*> shapes;
  for (size_t input : inputs) shapes.push_back(context.InputShape(input));
  auto known = std::find_if(shapes.begin(), shapes.end(), [](const Shape* s) { return s; });
  if (known == shapes.end()) return std::nullopt;
  auto rank = static_cast<int64_t>((*known)->size());
  // Concat-1 defaults the axis to 1; from Concat-4 on it is required.
  int64_t requested = context.node().GetInt("axis", context.opset() < 4 ? 1 : 0);
  std::optional<int64_t> axis = NormalizeAxis(requested, rank);
  if (!axis) {
    context.Warn("axis " + std::to_string(requested) + " is out of range for rank " +
                 std::to_string(rank));
    return std::nullopt;
  }
  Shape out = UnknownDims(static_cast<size_t>(rank));
  std::optional<int64_t> total = 0;
  for (const Shape* shape : shapes) {
    if (shape == nullptr) {
      total.reset();
      continue;
    }
    if (static_cast<int64_t>(shape->size()) != rank) {
      context.Warn("inputs have different ranks");
      return std::nullopt;
    }
    for (size_t i = 0; i < shape->size(); ++i) {
      const Dim& dim = (*shape)[i];
      if (static_cast<int64_t>(i) == *axis) {
        total = total && dim.is_known() ? std::optional<int64_t>(*total + dim.value) : std::nullopt;
      } else if (out[i].is_known() && dim.is_known() && out[i].value != dim.value) {
        context.Warn("inputs differ in dim " + std::to_string(i) + " (" +
                     std::to_string(out[i].value) + " vs " + std::to_string(dim.value) + ")");
        return std::nullopt;
      } else {
        out[i] = MergeEqualDims(out[i], dim);
      }
    }
  }
  out[static_cast<size_t>(*axis)] = KnownOrUnknown(total);
  return out;
}

namespace {

void ConcatRule(InferenceContext& context) {
  DataType dtype = DataType::kUndefined;
  std::vector<size_t> inputs;
  for (size_t i = 0; i < context.num_inputs(); ++i) {
    if (dtype == DataType::kUndefined) dtype = context.InputDtype(i);
    inputs.push_back(i);
  }
  context.SetOutputDtype(0, dtype);
  if (auto out = ConcatOutputShape(context, inputs)) context.SetOutputShape(0, *out);
}

// Part sizes for Split when none are given: equal parts; from opset 18 a remainder goes to
// a smaller last part, before that it is an error.
std::optional<std::vector<int64_t>> EqualParts(const InferenceContext& context, int64_t size,
                                               int64_t parts) {
  if (size % parts == 0) return std::vector<int64_t>(static_cast<size_t>(parts), size / parts);
  int64_t chunk = (size + parts - 1) / parts;
  if (context.opset() < 18 || chunk * (parts - 1) > size) {
    context.Warn("size " + std::to_string(size) + " does not split into " + std::to_string(parts) +
                 " parts");
    return std::nullopt;
  }
  std::vector<int64_t> sizes(static_cast<size_t>(parts), chunk);
  sizes.back() = size - chunk * (parts - 1);
  return sizes;
}

void SplitRule(InferenceContext& context) {
  auto parts = static_cast<int64_t>(context.num_outputs());
  for (size_t i = 0; i < context.num_outputs(); ++i) {
    context.SetOutputDtype(i, context.InputDtype(0));
  }
  const Shape* data = context.InputShape(0);
  if (data == nullptr || parts == 0) return;
  int64_t requested = context.node().GetInt("axis", 0);
  std::optional<int64_t> axis = NormalizeAxis(requested, static_cast<int64_t>(data->size()));
  if (!axis) {
    context.Warn("axis " + std::to_string(requested) + " is out of range for rank " +
                 std::to_string(data->size()));
    return;
  }
  const Dim& dim = (*data)[static_cast<size_t>(*axis)];
  IntListArgument split = context.ReadIntList("split", 1, 13);
  if (context.opset() >= 18 && !split.present && context.node().FindAttribute("num_outputs") &&
      context.node().GetInt("num_outputs", parts) != parts) {
    context.Warn("num_outputs does not match the node's " + std::to_string(parts) + " outputs");
  }
  std::optional<std::vector<int64_t>> sizes;
  if (split.values) {
    // Hostile sizes may be negative or overflow the sum; either is a mismatch.
    int64_t sum = 0;
    bool valid = static_cast<int64_t>(split.values->size()) == parts;
    for (int64_t size : *split.values) valid = valid && size >= 0 && !__builtin_add_overflow(sum, size, &sum);
    if (!valid || (dim.is_known() && sum != dim.value)) {
      context.Warn("split sizes do not match " + std::to_string(parts) + " outputs of dim " +
                   ShapeToString({dim}));
    } else {
      sizes = split.values;
    }
  } else if (!split.present && dim.is_known()) {
    sizes = EqualParts(context, dim.value, parts);
  }
  for (size_t i = 0; i < context.num_outputs(); ++i) {
    Shape out = *data;
    out[static_cast<size_t>(*axis)] = sizes ? KnownOrUnknown((*sizes)[i]) : Dim::Unknown();
    context.SetOutputShape(i, out);
  }
}

// Ends at or beyond this are "to the end" whatever the dim (exporters use INT32/64 max).
constexpr int64_t kOpenEnd = (int64_t{1} << 31) - 1;

// Length of data[start:end:step] on one axis, with ONNX clamping rules.
Dim SlicedDim(const Dim& dim, int64_t start, int64_t end, int64_t step) {
  if (!dim.is_known()) {
    bool whole_forward = step == 1 && start == 0 && end >= kOpenEnd;
    bool whole_backward = step == -1 && start == -1 && end <= -kOpenEnd;
    return whole_forward || whole_backward ? dim : Dim::Unknown();
  }
  return Dim::Known(ClampSlice(dim.value, start, end, step).count);
}

std::vector<int64_t> FirstAxes(size_t count) {
  std::vector<int64_t> axes(count);
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

// Opsets < 10 take starts/ends/axes as attributes, later ones starts/ends/axes/steps as
// inputs 1-4. Computed bounds leave the sliced axes unknown (all axes if those are unknown).
void SliceRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* data = context.InputShape(0);
  if (data == nullptr) return;
  IntListArgument starts = context.ReadIntList("starts", 1, 10);
  IntListArgument ends = context.ReadIntList("ends", 2, 10);
  IntListArgument axes = context.ReadIntList("axes", 3, 10);
  IntListArgument steps = context.ReadIntList("steps", 4, 10);
  std::optional<std::vector<int64_t>> sliced_axes = axes.values;
  if (!axes.present && starts.length && *starts.length <= kMaxRank) {
    sliced_axes = FirstAxes(static_cast<size_t>(*starts.length));
  }
  if (!sliced_axes) {
    context.SetOutputRank(0, static_cast<int64_t>(data->size()));
    return;
  }
  sliced_axes = NormalizeAxes(context, *sliced_axes, static_cast<int64_t>(data->size()));
  if (!sliced_axes) return;
  Shape out = *data;
  if (!starts.values || !ends.values || (steps.present && !steps.values)) {
    for (int64_t axis : *sliced_axes) out[static_cast<size_t>(axis)] = Dim::Unknown();
    context.SetOutputShape(0, out);
    return;
  }
  size_t count = sliced_axes->size();
  std::vector<int64_t> step_values = steps.values.value_or(std::vector<int64_t>(count, 1));
  if (starts.values->size() != count || ends.values->size() != count ||
      step_values.size() != count) {
    context.Warn("starts, ends, axes and steps differ in length");
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    if (step_values[i] == 0) {
      context.Warn("step 0 is invalid");
      return;
    }
    auto axis = static_cast<size_t>((*sliced_axes)[i]);
    out[axis] = SlicedDim((*data)[axis], (*starts.values)[i], (*ends.values)[i], step_values[i]);
  }
  context.SetOutputShape(0, out);
}

// Pads: begin values for the padded axes, then end values (negative pads crop).
void PadRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* data = context.InputShape(0);
  if (data == nullptr) return;
  auto rank = static_cast<int64_t>(data->size());
  IntListArgument pads = context.ReadIntList("pads", 1, 11);
  std::vector<int64_t> axes(data->size());
  std::iota(axes.begin(), axes.end(), 0);
  bool axes_known = true;
  if (context.opset() >= 18 && context.HasInput(3)) {
    std::optional<std::vector<int64_t>> given = context.InputInts(3);
    axes_known = given.has_value();
    if (given) {
      std::optional<std::vector<int64_t>> normalized = NormalizeAxes(context, *given, rank);
      if (!normalized) return;
      axes = *normalized;
    }
  }
  if (!axes_known) {
    context.SetOutputRank(0, rank);
    return;
  }
  Shape out = *data;
  if (!pads.values) {
    for (int64_t axis : axes) out[static_cast<size_t>(axis)] = Dim::Unknown();
    context.SetOutputShape(0, out);
    return;
  }
  if (pads.values->size() != 2 * axes.size()) {
    context.Warn("pads has " + std::to_string(pads.values->size()) + " values for " +
                 std::to_string(axes.size()) + " axes");
    return;
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t added = (*pads.values)[i] + (*pads.values)[i + axes.size()];
    Dim& dim = out[static_cast<size_t>(axes[i])];
    if (added == 0) continue;
    dim = dim.is_known() && dim.value + added >= 0 ? Dim::Known(dim.value + added) : Dim::Unknown();
  }
  context.SetOutputShape(0, out);
}

}  // namespace

void RegisterSlicingRules(RuleRegistry& registry) {
  registry.AddTypeRule("", {"Concat"}, ConcatRule);
  registry.AddTypeRule("", {"Split"}, SplitRule);
  registry.AddTypeRule("", {"Slice"}, SliceRule);
  registry.AddTypeRule("", {"Pad"}, PadRule);
}

}  // namespace fusionopt::shape_inference
