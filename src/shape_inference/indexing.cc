// Index-driven ops: Gather, GatherElements, GatherND, ScatterElements, ScatterND, OneHot,
// NonZero, TopK.
#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

// data[:axis] + indices + data[axis+1:].
void GatherRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* data = context.InputShape(0);
  const Shape* indices = context.InputShape(1);
  if (data == nullptr || indices == nullptr) return;
  int64_t requested = context.node().GetInt("axis", 0);
  std::optional<int64_t> axis = NormalizeAxis(requested, static_cast<int64_t>(data->size()));
  if (!axis) {
    context.Warn("axis " + std::to_string(requested) + " is out of range for rank " +
                 std::to_string(data->size()));
    return;
  }
  auto at = data->begin() + *axis;
  Shape out(data->begin(), at);
  out.insert(out.end(), indices->begin(), indices->end());
  out.insert(out.end(), at + 1, data->end());
  context.SetOutputShape(0, out);
}

// The output has the indices' shape and the data's type.
void GatherElementsRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  if (const Shape* indices = context.InputShape(1)) context.SetOutputShape(0, *indices);
}

// indices [..., k] address k leading dims (after batch_dims) of data:
// out = indices[:-1] + data[batch_dims + k:].
void GatherNdRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  const Shape* data = context.InputShape(0);
  const Shape* indices = context.InputShape(1);
  if (data == nullptr || indices == nullptr || indices->empty()) return;
  const Dim& last = indices->back();
  if (!last.is_known()) return;
  int64_t batch_dims = context.node().GetInt("batch_dims", 0);
  auto consumed = static_cast<size_t>(batch_dims + last.value);
  if (batch_dims < 0 || consumed > data->size()) {
    context.Warn("indices " + ShapeToString(*indices) + " address more dims than data " +
                 ShapeToString(*data) + " has");
    return;
  }
  Shape out(indices->begin(), indices->end() - 1);
  out.insert(out.end(), data->begin() + static_cast<std::ptrdiff_t>(consumed), data->end());
  context.SetOutputShape(0, out);
}

void ScatterRule(InferenceContext& context) { PropagateInput(context, 0, 0); }

// The depth axis is inserted at `axis` (default -1: appended) into the indices' shape.
void OneHotRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(2));
  const Shape* indices = context.InputShape(0);
  if (indices == nullptr) return;
  auto out_rank = static_cast<int64_t>(indices->size()) + 1;
  int64_t requested = context.node().GetInt("axis", -1);
  std::optional<int64_t> axis = NormalizeAxis(requested, out_rank);
  if (!axis) {
    context.Warn("axis " + std::to_string(requested) + " is out of range for rank " +
                 std::to_string(out_rank));
    return;
  }
  // depth may be any numeric type; a float depth is truncated like the runtime does.
  Dim depth = Dim::Unknown();
  if (auto values = context.InputFloats(1); values && values->size() == 1) {
    depth = SizeFromFloat((*values)[0]);
  }
  Shape out = *indices;
  out.insert(out.begin() + *axis, depth);
  context.SetOutputShape(0, out);
}

// One row per input axis, one column per nonzero element (count known only at run time).
void NonZeroRule(InferenceContext& context) {
  std::optional<size_t> rank = context.InputRank(0);
  context.SetOutputType(
      0, DataType::kInt64,
      Shape{rank ? Dim::Known(static_cast<int64_t>(*rank)) : Dim::Unknown(), Dim::Unknown()});
}

// Values and Indices: the input's shape with the axis dim replaced by k.
void TopKRule(InferenceContext& context) {
  context.SetOutputDtype(0, context.InputDtype(0));
  context.SetOutputDtype(1, DataType::kInt64);
  const Shape* data = context.InputShape(0);
  if (data == nullptr) return;
  int64_t requested = context.node().GetInt("axis", -1);
  std::optional<int64_t> axis = NormalizeAxis(requested, static_cast<int64_t>(data->size()));
  if (!axis) {
    context.Warn("axis " + std::to_string(requested) + " is out of range for rank " +
                 std::to_string(data->size()));
    return;
  }
  // k is an attribute before opset 10 and a 1-element input from then on.
  std::optional<int64_t> k;
  if (context.opset() < 10) {
    int64_t attribute = context.node().GetInt("k", -1);
    if (attribute >= 0) k = attribute;
  } else if (auto values = context.InputInts(1); values && values->size() == 1) {
    k = (*values)[0];
  }
  Shape out = *data;
  const Dim& dim = (*data)[static_cast<size_t>(*axis)];
  if (k && dim.is_known() && *k > dim.value) {
    context.Warn("k = " + std::to_string(*k) + " exceeds the axis size " +
                 std::to_string(dim.value));
    return;
  }
  out[static_cast<size_t>(*axis)] = KnownOrUnknown(k);
  context.SetOutputShape(0, out);
  context.SetOutputShape(1, out);
}

}  // namespace

void RegisterIndexingRules(RuleRegistry& registry) {
  registry.AddTypeRule("", {"Gather"}, GatherRule);
  registry.AddTypeRule("", {"GatherElements"}, GatherElementsRule);
  registry.AddTypeRule("", {"GatherND"}, GatherNdRule);
  registry.AddTypeRule("", {"ScatterElements", "ScatterND"}, ScatterRule);
  registry.AddTypeRule("", {"OneHot"}, OneHotRule);
  registry.AddTypeRule("", {"NonZero"}, NonZeroRule);
  registry.AddTypeRule("", {"TopK"}, TopKRule);
}

}  // namespace fusionopt::shape_inference
