// Ops that make tensors from attributes or from another tensor's shape: Constant,
// ConstantOfShape, Range, EyeLike, Shape, Size. Shape and Size also seed the tracked
// symbolic data that later Reshape/Expand/ConstantOfShape nodes read.
#include <algorithm>
#include <cmath>

#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

Shape ShapeOfTensor(const Tensor& tensor) {
  Shape shape;
  for (int64_t size : tensor.dims()) shape.push_back(Dim::Known(size));
  return shape;
}

Shape VectorOf(size_t count) { return {Dim::Known(static_cast<int64_t>(count))}; }

void ConstantRule(InferenceContext& context) {
  for (const Attribute& attribute : context.node().attributes()) {
    const std::string& name = attribute.name;
    if (name == "value" && attribute.kind == AttributeKind::kTensor && attribute.t) {
      context.SetOutputType(0, attribute.t->dtype(), ShapeOfTensor(*attribute.t));
    } else if (name == "value_int") {
      context.SetOutputType(0, DataType::kInt64, Shape{});
    } else if (name == "value_ints") {
      context.SetOutputType(0, DataType::kInt64, VectorOf(attribute.ints.size()));
    } else if (name == "value_float") {
      context.SetOutputType(0, DataType::kFloat, Shape{});
    } else if (name == "value_floats") {
      context.SetOutputType(0, DataType::kFloat, VectorOf(attribute.floats.size()));
    } else if (name == "value_string") {
      context.SetOutputType(0, DataType::kString, Shape{});
    } else if (name == "value_strings") {
      context.SetOutputType(0, DataType::kString, VectorOf(attribute.strings.size()));
    }
    // sparse_value: the dense shape lives in the opaque SparseTensorProto; left unknown.
  }
}

std::optional<Shape> ShapeFromData(const InferenceContext& context, const SymbolicData& data) {
  Shape shape;
  for (const SymbolicInt& element : data.elements) {
    if (element.is_known() && *element.value < 0) {
      context.Warn("negative size " + std::to_string(*element.value) + " in shape");
      return std::nullopt;
    }
    shape.push_back(element.is_known()      ? Dim::Known(*element.value)
                    : element.is_symbolic() ? Dim::Symbol(element.symbol)
                                            : Dim::Unknown());
  }
  return shape;
}

// The output's shape is the input's content; its type is the `value` attribute's (float).
void ConstantOfShapeRule(InferenceContext& context) {
  const Attribute* value = context.node().FindAttribute("value");
  bool has_tensor = value != nullptr && value->kind == AttributeKind::kTensor && value->t;
  context.SetOutputDtype(0, has_tensor ? value->t->dtype() : DataType::kFloat);
  if (std::optional<SymbolicData> data = context.InputData(0)) {
    if (auto shape = ShapeFromData(context, *data)) context.SetOutputShape(0, *shape);
  } else if (auto length = context.InputLength(0); length && context.InputRank(0) == 1u) {
    context.SetOutputRank(0, *length);
  }
}

std::optional<SymbolicInt> ScalarData(const InferenceContext& context, size_t input) {
  std::optional<SymbolicData> data = context.InputData(input);
  if (!data || data->elements.size() != 1) return std::nullopt;
  return data->elements[0];
}

std::optional<Dim> CountRange(const InferenceContext& context, double start, double limit,
                              double delta) {
  if (delta == 0) {
    context.Warn("delta is 0");
    return std::nullopt;
  }
  return SizeFromFloat(std::max(std::ceil((limit - start) / delta), 0.0));
}

