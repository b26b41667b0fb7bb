// Symbolic data propagation: the content of small integer tensors that carry shapes, in
// the manner of onnx's data propagation. PyTorch exports compute Reshape targets as
// Shape → Gather → Unsqueeze → Concat; following the elements through those ops (symbols
// included) lets Reshape produce [batch, seq, 4, 16] instead of four unknown dims.
// Shape and Size seed the data (generators.cc); constants are read directly.
#include <algorithm>

#include "shape_inference/context.h"

namespace fusionopt::shape_inference {
namespace {

void IdentityData(InferenceContext& context) {
  if (auto data = context.InputData(0)) context.SetOutputData(0, *data);
}

// Casting between integer types keeps shape values; to float or bool they stop being shapes.
void CastData(InferenceContext& context) {
  int64_t to = context.node().GetInt("to", 0);
  if (!IsKnownDataType(static_cast<int32_t>(to)) || !IsInteger(static_cast<DataType>(to))) {
    return;
  }
  IdentityData(context);
}

// Gather along axis 0 with constant indices: a scalar index gives a scalar.
void GatherData(InferenceContext& context) {
  std::optional<SymbolicData> data = context.InputData(0);
  std::optional<std::vector<int64_t>> indices = context.InputInts(1);
  std::optional<size_t> indices_rank = context.InputRank(1);
  if (!data || data->is_scalar || !indices || !indices_rank || *indices_rank > 1) return;
  int64_t axis = context.node().GetInt("axis", 0);
  if (axis != 0 && axis != -1) return;
  auto size = static_cast<int64_t>(data->elements.size());
  SymbolicData out;
  out.is_scalar = *indices_rank == 0;
  for (int64_t index : *indices) {
    std::optional<int64_t> position = NormalizeAxis(index, size);
    if (!position) return;
    out.elements.push_back(data->elements[static_cast<size_t>(*position)]);
  }
  context.SetOutputData(0, std::move(out));
}

// Scalar -> [scalar]: the usual step before concatenating gathered dims.
void UnsqueezeData(InferenceContext& context) {
  std::optional<SymbolicData> data = context.InputData(0);
  IntListArgument axes = context.ReadIntList("axes", 1, 13);
  if (!data || !data->is_scalar || !axes.values || axes.values->size() != 1) return;
  int64_t axis = axes.values->front();
  if (axis != 0 && axis != -1) return;
  data->is_scalar = false;
  context.SetOutputData(0, std::move(*data));
}

// [x] -> x.
void SqueezeData(InferenceContext& context) {
  std::optional<SymbolicData> data = context.InputData(0);
  if (!data || data->is_scalar || data->elements.size() != 1) return;
  data->is_scalar = true;
  context.SetOutputData(0, std::move(*data));
}

void ConcatData(InferenceContext& context) {
  int64_t axis = context.node().GetInt("axis", context.opset() < 4 ? 1 : 0);  // Concat-1: 1
  if (axis != 0 && axis != -1) return;
  SymbolicData out;
  for (size_t i = 0; i < context.num_inputs(); ++i) {
    std::optional<SymbolicData> part = context.InputData(i);
    if (!part || part->is_scalar) return;
    out.elements.insert(out.elements.end(), part->elements.begin(), part->elements.end());
  }
  context.SetOutputData(0, std::move(out));
}

// One axis of a 1-D tensor, with the same clamping as Slice's shape rule.
void SliceData(InferenceContext& context) {
  std::optional<SymbolicData> data = context.InputData(0);
  if (!data || data->is_scalar) return;
  IntListArgument starts = context.ReadIntList("starts", 1, 10);
  IntListArgument ends = context.ReadIntList("ends", 2, 10);
  IntListArgument axes = context.ReadIntList("axes", 3, 10);
  IntListArgument steps = context.ReadIntList("steps", 4, 10);
  if (!starts.values || !ends.values || starts.values->size() != 1 || ends.values->size() != 1) {
    return;
  }
  if (axes.present && (!axes.values || axes.values->size() != 1 ||
                       (axes.values->front() != 0 && axes.values->front() != -1))) {
    return;
  }
  int64_t step = 1;
  if (steps.present) {
    if (!steps.values || steps.values->size() != 1 || steps.values->front() == 0) return;
    step = steps.values->front();
  }
  SliceRange range = ClampSlice(static_cast<int64_t>(data->elements.size()), starts.values->front(),
                                ends.values->front(), step);
  SymbolicData out;
  for (int64_t k = 0; k < range.count; ++k) {
    out.elements.push_back(data->elements[static_cast<size_t>(range.first + k * step)]);
  }
  context.SetOutputData(0, std::move(out));
}

bool Is(const SymbolicInt& element, int64_t number) { return element.value == number; }

// Known numbers compute; x + 0, x - 0, x * 1, x / 1 keep a symbol; anything else is unknown.
SymbolicInt Combine(const std::string& op, const SymbolicInt& a, const SymbolicInt& b) {
  if (a.is_known() && b.is_known()) {
    int64_t x = *a.value;
    int64_t y = *b.value;
    int64_t result = 0;
    bool overflow = op == "Add"   ? __builtin_add_overflow(x, y, &result)
                    : op == "Sub" ? __builtin_sub_overflow(x, y, &result)
                    : op == "Mul" ? __builtin_mul_overflow(x, y, &result)
                                  : (y == 0 || (x == INT64_MIN && y == -1));
    if (op == "Div" && !overflow) result = x / y;  // integer Div truncates, like C++
    return overflow ? SymbolicInt::Unknown() : SymbolicInt::Known(result);
  }
  if ((op == "Add" || op == "Sub") && Is(b, 0)) return a;
  if (op == "Add" && Is(a, 0)) return b;
  if ((op == "Mul" || op == "Div") && Is(b, 1)) return a;
  if (op == "Mul" && Is(a, 1)) return b;
  if (op == "Mul" && (Is(a, 0) || Is(b, 0))) return SymbolicInt::Known(0);
  return SymbolicInt::Unknown();
}

// Elementwise with numpy broadcasting of a 1-element side.
void ArithmeticData(InferenceContext& context) {
  std::optional<SymbolicData> a = context.InputData(0);
  std::optional<SymbolicData> b = context.InputData(1);
  if (!a || !b) return;
  size_t size_a = a->elements.size();
  size_t size_b = b->elements.size();
  if (size_a != size_b && size_a != 1 && size_b != 1) return;
  if (size_a == 0 || size_b == 0) return;  // an empty operand: nothing to track
  SymbolicData out;
  out.is_scalar = a->is_scalar && b->is_scalar;
  const std::string& op = context.node().op_type();
  for (size_t i = 0; i < std::max(size_a, size_b); ++i) {
    out.elements.push_back(
        Combine(op, a->elements[size_a == 1 ? 0 : i], b->elements[size_b == 1 ? 0 : i]));
  }
  context.SetOutputData(0, std::move(out));
}

}  // namespace

void RegisterDataPropagationRules(RuleRegistry& registry) {
  registry.AddDataRule("", {"Identity"}, IdentityData);
  registry.AddDataRule("", {"Cast"}, CastData);
  registry.AddDataRule("", {"Gather"}, GatherData);
  registry.AddDataRule("", {"Unsqueeze"}, UnsqueezeData);
  registry.AddDataRule("", {"Squeeze"}, SqueezeData);
  registry.AddDataRule("", {"Concat"}, ConcatData);
  registry.AddDataRule("", {"Slice"}, SliceData);
  registry.AddDataRule("", {"Add", "Sub", "Mul", "Div"}, ArithmeticData);
}

}  // namespace fusionopt::shape_inference
