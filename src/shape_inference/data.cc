// Symbolic data propagation: the content of small integer tensors that carry shapes, in
// the manner of onnx's data propagation. PyTorch exports compute Reshape targets as
// Shape → Gather → Unsqueeze → Concat; following the elements through those ops (symbols
// included) lets Reshape produce [batch, seq, 4, 16] instead of four unknown dims.
// Shape and Size seed the data (generators.cc); constants are read directly.
#include <algorithm>
#include <functional>

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

// Products and exact quotients of dims (sizes are never negative): batch × 4 is the symbol
// "4*batch", and "4*batch" / 4 is batch again; anything else is unknown.
SymbolicInt DimArithmetic(const std::string& op, const SymbolicInt& a, const SymbolicInt& b) {
  if ((op != "Mul" && op != "Div") || (a.is_known() && *a.value < 0) || (b.is_known() && *b.value < 0) ||
      (!a.is_known() && !a.is_symbolic()) || (!b.is_known() && !b.is_symbolic())) {
    return SymbolicInt::Unknown();
  }
  auto as_dim = [](const SymbolicInt& element) { return element.is_known() ? Dim::Known(*element.value) : Dim::Symbol(element.symbol); };
  DimProduct left;
  left.Multiply(as_dim(a));
  if (op == "Mul") {
    left.Multiply(as_dim(b));
    return SymbolicInt::FromDim(left.ToDim());
  }
  DimProduct right;
  right.Multiply(as_dim(b));
  std::optional<DimProduct> quotient = left.DividedBy(right);
  return quotient ? SymbolicInt::FromDim(quotient->ToDim()) : SymbolicInt::Unknown();
}

// Known numbers compute; x + 0, x - 0, x * 1, x / 1 keep a symbol; products and exact quotients
// of dims are symbols (DimArithmetic); anything else is unknown.
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
  return DimArithmetic(op, a, b);
}

// The elementwise size of operands whose 1-element sides broadcast; nullopt otherwise.
std::optional<size_t> BroadcastLength(std::initializer_list<const SymbolicData*> operands) {
  size_t length = 1;
  for (const SymbolicData* operand : operands) {
    size_t size = operand->elements.size();
    if (size == 0) return std::nullopt;
    if (size == 1) continue;
    if (length != 1 && length != size) return std::nullopt;
    length = size;
  }
  return length;
}

const SymbolicInt& ElementAt(const SymbolicData& data, size_t index) {
  return data.elements[data.elements.size() == 1 ? 0 : index];
}

// Elementwise with numpy broadcasting of a 1-element side, each pair of elements combined.
void ElementwiseData(InferenceContext& context,
                     const std::function<SymbolicInt(const SymbolicInt&, const SymbolicInt&)>& combine) {
  std::optional<SymbolicData> a = context.InputData(0);
  std::optional<SymbolicData> b = context.InputData(1);
  if (!a || !b) return;
  std::optional<size_t> length = BroadcastLength({&*a, &*b});
  if (!length) return;
  SymbolicData out;
  out.is_scalar = a->is_scalar && b->is_scalar;
  for (size_t i = 0; i < *length; ++i) out.elements.push_back(combine(ElementAt(*a, i), ElementAt(*b, i)));
  context.SetOutputData(0, std::move(out));
}

void ArithmeticData(InferenceContext& context) {
  const std::string& op = context.node().op_type();
  ElementwiseData(context, [&op](const SymbolicInt& a, const SymbolicInt& b) { return Combine(op, a, b); });
}

// A 1-D or scalar content reshaped to 1-D or scalar (TorchScript's Reshape(Concat(...), [-1]))
// keeps its elements; anything of higher rank is not shape data.
void ReshapeData(InferenceContext& context) {
  std::optional<SymbolicData> data = context.InputData(0);
  const ValueType* output = context.OutputType(0);
  if (!data || output == nullptr || !output->shape || output->shape->size() > 1) return;
  data->is_scalar = output->shape->empty();
  if (data->is_scalar && data->elements.size() != 1) return;
  context.SetOutputData(0, std::move(*data));
}

// A small filled integer vector: TorchScript builds expand's "-1 means keep" test from
// ConstantOfShape(Shape(target)) * -1.
void ConstantOfShapeData(InferenceContext& context) {
  std::optional<std::vector<int64_t>> shape = context.InputInts(0);
  const Attribute* value = context.node().FindAttribute("value");
  if (!shape || shape->size() > 1 || value == nullptr || value->kind != AttributeKind::kTensor ||
      !value->t || value->t->NumElements() != 1) {
    return;
  }
  std::optional<std::vector<int64_t>> fill = value->t->AsInt64s();
  int64_t count = shape->empty() ? 1 : shape->front();
  if (!fill || count < 0 || count > static_cast<int64_t>(kMaxSymbolicElements)) return;
  SymbolicData out;
  out.is_scalar = shape->empty();
  out.elements.assign(static_cast<size_t>(count), SymbolicInt::Known(fill->front()));
  context.SetOutputData(0, std::move(out));
}

// Whether two elements are equal, where that is decidable: symbols come from dims, which
// are never negative, so a symbol differs from every negative number.
std::optional<bool> ElementsEqual(const SymbolicInt& a, const SymbolicInt& b) {
  if (a.is_known() && b.is_known()) return *a.value == *b.value;
  if (a.is_symbolic() && b.is_symbolic() && a.symbol == b.symbol) return true;
  if (a.is_symbolic() && b.is_known() && *b.value < 0) return false;
  if (b.is_symbolic() && a.is_known() && *a.value < 0) return false;
  return std::nullopt;
}

void EqualData(InferenceContext& context) {
  ElementwiseData(context, [](const SymbolicInt& a, const SymbolicInt& b) {
    std::optional<bool> equal = ElementsEqual(a, b);
    return equal ? SymbolicInt::Known(*equal ? 1 : 0) : SymbolicInt::Unknown();
  });
}

// Picks per element where the condition is known: expand's target with -1 replaced by the
// input's dims in TorchScript exports.
void WhereData(InferenceContext& context) {
  std::optional<SymbolicData> condition = context.InputData(0);
  std::optional<SymbolicData> x = context.InputData(1);
  std::optional<SymbolicData> y = context.InputData(2);
  if (!condition || !x || !y) return;
  std::optional<size_t> length = BroadcastLength({&*condition, &*x, &*y});
  if (!length) return;
  SymbolicData out;
  out.is_scalar = condition->is_scalar && x->is_scalar && y->is_scalar;
  for (size_t i = 0; i < *length; ++i) {
    const SymbolicInt& chosen = ElementAt(*condition, i);
    out.elements.push_back(!chosen.is_known() ? SymbolicInt::Unknown()
                           : *chosen.value != 0 ? ElementAt(*x, i)
                                                : ElementAt(*y, i));
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
  registry.AddDataRule("", {"Reshape"}, ReshapeData);
  registry.AddDataRule("", {"ConstantOfShape"}, ConstantOfShapeData);
  registry.AddDataRule("", {"Equal"}, EqualData);
  registry.AddDataRule("", {"Where"}, WhereData);
}

}  // namespace fusionopt::shape_inference