// max(ceil((limit - start) / delta), 0) elements; Range(0, n, 1) over a symbolic n has n.
Dim RangeLength(const InferenceContext& context) {
  std::optional<SymbolicInt> start = ScalarData(context, 0);
  std::optional<SymbolicInt> limit = ScalarData(context, 1);
  std::optional<SymbolicInt> delta = ScalarData(context, 2);
  if (start && limit && delta) {
    if (start->is_known() && limit->is_known() && delta->is_known()) {
      return CountRange(context, static_cast<double>(*start->value),
                        static_cast<double>(*limit->value), static_cast<double>(*delta->value))
          .value_or(Dim::Unknown());
    }
    if (start->value == 0 && delta->value == 1 && limit->is_symbolic()) {
      return Dim::Symbol(limit->symbol);
    }
  }
  auto starts = context.InputFloats(0);
  auto limits = context.InputFloats(1);
  auto deltas = context.InputFloats(2);
  if (starts && limits && deltas && starts->size() == 1 && limits->size() == 1 &&
      deltas->size() == 1) {
    return CountRange(context, (*starts)[0], (*limits)[0], (*deltas)[0]).value_or(Dim::Unknown());
  }
  return Dim::Unknown();
}

void RangeRule(InferenceContext& context) {
  context.SetOutputType(0, context.InputDtype(0), Shape{RangeLength(context)});
}

void EyeLikeRule(InferenceContext& context) {
  int64_t dtype = context.node().GetInt("dtype", 0);
  context.SetOutputDtype(0, IsKnownDataType(static_cast<int32_t>(dtype))
                                ? static_cast<DataType>(dtype)
                                : context.InputDtype(0));
  const Shape* shape = context.InputShape(0);
  if (shape != nullptr && shape->size() != 2) {
    context.Warn("EyeLike needs a 2-D input, got " + ShapeToString(*shape));
    return;
  }
  if (shape != nullptr) context.SetOutputShape(0, *shape);
}

// Shape's [start, end) window over the input's axes (opset 15), clamped like Slice.
std::pair<size_t, size_t> ShapeWindow(const InferenceContext& context, size_t rank) {
  if (context.opset() < 15) return {0, rank};
  auto clamp = [rank](int64_t position) {
    auto signed_rank = static_cast<int64_t>(rank);
    if (position < 0) position += signed_rank;
    return static_cast<size_t>(std::clamp<int64_t>(position, 0, signed_rank));
  };
  size_t start = clamp(context.node().GetInt("start", 0));
  size_t end = clamp(context.node().GetInt("end", static_cast<int64_t>(rank)));
  return {start, std::max(start, end)};
}

void ShapeRule(InferenceContext& context) {
  std::optional<size_t> rank = context.InputRank(0);
  Dim length = Dim::Unknown();
  if (rank) {
    auto [start, end] = ShapeWindow(context, *rank);
    length = Dim::Known(static_cast<int64_t>(end - start));
  }
  context.SetOutputType(0, DataType::kInt64, Shape{length});
}

void ShapeData(InferenceContext& context) {
  const Shape* shape = context.InputShape(0);
  if (shape == nullptr) return;
  auto [start, end] = ShapeWindow(context, shape->size());
  SymbolicData data;
  for (size_t axis = start; axis < end; ++axis) {
    data.elements.push_back(SymbolicInt::FromDim((*shape)[axis]));
  }
  context.SetOutputData(0, std::move(data));
}

void SizeRule(InferenceContext& context) { context.SetOutputType(0, DataType::kInt64, Shape{}); }

void SizeData(InferenceContext& context) {
  const Shape* shape = context.InputShape(0);
  if (shape == nullptr) return;
  Dim count = ProductOf(*shape, 0, shape->size()).ToDim();
  context.SetOutputData(0, SymbolicData{{SymbolicInt::FromDim(count)}, true});
}

}  // namespace

void RegisterGeneratorRules(RuleRegistry& registry) {
  registry.AddTypeRule("", {"Constant"}, ConstantRule);
  registry.AddTypeRule("", {"ConstantOfShape"}, ConstantOfShapeRule);
  registry.AddTypeRule("", {"Range"}, RangeRule);
  registry.AddTypeRule("", {"EyeLike"}, EyeLikeRule);
  registry.AddTypeRule("", {"Shape"}, ShapeRule);
  registry.AddDataRule("", {"Shape"}, ShapeData);
  registry.AddTypeRule("", {"Size"}, SizeRule);
  registry.AddDataRule("", {"Size"}, SizeData);
}

}  // namespace fusionopt::shape_inference
